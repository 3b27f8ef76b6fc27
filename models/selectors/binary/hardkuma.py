"""HardKuma rationales with a Lagrangian selection-rate target (Bastings et al., 2019).

Each token gets ``z_i ~ HardKuma(a_i, b_i, -0.1, 1.1)`` with ``a_i, b_i``
softplus layers over the selector encoder's states (section 5); the *dependent*
variant (section 6.1, eq. 16) conditions them on the sampled prefix through a
small RCNN over ``[h_i; z_i]`` (:mod:`rationale_cli.models.selectors.binary.dependent`).

Penalties (section 4): the expected L0 per token (eq. 11) and the expected
number of transitions per token (the fused-lasso relaxation, eq. 12), both
masked and normalized by document length; for the dependent variant each term
is conditioned on the sampled prefix (appendix B.1.2). Lagrange multipliers
(eq. 13, :mod:`rationale_cli.models.lagrangian`) hold the expected L0 *at* its target
(``budget``, a share or a count per document, :mod:`rationale_cli.models.budget`: two-sided, so a user who asks for 13% gets 13% even where the
task alone would select less, with an augmented-Lagrangian term
``rho/2 c^2`` that damps the multipliers' oscillation) and the transitions
*at most* at theirs. Instead of a transitions target, ``coherence`` puts a
fixed weight on the expected number of transitions per document, as in the
paper's beer runs (appendix B.1: a weight from 1e-4 to 4e-4).

Start (section 3, eq. 8; :func:`~rationale_cli.models.distributions.hardkuma.shapes_at_rate`): the
layer that gives ``(a, b)`` starts with the biases of ``a = softplus(0) = ln 2`` and
``b = log t / log(1 - k0^a)``, ``k0 = -l / (r - l)``, so each token's expected L0 ``P(z != 0)`` is
the target share t before the first step (b about 10.4 for t = 0.13), where PyTorch's zero-mean
bias gave ``a = b = ln 2`` on average, ``P(z != 0) = 0.87``, a start from which the first epochs
decoded 0-5% of the tokens (demo, beer, ERASER movies; docs/concepts/extractors.md). A budget given as a token count has no share before
the documents are seen and keeps PyTorch's bias.

Rationale supervision (the Selection's ``per_token``) takes each token's
``P(z != 0)`` of the distribution it was drawn from, as log-odds ``log P(z != 0) - log P(z = 0)``.

Test time (section 5, "Deterministic predictions"): per token the most likely
of z = 0, z = 1 and 0 < z < 1; in the continuous case the mean of the
rectified variable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rationale_cli.models.distributions.hardkuma import A_MAX, A_MIN, EPS, HIGH, LOW, HardKuma, shapes_at_rate
from rationale_cli.models.lagrangian import EqualityMultiplier, LagrangeMultiplier, RateOptions
from rationale_cli.models.native.hardkuma_scan import compiled
from rationale_cli.models.options import OptionError, option
from rationale_cli.models.search import OneOf
from rationale_cli.models.selection import LOGIT, PerToken, Selection, Selector, selected_share
from rationale_cli.models.selectors.binary.dependent import DependentScan


def expected_costs(log_p0: Tensor, log_nonzero: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Expected L0 (eq. 11) and expected number of transitions (eq. 12) per document, ``[B]`` each."""
    p0 = torch.exp(log_p0) * mask
    nonzero = torch.exp(log_nonzero) * mask
    pair = mask[:, 1:] * mask[:, :-1]
    transitions = (p0[:, :-1] * nonzero[:, 1:] + nonzero[:, :-1] * p0[:, 1:]) * pair
    return nonzero.sum(-1), transitions.sum(-1)


def most_likely(dist: HardKuma) -> Tensor:
    """0, 1, or the rectified mean, whichever of the three outcomes is most probable (the
    mean, a quadrature, computed only where it is needed)."""
    p0, p1, pc = dist.p0(), dist.p1(), dist.p_continuous()
    zero = (p0 >= p1) & (p0 >= pc)
    continuous = ~zero & (p1 < pc)
    z = (~zero & ~continuous).to(p0.dtype)
    if bool(continuous.any()):
        z[continuous] = HardKuma(dist.a[continuous], dist.b[continuous], dist.l, dist.r).mean()
    return z


@dataclass(frozen=True)
class HardKumaOptions(RateOptions):
    """Defaults: the dependent selector of the beer protocol (Bastings et al. 6.1; the most
    precise configuration measured, benchmarks/RESULTS.md)."""

    dependent: bool = option(True, "condition each z on the previous ones (Bastings et al. 6.1)")
    transitions: float | None = option(None, "at most this rate of 0/1 transitions per token", low=0.0,
                                       high=1.0, default_text="no limit")
    coherence: float | None = option(None, "fixed weight on the expected transitions per document, instead "
                                     "of a {transitions} target (the paper used 1e-4 to 4e-4)", low=0.0)

    # the search (rationale_cli.models.search): Bastings et al. (2019), appendix B.1, chose the fused-lasso
    # (coherence) weight from {1, 2, 3, 4} x 1e-4, the rate held at the budget by the multiplier;
    # section 6.1 compares the dependent selector with the independent one; the augmented term's weight
    # 1 holds the rate on the demo corpus and beer's ratings, 20 where the task pulls harder (beer's
    # binary labels; docs/concepts/extractors.md)
    search_space = (OneOf("coherence", (1e-4, 2e-4, 3e-4, 4e-4)), OneOf("dependent", (True, False)),
                    OneOf("lagrange_rho", (1.0, 20.0)))

    def check(self) -> None:
        if self.transitions is not None and self.coherence is not None:
            raise OptionError("coherence", self.coherence, "no {transitions} target beside it (give one or the other)")


