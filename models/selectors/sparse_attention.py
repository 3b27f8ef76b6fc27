"""Sparse attention as a rationale (Niculae & Blondel, 2017, sections 2-3).

The attention classifier of :mod:`models.selectors.attention` with the softmax
replaced by ``Pi_Omega(x) = argmax_y <y, x> - gamma Omega(y)`` over the simplex;
for ``Omega = 1/2 ||y||^2`` this is ``sparsemax(x / gamma)`` (Martins & Astudillo,
2016), computed by the ``entmax`` package, exact forward and backward. The weights
are exactly zero outside their support, so the rationale is that support: no
top-r% heuristic. ``gamma`` trades sparsity for smoothness (larger, denser).
The predictor reads the text gated by ``alpha / max(alpha)`` in training and at
test time alike.
"""

from __future__ import annotations

from torch import Tensor

from models.selectors.attention import AttentionSelector

ATTENTIONS = ("sparsemax",)


class SparseAttentionSelector(AttentionSelector):
    def __init__(self, input_size: int, attention: str = "sparsemax", gamma: float = 1.0, attention_size: int = 100):
        super().__init__(input_size, selection=1.0, attention_size=attention_size)
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r}: expected one of {', '.join(ATTENTIONS)}")
        if gamma <= 0:
            raise ValueError(f"gamma must be positive, got {gamma}")
        self.gamma = gamma

    def normalize(self, logits: Tensor, mask: Tensor) -> Tensor:
        from entmax import sparsemax  # imported here so the other extractors never need it

        # padding gets a score far below every real token, so it is never in the support
        floor = logits.detach().masked_fill(mask <= 0, float("inf")).amin(-1, keepdim=True)
        scores = logits.masked_fill(mask <= 0, 0.0) + (mask <= 0) * (floor - 1e4 * self.gamma)
        return sparsemax(scores / self.gamma, dim=-1) * mask

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The support of the attention weights, gated by alpha / max(alpha), twice."""
        gate = self.gate(states, mask)
        return gate, gate
