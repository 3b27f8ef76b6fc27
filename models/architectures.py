"""Architectures by name: the selector encoder, the predictor encoder and the output head.

- ``rcnn``, ``lstm``, ``cnn``: that encoder on both sides and a linear output layer
  (Lei et al., 2016; Bastings et al., 2019, appendix B).
- ``bow``: the bag of unigrams and hashed bigrams (:mod:`rationale_cli.models.encoders.bow`) on both
  sides: its cheap contextual states for the selector, the gated mean of the rationale's n-grams
  for the predictor, and a linear output layer. It reads word ids, so no word embeddings exist
  when both sides are ``bow`` (or ``hf``); ``--predictor-encoder bow`` keeps another selector.
- ``l2x``: the L2X selector network (global and local branch, :mod:`rationale_cli.models.encoders.l2x`;
  SIMPLE's beer setup, Ahmed et al., 2023, appendix C.3) and the convolutional predictor below.
- ``sst-simple`` / ``sst-complex``: the selectors of Paulus et al. (2020, appendix D.6):
  dropout and width-1 convolutions over the word embeddings (the selector's own
  linear maps), or first two convolutions of ``hidden`` filters of width 3 with ReLU.

- ``linear`` (a predictor side only): a linear model on the rationale's TF-IDF n-grams, fitted
  in one pass on a fixed selector's rationales (:mod:`rationale_cli.models.encoders.tfidf`); its
  outputs are the model's, so no output layer follows it.
- ``hf``: a pretrained transformer on both sides (:mod:`rationale_cli.models.encoders.hf`), from the
  :class:`~rationale_cli.models.encoders.hf.Pretrained` given; its width is the transformer's.

The sides may differ (:func:`build_architecture` with ``selector`` or ``predictor``): each
side one of :data:`SIDES`, e.g. a transformer selector feeding an RCNN predictor, and a linear
output layer.

The convolutional predictor of ``l2x`` and ``sst-*`` (D.6): two width-3 convolutions of
``hidden`` filters with ReLU over the masked embeddings, max-pooled, then dropout, a
``hidden``-unit ReLU layer and the output layer. The papers use 100 filters.

:data:`ARCHITECTURES` maps each name to an :class:`ArchitectureEntry` (a one-line help
and a builder); adding an architecture is one entry there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from rationale_cli.models.encoders import ENCODERS, CNNEncoder, Encoder, L2XEncoder, build_encoder
from rationale_cli.models.encoders.hf import HFEncoder, Pretrained
from rationale_cli.models.encoders.tfidf import TfidfLinear
from rationale_cli.models.native.dropout import Dropout

TRANSFORMER = "hf"  # the pretrained transformer: an architecture and a side of its own
SIDES = (*ENCODERS, TRANSFORMER)  # what each side of a mixed pair may be
LINEAR = "linear"  # the fitted TF-IDF linear model: a predictor side only
PREDICTOR_SIDES = (*SIDES, LINEAR)


@dataclass
class Architecture:
    selector_encoder: Encoder | None
    predictor_encoder: Encoder
    output: nn.Module

    @property
    def reads_vectors(self) -> bool:
        """Whether an encoder reads word embeddings (not both reading word ids: hf, bow)."""
        return not all(e is None or e.reads_ids for e in (self.selector_encoder, self.predictor_encoder))


@dataclass(frozen=True)
class ArchitectureEntry:
    """A registry entry: ``help`` (one line) and ``build(input_size, hidden_size, outputs, dropout,
    vocab_size=None)``, all three parts (the selector encoder included)."""

    help: str
    build: Callable[..., Architecture]


def _same_encoder(kind: str) -> Callable[[int, int, int, float], Architecture]:
    """Encoder ``kind`` on both sides and a linear output layer."""
    def build(input_size: int, hidden_size: int, outputs: int, dropout: float,
              vocab_size: int | None = None) -> Architecture:
        selector = build_encoder(kind, input_size, hidden_size, dropout=dropout, vocab_size=vocab_size)
        predictor = build_encoder(kind, input_size, hidden_size, dropout=dropout, vocab_size=vocab_size)
        return Architecture(selector, predictor, nn.Sequential(Dropout(dropout),
                                                               nn.Linear(predictor.output_size, outputs)))
    return build


def _conv_predictor(selector: Callable[[int, int, float], Encoder]) -> Callable[[int, int, int, float], Architecture]:
    """``selector(input_size, hidden_size, dropout)`` and the D.6 convolutional predictor and head."""
    def build(input_size: int, hidden_size: int, outputs: int, dropout: float, vocab_size: int | None = None
              ) -> Architecture:
        return Architecture(selector(input_size, hidden_size, dropout), CNNEncoder(input_size, hidden_size, layers=2),
                            nn.Sequential(Dropout(dropout), nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                                          nn.Linear(hidden_size, outputs)))
    return build


ARCHITECTURES: dict[str, ArchitectureEntry] = {
    "rcnn": ArchitectureEntry("bidirectional bigram RCNN of Lei et al. (2016) on both sides",
                              _same_encoder("rcnn")),
    "lstm": ArchitectureEntry("bidirectional LSTM on both sides", _same_encoder("lstm")),
    "cnn": ArchitectureEntry("one width-3 convolution, ReLU and max-pooling on both sides", _same_encoder("cnn")),
    "l2x": ArchitectureEntry(
        "the L2X selector (global and local branch) and a convolutional predictor (SIMPLE's beer setup)",
        _conv_predictor(lambda i, h, dropout: L2XEncoder(i, h, dropout=dropout))),
    "sst-simple": ArchitectureEntry(
        "width-1 convolutions as selector and a convolutional predictor (Paulus et al. 2020, D.6)",
        _conv_predictor(lambda i, h, dropout: CNNEncoder(i, h, layers=0, dropout=dropout))),
    "sst-complex": ArchitectureEntry(
        "two width-3 convolutions as selector and a convolutional predictor (Paulus et al. 2020, D.6)",
        _conv_predictor(lambda i, h, dropout: CNNEncoder(i, h, layers=2, dropout=dropout))),
    "bow": ArchitectureEntry("a bag of the rationale's unigrams and hashed bigrams (fastText-like) on both sides",
                             _same_encoder("bow")),
}


def side(kind: str, input_size: int, hidden_size: int, dropout: float, pretrained: Pretrained | None,
         vocab_size: int | None = None) -> Encoder:
    """One encoder of :data:`SIDES`; the transformer needs ``pretrained``, the bag of n-grams ``vocab_size``."""
    if kind != TRANSFORMER:
        return build_encoder(kind, input_size, hidden_size, dropout=dropout, vocab_size=vocab_size)
    if pretrained is None:
        raise ValueError("the hf encoder needs a pretrained transformer")
    return HFEncoder(pretrained)


def build_architecture(name: str, input_size: int, hidden_size: int, outputs: int, *, dropout: float,
                       needs_selector: bool, selector: str | None = None, predictor: str | None = None,
                       pretrained: Pretrained | None = None, vocab_size: int | None = None) -> Architecture:
    """The parts of :data:`ARCHITECTURES` ``name`` (or of the transformer, ``hf``, from
    ``pretrained``); with ``selector`` or ``predictor``, that encoder of :data:`SIDES` on its
    side (the other side ``name``'s encoder) and a linear output layer (none after the ``linear``
    predictor, whose outputs are the model's). No selector encoder
    when ``needs_selector`` is false. ``vocab_size``: the vocabulary's, which a ``bow`` side needs."""
    if name not in ARCHITECTURES and name != TRANSFORMER:
        raise ValueError(f"unknown encoder {name!r}; expected one of {', '.join((*ARCHITECTURES, TRANSFORMER))}")
    if selector or predictor or name == TRANSFORMER:
        kinds = (selector or name, predictor or name)
        if kinds[0] not in SIDES or kinds[1] not in PREDICTOR_SIDES:
            raise ValueError(f"selector and predictor encoders {' and '.join(kinds)}: each side is one of "
                             f"{', '.join(SIDES)} ({LINEAR}: a predictor only)")
        first = side(kinds[0], input_size, hidden_size, dropout, pretrained, vocab_size) if needs_selector else None
        if kinds[1] == LINEAR:
            if vocab_size is None:
                raise ValueError("the linear predictor needs the vocabulary size")
            return Architecture(first, TfidfLinear(vocab_size, outputs), nn.Identity())
        second = side(kinds[1], input_size, hidden_size, dropout, pretrained, vocab_size)
        parts = Architecture(first, second, nn.Sequential(Dropout(dropout), nn.Linear(second.output_size, outputs)))
    else:
        parts = ARCHITECTURES[name].build(input_size, hidden_size, outputs, dropout, vocab_size=vocab_size)
    if not needs_selector:
        parts.selector_encoder = None
    return parts
