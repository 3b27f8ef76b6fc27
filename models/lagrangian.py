"""Lagrangian relaxation of a rate constraint (Bastings et al., 2019, section 4, eq. 13,
following the GECO update of Rezende & Viola, 2018, Algorithm 1).

For a constraint ``c = R - target <= 0`` on a batch statistic R (expected L0 per
token, expected transitions per token), the loss gets ``lambda * c_hat`` where
``c_hat`` has the value of a moving average of c and the gradient of the
batch's c (straight-through). After each training step the multiplier moves
multiplicatively, ``lambda <- clamp(lambda * exp(lr * c_ma))``: it grows while
the constraint is violated and decays once it holds. Nothing moves in eval mode. In a
distributed run the moving average takes c averaged over processes, so every process
holds the same multiplier.

:class:`RateOptions` are the options shared by the extractors that hold a selection rate in
training this way (``hardkuma``; ``bernoulli`` with ``lagrangian``): the budget as a target,
the multiplier's step size and augmented-Lagrangian weight, and whether each choice depends on
the previous ones (:mod:`rationale_cli.models.selectors.binary.dependent`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rationale_cli.models.budget import Budget, BudgetUse
from rationale_cli.models.options import Options, option
from rationale_cli.models.ranks import mean_over_ranks


class LagrangeMultiplier(nn.Module):
    def __init__(self, init: float = 0.0015, lr: float = 0.05, alpha: float = 0.5,
                 minimum: float = 1e-12, maximum: float = 5.0):
        super().__init__()
        self.lr, self.alpha, self.minimum, self.maximum = lr, alpha, minimum, maximum
        self.register_buffer("value", torch.tensor(float(init)))
        self.register_buffer("moving", torch.tensor(0.0))

    def forward(self, constraint: Tensor) -> Tensor:
        """The Lagrangian term ``lambda * c_hat`` for a scalar constraint value."""
        if self.training:
            with torch.no_grad():
                self.moving.mul_(self.alpha).add_((1 - self.alpha) * mean_over_ranks(constraint))
        smoothed = constraint + (self.moving.clone() - constraint).detach()
        term = self.value.clone() * smoothed
        if self.training:
            with torch.no_grad():
                self.value.mul_(torch.exp(self.lr * self.moving)).clamp_(self.minimum, self.maximum)
        return term


class EqualityMultiplier(nn.Module):
    """An equality constraint ``c = 0`` as the two inequalities ``c <= 0`` and ``-c <= 0``,
    each with its own multiplicative multiplier; the net multiplier is their difference,
    so the statistic is pulled to its target from both sides. The augmented-Lagrangian
    term ``rho/2 c^2`` adds a restoring force proportional to the violation, which
    keeps the multipliers from winding up and the rate from oscillating (measured on
    the demo corpus: without it the rate swings between 0% and 100%)."""

    def __init__(self, rho: float = 0.0, **options):
        super().__init__()
        self.rho = rho
        self.upper = LagrangeMultiplier(**options)
        self.lower = LagrangeMultiplier(**options)

    def forward(self, constraint: Tensor) -> Tensor:
        augmented = 0.5 * self.rho * constraint**2
        return self.upper(constraint) + self.lower(-constraint) + augmented

    @property
    def value(self) -> Tensor:
        return self.upper.value - self.lower.value


@dataclass(frozen=True)
class RateOptions(Options):
    budget: Budget = option(Budget(0.13), "the expected selection rate held in training (both sides)",
                            role="target held in training", use=BudgetUse.HELD)
    dependent: bool = option(False, "condition each z on the previous ones (Bastings et al. 6.1)")
    lagrange_lr: float = option(0.05, "step size of the multiplicative Lagrange multiplier updates", above=0.0)
    lagrange_rho: float = option(1.0, "weight of the augmented-Lagrangian term rho/2 (rate - target)^2", low=0.0)
