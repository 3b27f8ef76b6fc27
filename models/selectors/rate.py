"""Options shared by the extractors that hold a selection rate in training with a
Lagrange multiplier (``hardkuma``; ``bernoulli`` with ``lagrangian``): the budget
as a target, the multiplier's step size and augmented-Lagrangian weight
(:mod:`models.lagrangian`), and whether each choice depends on the previous ones
(:mod:`models.selectors.dependent`)."""

from __future__ import annotations

from dataclasses import dataclass

from models.budget import Budget
from models.options import Options, option


@dataclass(frozen=True)
class RateOptions(Options):
    budget: Budget = option(Budget(0.13), "the expected selection rate held in training (both sides)",
                            role="target held in training")
    dependent: bool = option(False, "condition each z on the previous ones (Bastings et al. 6.1)",
                             negative="--independent")
    lagrange_lr: float = option(0.05, "step size of the multiplicative Lagrange multiplier updates", above=0.0)
    lagrange_rho: float = option(1.0, "weight of the augmented-Lagrangian term rho/2 (rate - target)^2", low=0.0)
