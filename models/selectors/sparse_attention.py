"""Sparse and structured attention as a rationale (Niculae & Blondel, 2017, sections 2-3).

The attention classifier of :mod:`models.selectors.attention` with the softmax
replaced by ``Pi_Omega(x) = argmax_y <y, x> - gamma Omega(y)`` over the simplex:

- ``sparsemax``: ``Omega = 1/2 ||y||^2``, ``sparsemax(x / gamma)`` (Martins &
  Astudillo, 2016), computed by the ``entmax`` package, exact forward and backward;
- ``fusedmax``: plus ``lam`` times the 1-d total variation, exactly
  ``sparsemax(P_TV(x / gamma))`` (Proposition 2): contiguous segments of equal weight;
- ``oscarmax``: plus ``lam`` times OSCAR, the paper's approximation
  ``sparsemax(P_OSC(x / gamma))``: clusters of equal weight anywhere in the text.

The prox operators and their Jacobians are in :mod:`models.prox`. The weights are
exactly zero outside their support, so the rationale is that support: no top-r%
heuristic. ``gamma`` trades sparsity for smoothness (larger, denser); ``lam``
(default 0.1 for fusedmax, 0.01 for oscarmax, the paper's) sets the fusion.
The predictor reads the text gated by ``alpha / max(alpha)`` in training and at
test time alike.
"""

from __future__ import annotations

from torch import Tensor

from models.prox import oscar_prox, tv_prox
from models.selectors.attention import AttentionSelector

ATTENTIONS = ("sparsemax", "fusedmax", "oscarmax")
PROX = {"fusedmax": tv_prox, "oscarmax": oscar_prox}
DEFAULT_LAMBDA = {"sparsemax": 0.0, "fusedmax": 0.1, "oscarmax": 0.01}


class SparseAttentionSelector(AttentionSelector):
    def __init__(self, input_size: int, attention: str = "sparsemax", gamma: float = 1.0,
                 lam: float | None = None, attention_size: int = 100):
        super().__init__(input_size, selection=1.0, attention_size=attention_size)
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r}: expected one of {', '.join(ATTENTIONS)}")
        if gamma <= 0:
            raise ValueError(f"gamma must be positive, got {gamma}")
        if lam is not None and lam < 0:
            raise ValueError(f"lambda must be 0 or more, got {lam}")
        self.attention_name, self.gamma = attention, gamma
        self.lam = DEFAULT_LAMBDA[attention] if lam is None else lam

    def normalize(self, logits: Tensor, mask: Tensor) -> Tensor:
        from entmax import sparsemax  # imported here so the other extractors never need it

        x = logits / self.gamma
        if self.attention_name in PROX:
            x = PROX[self.attention_name](x, mask, self.lam)
        # padding gets a score far below every real token, so it is never in the support
        floor = x.detach().masked_fill(mask <= 0, float("inf")).amin(-1, keepdim=True)
        scores = x.masked_fill(mask <= 0, 0.0) + (mask <= 0) * (floor - 1e4)
        return sparsemax(scores, dim=-1) * mask

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The support of the attention weights, gated by alpha / max(alpha), twice."""
        gate = self.gate(states, mask)
        return gate, gate
