"""Base classes of the encoders: :class:`Encoder` and the masked :class:`RecurrentEncoder`;
:class:`TokenRows`, what an embedded input is made of."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn

from rationale_cli.models.native.dropout import Dropout

VOCABULARY_PRODUCTS = 32 << 20  # at most this many numbers in a kept vocabulary-wide product table
# id of a layer's weight -> (what the products were made of: the weight's and the embeddings'
# versions, which count in-place changes such as an optimizer step or load_state_dict, and their
# storage, which .to(), .double() and other changes through .data replace; the embeddings; products)
_kept: dict[int, tuple] = {}


@dataclass(frozen=True)
class TokenRows:
    """An encoder input ``x [B, T, D]`` that is ``table[ids] * scale[..., None]``: embedding rows,
    each times its gate (the rationale z, a padding mask, or 1). Then a linear map of each
    row is a product per vocabulary word, ``(table @ W)[ids] * scale``, computed once and
    kept while neither the embeddings nor W change, or (for a large vocabulary) per
    distinct token of the batch (about 6 times fewer than positions in beer reviews):
    what the encoders' first layers compute at inference (:meth:`products`)."""

    ids: Tensor  # [B, T] long
    table: Tensor  # [V, D]
    scale: Tensor  # [B, T]

    def products(self, key: Tensor, weight: Callable[[], Tensor]) -> tuple[Tensor, Tensor]:
        """Rows ``table[u] @ weight()`` and a zero row last ``[U + 1, G]``, and each position's
        row in them ``[B, T]`` (the zero row where the scale is 0): ``x @ weight()`` is
        ``products[rows] * scale``. ``key`` (the layer's parameter that ``weight`` is made of)
        keeps the vocabulary's products until it or the embeddings change."""
        read = self.scale != 0
        keep = not (key.is_inference() or self.table.is_inference())  # those have no version counter
        made_of = (key._version, key.data_ptr(), self.table._version, self.table.data_ptr()) if keep else None
        kept = _kept.get(id(key))
        if keep and kept is not None and kept[0] == made_of and kept[1]() is self.table:
            return kept[2], self.ids.masked_fill(~read, kept[2].shape[0] - 1)
        W = weight()
        if self.table.shape[0] * W.shape[1] <= VOCABULARY_PRODUCTS:
            products = torch.cat((self.table @ W, W.new_zeros(1, W.shape[1])))
            if keep:
                if kept is None:  # forgotten with the weight
                    weakref.finalize(key, _kept.pop, id(key), None)
                _kept[id(key)] = (made_of, weakref.ref(self.table), products)
            return products, self.ids.masked_fill(~read, products.shape[0] - 1)
        distinct, inverse = torch.unique(self.ids[read], return_inverse=True)
        products = torch.cat((self.table[distinct] @ W, W.new_zeros(1, W.shape[1])))
        return products, torch.full_like(self.ids, distinct.numel()).masked_scatter_(read, inverse)

    def scaled(self, factor: Tensor) -> TokenRows:
        """The rows of ``x * factor[..., None]``."""
        return TokenRows(self.ids, self.table, self.scale * factor)

    def gather(self, order: Tensor) -> TokenRows:
        """The rows of ``x.gather(1, order)`` (``order [B, T']`` positions per row)."""
        return TokenRows(self.ids.gather(1, order), self.table, self.scale.gather(1, order))


class Encoder(nn.Module):
    """Base class: ``forward(x [B,T,D] float, mask [B,T] in [0,1]) -> (states
    [B,T,H], summary [B,H])``; states are zero where ``mask == 0``.

    ``skips_unselected``: as a predictor, whether the encoder reads the rationale
    gate as its mask (recurrent encoders skip unselected tokens) or the padding
    mask over the gated input (convolutions see zeros where z = 0, as in D.6 of
    Paulus et al., 2020, so an unselected token still gets a gradient).

    ``tokens``, when given, says what ``x`` is made of (:class:`TokenRows`); an encoder may
    use it at inference (without gradients, in eval mode) and otherwise ignores it. ``skip``:
    the mask's zeros need no gradient, so an encoder that skips unselected steps may leave
    them out in training too (the others read every position and ignore it). ``dropped``: ``x``
    has had this encoder's input dropout already (:meth:`input_dropout`), e.g. drawn once per
    document for all its masks, so the encoder does not draw it again.

    ``reads_ids``: the encoder reads word ids ``[B, T]`` in place of embeddings, and the gate
    as its mask, ``forward(ids, gate)`` and ``summary(ids, gate)`` (the transformer encoder,
    :mod:`rationale_cli.models.encoders.hf`, which embeds subwords; the bag of n-grams,
    :mod:`rationale_cli.models.encoders.bow`, which has its own vectors)."""

    output_size: int
    skips_unselected: bool = True
    reads_ids: bool = False
    dropout: nn.Dropout  # on the input, and wherever else the encoder says

    def forward(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None,
                skip: bool = False, dropped: bool = False) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def input_dropout(self, x: Tensor, dropped: bool = False) -> Tensor:
        """The dropout the encoder applies to its input ``x``; nothing when ``dropped`` says it was."""
        return x if dropped else self.dropout(x)

    def gated(self, x: Tensor, gate: Tensor, mask: Tensor, rows: Tensor | None = None,
              tokens: TokenRows | None = None, skip: bool = False) -> Tensor:
        """The summary ``[R, H]`` of ``x [B, T, D]`` under gates ``[R, T]``, gate r over document
        ``rows[r]`` (``rows`` None: gate r over document r): ``forward(x[rows] * gate, mask)[1]``
        with the padding or read ``mask [R, T]``. With ``rows``, a document's gates share one
        draw of the input dropout (``dropout(x) z`` is ``x z`` dropped out), so their encodings
        differ by the gates alone; an encoder may then skip forming the R gated copies."""
        if rows is None:  # x is not read where the encoder computes from the tokens (no gradient asked)
            from_tokens = not gate.requires_grad and self.uses_tokens(x, tokens)
            return self.summary(x if from_tokens else x * gate.unsqueeze(-1), mask, tokens, skip)
        return self.summary(self.input_dropout(x)[rows] * gate.unsqueeze(-1), mask, skip=skip, dropped=True)

    def summary(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None, skip: bool = False,
                dropped: bool = False) -> Tensor:
        """``forward(...)[1]``: an encoder may leave the states it does not return unformed. An
        encoder that ``reads_ids`` is given ids and the gate alone."""
        if self.reads_ids:
            return self(x, mask)[1]
        return self(x, mask, tokens, skip=skip, dropped=dropped)[1]

    def uses_tokens(self, x: Tensor, tokens: TokenRows | None) -> bool:
        """Whether :meth:`forward` computes from ``tokens`` here and does not read ``x``."""
        return False


