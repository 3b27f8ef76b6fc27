"""The select-then-predict model (Lei et al., 2016; Bastings et al., 2019, section 5).

An embedding layer feeds a selector encoder whose states a :class:`Selector`
turns into a weighted set of masks; a predictor encoder reads each masked
input ``x * z`` (recurrent encoders skip tokens with ``z = 0``, convolutions
read zeros there; a transformer reads the words with ``z > 0`` alone, :mod:`rationale_cli.models.encoders.hf`;
a bag of n-grams weighs each word by its z and each bigram by the product of its two z,
:mod:`rationale_cli.models.encoders.bow`)
and an output layer makes the prediction. The encoders and the output layer come from a named
architecture (:mod:`rationale_cli.models.architectures`). Every extractor plugs in through the Selection
interface, so nothing here depends on which one is used.

Two remedies against degeneration change the model's shape (:mod:`rationale_cli.runs.remedies`):
``share_encoder`` makes the predictor read the rationale with the selector's own encoder (FR,
Liu et al. 2022, section 3: one encoder, two output layers), and ``generators`` N > 1 adds N - 1
selectors, each with its own encoder, whose rationales the one predictor also learns from in
training (MGR, Liu et al. 2023, section 4); the first selector alone decodes at test time.
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor, nn

from rationale_cli.models.architectures import build_architecture
from rationale_cli.models.budget import top_k_mask
from rationale_cli.models.coherent import in_runs, in_sentences
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.models.encoders.base import TokenRows
from rationale_cli.models.encoders.hf import HFEncoder, Pretrained
from rationale_cli.models.options import Options
from rationale_cli.models.selection import Selection, Selector, selected_share
from rationale_cli.models.selectors import build_selector, selector_class


class RationaleModel(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        hidden_size: int,
        outputs: int,
        *,
        encoder: str = "rcnn",
        extractor: str | type[Selector] | Selector = "full",
        extractor_options: Options | dict | None = None,
        dropout: float = 0.1,
        embeddings: Tensor | None = None,
        freeze_embeddings: bool = True,
        selector_encoder: str | None = None,
        predictor_encoder: str | None = None,
        pretrained: Pretrained | None = None,
        support: Decoding | None = None,
        share_encoder: bool = False,
        generators: int = 1,
    ):
        """``encoder`` names the architecture (:mod:`rationale_cli.models.architectures`); ``selector_encoder``
        or ``predictor_encoder`` another encoder on that side; ``pretrained`` the transformer
        of an ``hf`` side; ``extractor_options`` the extractor's: its ``Options``, checked once
        where they were made and kept as they are, or their values (checked by the selector).
        The word embeddings exist only when an encoder reads them. With ``support``, the
        selector side (embeddings, selector encoder, selector) is fixed and decodes as
        ``support`` says in training too, and that is the model's own decoding: only the
        predictor learns (two-stage training, :mod:`rationale_cli.training.support`).
        ``share_encoder`` (FR) and ``generators`` (MGR): see the module's docstring."""
        super().__init__()
        kind = selector_class(extractor) if isinstance(extractor, str) else extractor
        if generators < 1:
            raise ValueError(f"generators {generators}: expected 1 or more")
        if (share_encoder or generators > 1) and (support is not None or not kind.needs_states or kind.reads_ids):
            raise ValueError("a shared encoder or several generators need a selector that learns from an encoder's "
                             "states (not full, saliency or a fixed support)")
        if share_encoder and generators > 1:
            raise ValueError("a shared encoder and several generators do not go together")

        def architecture():
            return build_architecture(encoder, embedding_dim, hidden_size, outputs, dropout=dropout,
                                      needs_selector=kind.needs_states, selector=selector_encoder,
                                      predictor=predictor_encoder, pretrained=pretrained, vocab_size=vocab_size)

        parts = architecture()
        if share_encoder and type(parts.selector_encoder) is not type(parts.predictor_encoder):
            raise ValueError(f"a shared encoder needs one kind of encoder on both sides; here the selector's is "
                             f"{type(parts.selector_encoder).__name__}, the predictor's "
                             f"{type(parts.predictor_encoder).__name__}")
        self.embed = nn.Embedding(vocab_size, embedding_dim, padding_idx=0) if parts.reads_vectors else None
        if embeddings is not None:
            if self.embed is None:
                raise ValueError("word vectors are read by an rcnn, lstm or cnn side; both sides here read word ids "
                                 "(hf, bow)")
            self.embed.weight.data.copy_(embeddings)
        if self.embed is not None:
            self.embed.weight.requires_grad_(not freeze_embeddings)
        self.selector_encoder = parts.selector_encoder
        states = self.selector_encoder.output_size if self.selector_encoder is not None else 0
        if kind.reads_ids:
            states = vocab_size
        own = {"options": extractor_options} if isinstance(extractor_options, Options) else (extractor_options or {})

        def selector() -> Selector:
            if isinstance(extractor, str):
                return build_selector(extractor, states, **own)
            return extractor(states, **own)

        if isinstance(extractor, Selector):
            if generators > 1:
                raise ValueError("several generators need the extractor's name or class, not one selector")
            self.selector = extractor
        else:
            self.selector = selector()
        # MGR's other generators: an encoder and a selector each, as the first
        self.generators = nn.ModuleList(nn.ModuleDict({"encoder": architecture().selector_encoder,
                                                       "selector": selector()}) for _ in range(generators - 1))
        self.shares_encoder = share_encoder
        if not share_encoder:  # shared: the selector's, not registered twice (its weights are saved once)
            self.predictor_encoder = parts.predictor_encoder
        self.output = parts.output
        self.support = support
        if support is not None:
            for part in self.selector_side():
                part.requires_grad_(False)

    @property
    def device(self) -> torch.device:
        """Where the model's weights are (a run of fixed and fitted parts may have no parameters,
        only buffers)."""
        return next(itertools.chain(self.parameters(), self.buffers())).device

    @property
    def predictor_encoder(self):
        """The encoder that reads the rationale: the selector's own with a shared encoder (FR)."""
        return self.selector_encoder if self.shares_encoder else self._modules["predictor_encoder"]

    def generator_learning_rates(self) -> list[tuple[list[nn.Parameter], float]]:
        """MGR's other generators' parameters, each with its learning rate as a multiple of the
        first's: generator i (from 0) learns at i + 1 times it (Liu et al. 2023, section 4.3)."""
        return [(list(g.parameters()), float(i + 2)) for i, g in enumerate(self.generators)]

    def selector_side(self) -> list[nn.Module]:
        """The modules that choose the rationale (a fixed support's whole side)."""
        return [part for part in (self.embed, self.selector_encoder, self.selector) if part is not None]

    def embedded(self, ids: Tensor) -> Tensor | None:
        """The word embeddings of ``ids`` ``[B, T, D]``, None when no encoder reads them."""
        return None if self.embed is None else self.embed(ids)

    def predictor_parameters(self) -> list[nn.Parameter]:
        """The predictor's parameters (its encoder and the output layer), for its own learning rate;
        with a shared encoder (FR) the output layer alone (the encoder learns at the selector's rate)."""
        own = [] if self.shares_encoder else [*self.predictor_encoder.parameters()]
        return [*own, *self.output.parameters()]

    def transformers(self) -> list[HFEncoder]:
        """The model's transformer encoders (``hf`` sides)."""
        encoders = (self.selector_encoder, *(() if self.shares_encoder else (self.predictor_encoder,)),
                    *(g["encoder"] for g in self.generators))
        return [e for e in encoders if isinstance(e, HFEncoder)]

    def transformer_parameters(self) -> list[nn.Parameter]:
        """The transformers' own weights, for their own learning rate."""
        return [p for encoder in self.transformers() for p in encoder.transformer.parameters()]

    def freeze_transformers(self, layers: int) -> None:
        """Keep each transformer's embeddings and first ``layers`` layers fixed (-1: all of it)."""
        for encoder in self.transformers():
            encoder.freeze(layers)

    def states(self, emb: Tensor | None, mask: Tensor, ids: Tensor | None = None, encoder=None) -> Tensor | None:
        """The selector encoder's states (or ``encoder``'s: another generator's); ``ids`` (needed
        by a transformer) let a static encoder start from the words' products at inference; the
        ids themselves for a selector that reads them."""
        encoder = self.selector_encoder if encoder is None else encoder
        if self.selector.reads_ids:
            return ids
        if encoder is None:
            return None
        if encoder.reads_ids:
            return encoder(ids, mask)[0]
        tokens = None if ids is None or self.training else TokenRows(ids, self.embed.weight, torch.ones_like(mask))
        return encoder(emb, mask, tokens)[0]

    def table_bytes(self, length: int) -> int:
        """The memory of the tables the selectors keep in a training step for a document of
        ``length`` tokens (:meth:`Selector.table_bytes`; none for a fixed support)."""
        if self.support is not None:
            return 0
        return sum(s.table_bytes(length) for s in [self.selector, *(g["selector"] for g in self.generators)])

    def predict_masked(self, emb: Tensor, mask: Tensor, masks: Tensor, ids: Tensor | None = None,
                       skip_zeros: bool = False) -> Tensor:
        """Outputs ``[B, S, outputs]`` for masks ``[B, S, T]`` over embeddings ``[B, T, D]`` of the
        tokens ``ids`` (which a transformer predictor reads; at inference, with one mask each, a
        static predictor may start from the words' products).
        ``skip_zeros``: the masks' zeros need no gradient, so a recurrent predictor may run only
        the selected steps in training too (:attr:`Selection.skippable_zeros`)."""
        batch, samples, length = masks.shape
        rows = None if samples == 1 else torch.arange(batch, device=masks.device).repeat_interleave(samples)
        outputs = self.predict_gated(emb, mask, masks.reshape(batch * samples, length), rows, ids, skip_zeros)
        return outputs.view(batch, samples, -1)

    def predict_gated(self, emb: Tensor, mask: Tensor, masks: Tensor, rows: Tensor | None = None,
                      ids: Tensor | None = None, skip_zeros: bool = False) -> Tensor:
        """Outputs ``[R, outputs]`` for masks ``[R, T]``, mask r over document ``rows[r]`` of
        ``emb [B, T, D]`` (``rows`` None: over document r). A document's masks share one draw
        of the predictor's input dropout (:meth:`Encoder.gated`)."""
        padding = mask if rows is None else mask[rows]
        gate = masks * padding
        if self.predictor_encoder.reads_ids:
            return self.output(self.predictor_encoder.summary(ids if rows is None else ids[rows], gate))
        read = gate if self.predictor_encoder.skips_unselected else padding
        tokens = TokenRows(ids, self.embed.weight, gate) if ids is not None and rows is None and not self.training \
            else None
        return self.output(self.predictor_encoder.gated(emb, gate, read, rows, tokens, skip=skip_zeros))

    def forward(self, ids: Tensor, mask: Tensor, visible: Tensor | None = None,
                full_text: bool = False, sentences: Tensor | None = None) -> tuple[Selection, Tensor]:
        """Training pass: the selection and the predictor's outputs for each of its masks.
        ``visible`` ``[B, T]`` marks positions (a query after the document) that both
        encoders read and the selector never selects. With ``full_text``, the outputs have one
        more column, last: the predictor on the whole text (for full-text guidance). A fixed
        support decodes its one mask (in ``sentences`` when it decodes in sentences)."""
        emb = self.embedded(ids)
        selectable = mask if visible is None else mask - visible
        if self.support is not None:  # fixed: it decodes as at test time, without dropout
            for part in self.selector_side():
                part.eval()
            with torch.no_grad():
                z, _ = self.rationale(emb, ids, mask, selectable, self.support, sentences)
            selection = Selection.single(z, selected=selected_share(z, selectable))
        else:
            selection = Selection.joined([self.selector(self.states(emb, mask, ids), selectable)] + [
                g["selector"](self.states(emb, mask, ids, g["encoder"]), selectable) for g in self.generators])
        masks = selection.masks if visible is None else selection.masks + visible.unsqueeze(1)
        weighted = selection.weights > 0
        if bool(weighted.all()):
            outputs = self.predict_masked(emb, mask, masks, ids, skip_zeros=selection.skippable_zeros)
        else:
            # mask sets: supports of different sizes are padded with weight-0 masks, whose loss
            # counts for nothing (sparsemax's and SparseMAP's derivatives ignore it); only the
            # weighted masks are read
            rows, slots = weighted.nonzero(as_tuple=True)
            read = self.predict_gated(emb, mask, masks[rows, slots], rows, ids, skip_zeros=selection.skippable_zeros)
            outputs = read.new_zeros(*weighted.shape, read.shape[-1])
            outputs[rows, slots] = read
        if full_text:
            outputs = torch.cat((outputs, self.predict_masked(emb, mask, mask.unsqueeze(1), ids)), 1)
        return selection, outputs

    @torch.no_grad()
    def decode(self, ids: Tensor, mask: Tensor, visible: Tensor | None = None,
               decoding: Decoding = OWN, sentences: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Test-time rationale ``z [B, T]``, per-token scores ``[B, T]`` and outputs ``[B, outputs]``,
        decoded as ``decoding`` says (:mod:`rationale_cli.models.decoding`; by default the extractor's own way).
        Decoding in sentences needs ``sentences`` ``[B, T]``, each position's sentence index."""
        emb = self.embedded(ids)
        selectable = mask if visible is None else mask - visible
        z, scores = self.rationale(emb, ids, mask, selectable, self.decoding_of(decoding), sentences)
        read = z if visible is None else z + visible
        return z, scores, self.predict_masked(emb, mask, read.unsqueeze(1), ids)[:, 0]

    def decoding_of(self, decoding: Decoding) -> Decoding:
        """What ``decoding`` means for this model: a fixed support's for the model's own."""
        return self.support if self.support is not None and decoding == OWN else decoding

    def rationale(self, emb: Tensor | None, ids: Tensor, mask: Tensor, selectable: Tensor, decoding: Decoding,
                  sentences: Tensor | None) -> tuple[Tensor, Tensor]:
        """The decoded rationale ``z [B, T]`` of the ``selectable`` positions and their scores."""
        if decoding.sentences and sentences is None:
            raise ValueError("decoding in sentences needs each token's sentence index")
        taken = self.selector.decode_settings
        settings = decoding.selector_arguments(taken)
        in_runs_after = decoding.coherence is not None and "coherence" not in taken  # rationale_cli.models.coherent
        states = self.states(emb, mask, ids)
        z, scores = self.selector.decode_with_scores(states, selectable, **settings)
        if decoding.rate is not None:  # never a token scored 0 (outside a sparse support)
            z = top_k_mask(scores, selectable, decoding.rate.tokens(selectable)) * (scores > 0)
        elif decoding.threshold is not None:
            z = ((scores >= decoding.threshold) & (scores > 0)).to(scores.dtype)
        if in_runs_after:
            z = in_runs(z, scores, selectable, decoding.coherence)
        elif decoding.sentences:
            z = in_sentences(z, scores, selectable, sentences)
        return z * selectable, scores * selectable