class HardKumaSelector(Selector):
    Options = HardKumaOptions
    summary = ("HardKuma rationales (Bastings et al. 2019): samples exactly 0, exactly 1 or in between; "
               "the expected selection rate is held at {budget} by a Lagrange multiplier")
    supervised_by = "P(z != 0) of each token's HardKuma distribution, binary cross-entropy"

    def __init__(
        self,
        input_size: int,
        *,
        z_hidden: int = 30,
        lagrange_alpha: float = 0.5,
        lambda_init: float = 0.0015,
        lambda_max: float = 5.0,
        **options,
    ):
        super().__init__(**options)
        opts = self.options
        self.budget, self.transitions, self.coherence = opts.budget, opts.transitions, opts.coherence or 0.0
        self.scan = DependentScan(input_size, 2, z_hidden) if opts.dependent else None
        self.shape_layer = None if opts.dependent else nn.Linear(input_size, 2)
        multiplier = dict(init=lambda_init, lr=opts.lagrange_lr, alpha=lagrange_alpha, maximum=lambda_max)
        self.lambda_l0 = EqualityMultiplier(rho=opts.lagrange_rho, **multiplier)
        self.lambda_transitions = LagrangeMultiplier(**multiplier) if opts.transitions is not None else None
        if self.budget.share is not None:
            layer = self.shape_layer if self.scan is None else self.scan.head
            with torch.no_grad():  # softplus^-1(y) = y + log(1 - exp(-y))
                layer.bias.copy_(torch.tensor([y + math.log(-math.expm1(-y)) for y in shapes_at_rate(self.budget.share)]))

    def run(self, states: Tensor, mask: Tensor, choose) -> tuple[Tensor, HardKuma]:
        """z for every token and the distributions it was drawn from; ``choose(dist)``
        draws (training) or decodes (test) z."""
        if self.scan is None:
            a, b = F.softplus(self.shape_layer(states)).unbind(-1)
            dist = HardKuma(a, b)
            return choose(dist) * mask, dist
        z, theta = self.scan(states, mask, lambda t: choose(HardKuma(*F.softplus(t).unbind(-1))))
        return z, HardKuma(*F.softplus(theta).unbind(-1))

    def sampled(self, states: Tensor, mask: Tensor) -> tuple[Tensor, HardKuma]:
        """``run(states, mask, HardKuma.rsample)``; the dependent loop compiled where it can be
        (:mod:`rationale_cli.models.native.hardkuma_scan`), from the same noise in the same order."""
        if self.scan is None or not compiled(states, mask):
            return self.run(states, mask, HardKuma.rsample)
        B, T = mask.shape
        noise = torch.rand(T, B, dtype=states.dtype, device=states.device).t() * (1 - 2 * EPS) + EPS
        z, theta = self.scan.hardkuma(states, mask, noise, (LOW, HIGH, A_MIN, A_MAX))
        return z, HardKuma(*F.softplus(theta).unbind(-1))

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        z, dist = self.sampled(states, mask)
        log_p0, log_nonzero = dist.log_p0(), dist.log_p_nonzero()
        nonzero, flips = expected_costs(log_p0, log_nonzero, mask)
        lengths = mask.sum(-1).clamp_min(1.0)
        l0, transitions = (nonzero / lengths).mean(), (flips / lengths).mean()
        target = self.budget.rates(mask).mean()
        penalty = self.lambda_l0(l0 - target) + self.coherence * flips.mean()
        if self.lambda_transitions is not None:
            penalty = penalty + self.lambda_transitions(transitions - self.transitions)
        stats = {
            "selected": selected_share(z, mask),
            "exact_one": selected_share((z == 1).to(z.dtype), mask),
            "expected_l0": l0.detach(),
            "expected_transitions": transitions.detach(),
            "lambda_l0": self.lambda_l0.value.detach(),
        }
        if self.lambda_transitions is not None:
            stats["lambda_transitions"] = self.lambda_transitions.value.detach()
        # a sample at exactly 0 comes from the clamp, whose derivative there is 0
        return Selection.single(z, penalty, constant_zeros=True, per_token=PerToken(log_nonzero - log_p0, LOGIT),
                                **stats)

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The decoded z and P(z_i != 0) (conditioned on the decoded prefix when dependent)."""
        if self.scan is not None and compiled(states, mask):
            unit = HardKuma(states.new_ones(1), states.new_ones(1))
            k, weights = unit.mean_nodes()
            ends = torch.log(torch.tensor([unit.stretch(0.0), unit.stretch(1.0)], dtype=states.dtype))
            z, p_nonzero = self.scan.hardkuma_decoded(states, mask, (LOW, HIGH, A_MIN, A_MAX),
                                                      (torch.log(k), weights, ends))
            return z, p_nonzero * mask
        z, dist = self.run(states, mask, most_likely)
        return z, dist.p_nonzero() * mask