def without_grad(module: nn.Module, x: Tensor) -> bool:
    """Whether ``module`` applied to ``x`` needs no gradient (inference): then it may take
    shortcuts that autograd could not follow."""
    return not torch.is_grad_enabled() or not (x.requires_grad or any(p.requires_grad for p in module.parameters()))


SKIP_SHARE = 0.75  # below this share of steps to run, a skipping scan runs only the mask's nonzero steps


class RecurrentEncoder(Encoder):
    """Shared by the masked recurrent encoders: sizes, input dropout, and the
    empty-sequence case; subclasses implement ``scan(x, mask, tokens, states) -> (states,
    summary)``, with None for the states when ``states`` is False.

    A step with mask 0 carries every state over unchanged, so without gradients (or with
    ``skip``, when the mask's zeros need none) the scan runs over each row's nonzero steps
    only, moved to the front in order (:meth:`encoded`): the same states and summary
    in fewer steps, e.g. a predictor reading a short rationale. With ``tokens`` (inference,
    eval mode) the input projections come from the words' products
    (:func:`rationale_cli.models.encoders.recurrence.token_projections`)."""

    def __init__(self, input_size: int, hidden_size: int, *, bidirectional: bool = True, dropout: float = 0.0):
        super().__init__()
        self.directions = 2 if bidirectional else 1
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        self.output_size = self.directions * hidden_size
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None,
                skip: bool = False, dropped: bool = False) -> tuple[Tensor, Tensor]:
        return self.encoded(x, mask, tokens, skip, dropped)

    def summary(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None, skip: bool = False,
                dropped: bool = False) -> Tensor:
        """The summary alone (a predictor's case): the states are not formed, in training too (the
        summary is each direction's last state, whose gradient needs none of them)."""
        return self.encoded(x, mask, tokens, skip, dropped, states=False)[1]

    def uses_tokens(self, x: Tensor, tokens: TokenRows | None) -> bool:
        return tokens is not None and not self.training and without_grad(self, x)

    def encoded(self, x: Tensor, mask: Tensor, tokens: TokenRows | None, skip: bool, dropped: bool,
                states: bool = True) -> tuple[Tensor | None, Tensor]:
        """``(states, summary)``; without ``states``, the states may be None: not formed."""
        mask = mask.to(x.dtype)
        B, T, _ = x.shape
        if T == 0:  # no steps: nothing to encode
            return x.new_zeros(B, T, self.output_size), x.new_zeros(B, self.output_size)
        if not (skip or without_grad(self, x)):
            return self.scan(self.input_dropout(x, dropped), mask, None, states)
        tokens = None if self.training else tokens  # dropout changes x
        read = mask > 0
        steps = int(read.sum(1).max())
        if steps >= SKIP_SHARE * T:
            return self.scan(self.input_dropout(x, dropped), mask, tokens, states)
        if steps == 0:
            return x.new_zeros(B, T, self.output_size), self.tied(x.new_zeros(B, self.output_size))
        # the scan over each row's read steps, moved to the front in order (with tokens, x is not
        # read); the states put back in place (zero elsewhere, as the full scan leaves them)
        order = torch.sort((~read).to(torch.uint8), dim=1, stable=True).indices[:, :steps]
        front = x[:, :steps] if tokens is not None else x.gather(1, order.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        short, summary = self.scan(self.input_dropout(front, dropped), mask.gather(1, order),
                                   None if tokens is None else tokens.gather(order), states)
        if short is None:
            return None, summary
        index = order.unsqueeze(-1).expand(-1, -1, self.output_size)
        return x.new_zeros(B, T, self.output_size).scatter_(1, index, short), summary

    def tied(self, summary: Tensor) -> Tensor:
        """``summary`` of a batch that reads no step (a predictor given only empty rationales),
        with every parameter in its graph at weight 0 when gradients are taken: their gradient
        is then the exact 0 it is, rather than none, which distributed training needs from
        every parameter at every step."""
        if not torch.is_grad_enabled():
            return summary
        return summary + sum(p.reshape(-1)[0] for p in self.parameters() if p.requires_grad) * 0.0

    def scan(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None,
             states: bool = True) -> tuple[Tensor | None, Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bidirectional={self.bidirectional}"
