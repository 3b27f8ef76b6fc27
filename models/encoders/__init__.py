"""Encoders: ``encoder(x [B,T,D], mask [B,T]) -> (states [B,T,H], summary [B,H])``.

The mask is both the padding mask and, for the predictor, the rationale gate:
the composed model calls ``encoder(emb * z[..., None], pad_mask * z)``.

- ``rcnn`` (:class:`RCNNEncoder`): bigram RCNN of Lei et al. (2016), as in
  Bastings et al. (2019, App. B.1.1); the encoder of the beer experiments.
- ``lstm`` (:class:`LSTMEncoder`): LSTM cells with the same gating.
- ``cnn`` (:class:`CNNEncoder`): convolutions + ReLU + masked max-pooling
  (the L2X-style encoders of Paulus et al., 2020 and Ahmed et al., 2023);
- :class:`L2XEncoder`: the L2X selector network with a global and a local branch.
- ``bow`` (:class:`BagEncoder`): a fastText-like bag of unigrams and hashed bigrams over word
  ids (its own vectors, ``reads_ids``), a bigram weighted by the product of its tokens' gates;
  cheap contextual states, so it serves either side (:mod:`rationale_cli.models.encoders.bow`).

:data:`ENCODERS` maps each name to its builder (adding an encoder: its module and
one entry there); the base classes are in :mod:`rationale_cli.models.encoders.base`. Named
pairings of a selector encoder, a predictor encoder and an output head
(the papers' architectures) are in :mod:`rationale_cli.models.architectures`.

Recurrent encoders *skip* steps with mask 0 (the state is carried over), so
padding and unselected tokens never change a result; fractional masks
interpolate. ``output_size`` is ``2 * hidden_size`` for bidirectional
recurrent encoders, ``hidden_size`` otherwise. An encoder over word ids (``bow``) is sized
by the vocabulary too (``vocab_size``).
"""

from __future__ import annotations

from typing import Callable

from rationale_cli.models.encoders.base import Encoder, RecurrentEncoder
from rationale_cli.models.encoders.bow import BagEncoder
from rationale_cli.models.encoders.cnn import CNNEncoder
from rationale_cli.models.encoders.l2x import L2XEncoder
from rationale_cli.models.encoders.lstm import LSTMEncoder
from rationale_cli.models.encoders.rcnn import RCNNEncoder

__all__ = ["ENCODERS", "BagEncoder", "CNNEncoder", "Encoder", "L2XEncoder", "LSTMEncoder", "RCNNEncoder", "RecurrentEncoder",
           "build_encoder"]

EncoderBuilder = Callable[..., Encoder]
"""``builder(input_size, hidden_size, *, bidirectional, dropout, kernel_size, layers, vocab_size) -> Encoder``."""


def _recurrent(cls: type[RecurrentEncoder]) -> EncoderBuilder:
    """The builder of a recurrent encoder: ``bidirectional`` applies, the CNN options do not."""
    def build(input_size: int, hidden_size: int, *, bidirectional: bool, dropout: float, **_) -> Encoder:
        return cls(input_size, hidden_size, bidirectional=bidirectional, dropout=dropout)
    return build


def _cnn(input_size: int, hidden_size: int, *, dropout: float, kernel_size: int, layers: int, **_) -> Encoder:
    return CNNEncoder(input_size, hidden_size, kernel_size=kernel_size, layers=layers, dropout=dropout)


def _bow(input_size: int, hidden_size: int, *, dropout: float, vocab_size: int | None, **_) -> Encoder:
    if vocab_size is None:
        raise ValueError("the bow encoder needs the vocabulary size")
    return BagEncoder(vocab_size, hidden_size, dropout=dropout)


ENCODERS: dict[str, EncoderBuilder] = {"rcnn": _recurrent(RCNNEncoder), "lstm": _recurrent(LSTMEncoder), "cnn": _cnn,
                                       "bow": _bow}


def build_encoder(
    kind: str,
    input_size: int,
    hidden_size: int,
    *,
    bidirectional: bool = True,
    dropout: float = 0.0,
    kernel_size: int = 3,
    layers: int = 1,
    vocab_size: int | None = None,
) -> Encoder:
    """Encoder by name (one of :data:`ENCODERS`). ``bidirectional`` applies to
    the recurrent encoders, ``kernel_size`` (odd) and ``layers`` to the CNN, ``vocab_size``
    (needed there) to the bag of n-grams."""
    if kind not in ENCODERS:
        raise ValueError(f"unknown encoder {kind!r}; expected one of {', '.join(ENCODERS)}")
    return ENCODERS[kind](input_size, hidden_size, bidirectional=bidirectional, dropout=dropout,
                          kernel_size=kernel_size, layers=layers, vocab_size=vocab_size)
