"""Sparse and structured attention as a rationale (Niculae & Blondel, 2017, sections 2-3).

The attention classifier of :mod:`rationale_cli.models.selectors.attention.attention` with the softmax
replaced by ``Pi_Omega(x) = argmax_y <y, x> - gamma Omega(y)`` over the simplex:

- ``sparsemax``: ``Omega = 1/2 ||y||^2``, ``sparsemax(x / gamma)`` (Martins &
  Astudillo, 2016), computed by the ``entmax`` package, exact forward and backward;
- ``fusedmax``: plus ``lam`` times the 1-d total variation, exactly
  ``sparsemax(P_TV(x / gamma))`` (Proposition 2): contiguous segments of equal weight;
- ``oscarmax``: plus ``lam`` times OSCAR, the paper's approximation
  ``sparsemax(P_OSC(x / gamma))``: clusters of equal weight anywhere in the text.

The prox operators and their Jacobians are in :mod:`rationale_cli.models.prox`. The weights are
exactly zero outside their support, so the rationale is that support: no top-r%
heuristic. ``gamma`` trades sparsity for smoothness (larger, denser); ``lam``
(default 0.1 for fusedmax, 0.01 for oscarmax, the paper's) sets the fusion.
The predictor reads the text gated by ``alpha / max(alpha)`` in training and at
test time alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from rationale_cli.models.options import OptionError, Options, option
from rationale_cli.models.prox import oscar_prox, tv_prox
from rationale_cli.models.selectors.attention.attention import AttentionSelector

PROX = {"fusedmax": tv_prox, "oscarmax": oscar_prox}
DEFAULT_LAMBDA = {"sparsemax": 0.0, "fusedmax": 0.1, "oscarmax": 0.01}
ATTENTIONS = tuple(DEFAULT_LAMBDA)


@dataclass(frozen=True)
class SparseAttentionOptions(Options):
    attention: str = option("sparsemax", "the sparse map: sparsemax, fusedmax (contiguous segments) or "
                            "oscarmax (clusters anywhere)", choices=ATTENTIONS)
    gamma: float = option(1.0, "regularization strength gamma, larger is denser", above=0.0)
    lam: float | None = option(None, "fusion strength of fusedmax / oscarmax", low=0.0,
                               default_text="0.1 for fusedmax, 0.01 for oscarmax")

    # the search (rationale_cli.models.search): none of its own. gamma and the fusion strength set how much is
    # selected, and no rate is held, so validation loss would choose the densest attention
    search_space = ()

    def check(self) -> None:
        if self.lam is not None and self.attention == "sparsemax":
            raise OptionError("lam", self.lam, "{attention} fusedmax or oscarmax beside it (sparsemax fuses nothing)")


class SparseAttentionSelector(AttentionSelector):
    Options = SparseAttentionOptions
    summary = ("sparse and structured attention (Niculae & Blondel 2017): attention weights from "
               "sparsemax, fusedmax or oscarmax, exactly zero outside their support; the support is "
               "the rationale (its size follows {gamma}; no budget)")

    def __init__(self, input_size: int, *, attention_size: int = 100, **options):
        super().__init__(input_size, attention_size=attention_size, **options)
        self.attention_name, self.gamma = self.options.attention, self.options.gamma
        self.lam = DEFAULT_LAMBDA[self.attention_name] if self.options.lam is None else self.options.lam

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
