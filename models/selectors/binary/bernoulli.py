"""Bernoulli rationales trained with REINFORCE (Lei et al., 2016; Bastings et al., 2019,
section 2, eqs. 2-4, and the baseline of section 6).

``z_i ~ Bernoulli(sigmoid(w . h_i + b))`` independently, or conditioned on the
sampled prefix through a small RCNN over ``[h_i; z_i]`` (``dependent``). The cost
of a document is eq. 4,

    cost(z) = task_loss(x * z) + lambda0 * sum_i z_i + lambda1 * sum_i |z_i - z_{i-1}|,

over real tokens only (no transition into padding). The predictor trains on the
sampled rationales through the ordinary task loss; the selector gets the
score-function gradient through the Selection's surrogate,
``mean_s (cost_s - baseline_s) * log p(z_s)``, built from detached costs.
Baselines reduce variance without changing the expected gradient: ``none`` (as
Lei et al.), ``ema`` (exponential moving average of the batch cost, updated in
training only; the first batch has none) and ``loo`` (leave-one-out over
``samples`` draws per document).

Selection-rate control: the fixed penalties above, or with ``lagrangian`` a
multiplier held at the target ``budget`` (same two-sided update as HardKuma's).
Test time: z_i = 1 where p_i >= 0.5. Rationale supervision (the Selection's ``per_token``)
takes each sample's p_i (given the sampled tokens before it when dependent).

With the independent selector and ``exact_penalty`` (the default), the penalties
enter the loss through their expectations, ``E[sum z_i] = sum p_i`` and
``E|z_i - z_{i-1}| = p_i + p_{i-1} - 2 p_i p_{i-1}``, differentiated exactly, and
only the task loss goes through the score function: the same expected gradient
(Rao-Blackwellization) without the penalties' sampling noise
(``benchmarks/bernoulli_variance.py`` measures both). The Lagrangian then
holds the expected rate, as HardKuma's holds the expected L0. The dependent
selector's expectations have no closed form: there each token's count is replaced by
its expectation given the sampled tokens before it (:func:`prefix_counts`, the same
expected costs), differentiated with the sample held fixed. That gradient leaves out
how a choice moves the later tokens' probabilities (biased, but free of sampling
noise); sampled through REINFORCE, the Lagrangian's rate term made the dependent
selector swing between selecting everything and nothing (on beer aroma and on the
demo corpus). ``exact_penalty=False`` samples the costs as Lei et al. do.

``estimator straight-through`` replaces REINFORCE by the straight-through Gumbel-softmax
estimator (Jang et al., 2017, section 2.2) that the RNP of FR, DR, MGR and MCD uses (Liu et al.,
2022-2023, with ``tau = 1``): a logistic sample ``l_i + log u - log(1 - u)``, the binary case of
the Gumbel-softmax, gives the hard ``z_i = [l_i + log u - log(1 - u) > 0]`` (a Bernoulli(p_i)
draw) forward and the gradient of its relaxation ``sigmoid((l_i + log u - log(1 - u)) / tau)``
backward, so the selector learns through the predictor's own gradient (biased, with no score
function's variance). Independent selector only: the dependent scan feeds each z to the next step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rationale_cli.models.budget import Budget, BudgetUse
from rationale_cli.models.lagrangian import EqualityMultiplier, RateOptions
from rationale_cli.models.options import OptionError, option
from rationale_cli.models.ranks import mean_over_ranks
from rationale_cli.models.search import OneOf
from rationale_cli.models.selection import LOGIT, PerToken, Selection, Selector, selected_share
from rationale_cli.models.selectors.binary.dependent import DependentScan

BASELINES = ("none", "ema", "loo")
ESTIMATORS = ("reinforce", "straight-through")


def counts(z: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Selected tokens and 0/1 transitions per document (``z [..., T]``), padding excluded."""
    selected = (z * mask).sum(-1)
    pair = mask[..., 1:] * mask[..., :-1]
    transitions = ((z[..., 1:] - z[..., :-1]).abs() * pair).sum(-1)
    return selected, transitions


def expected_counts(p: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """``E[selected]`` and ``E[transitions]`` per document for independent z_i ~ Bernoulli(p_i)."""
    p = p * mask
    pair = mask[..., 1:] * mask[..., :-1]
    flips = p[..., 1:] + p[..., :-1] - 2 * p[..., 1:] * p[..., :-1]
    return p.sum(-1), (flips * pair).sum(-1)


def prefix_counts(p: Tensor, z: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    """Selected tokens and 0/1 transitions per sample, each token's count replaced by its
    expectation given the sampled tokens before it: ``sum_i p_i`` and ``sum_i p_i (1 - z_{i-1})
    + (1 - p_i) z_{i-1}``, for the dependent selector's ``p_i = P(z_i = 1 | z_<i)`` along the
    sample ``z``. Their expectations are those of :func:`counts` (tower rule)."""
    p = p * mask
    pair = mask[..., 1:] * mask[..., :-1]
    before = z[..., :-1]
    flips = p[..., 1:] * (1 - before) + (1 - p[..., 1:]) * before
    return p.sum(-1), (flips * pair).sum(-1)


def straight_through(logits: Tensor, temperature: float) -> Tensor:
    """A Bernoulli(sigmoid(logits)) draw, 0 or 1 forward, with the gradient of its binary
    Gumbel-softmax relaxation backward (the module docstring)."""
    u = torch.rand_like(logits).clamp(1e-6, 1 - 1e-6)
    noisy = logits + torch.log(u) - torch.log1p(-u)
    soft = torch.sigmoid(noisy / temperature)
    return (noisy > 0).to(logits.dtype) + (soft - soft.detach())  # exactly 0 or 1 forward


def log_prob(logits: Tensor, z: Tensor, mask: Tensor) -> Tensor:
    """``log p(z)`` per sample: sum over real tokens of log Bernoulli(z_i; sigmoid(logit_i))."""
    return ((z * F.logsigmoid(logits) + (1 - z) * F.logsigmoid(-logits)) * mask).sum(-1)


FIXED_SPARSITY = 3e-4  # lambda0 of Lei et al.'s beer runs, the cost per token without --lagrangian


@dataclass(frozen=True)
class BernoulliOptions(RateOptions):
    """Defaults: the beer protocol (benchmarks/RESULTS.md): the rate held at the budget by a
    multiplier with no cost per token, 0.0006 per transition, a leave-one-out baseline over 4
    samples (the lowest-variance gradient measured). On the demo corpus they reach 94.7%
    validation precision at 12.4% selected, where one sample with a fixed cost per token
    reached 66.1% at 6.7%."""

    budget: Budget = option(Budget(0.13), "the expected selection rate held in training (both sides)",
                            role="target held in training (with {lagrangian})", requires="lagrangian",
                            use=BudgetUse.HELD)
    lagrange_lr: float = option(0.05, "step size of the multiplicative Lagrange multiplier updates", above=0.0,
                                requires="lagrangian")
    lagrange_rho: float = option(20.0, "weight of the augmented-Lagrangian term rho/2 (rate - target)^2",
                                 low=0.0, requires="lagrangian")
    sparsity: float | None = option(None, "cost per selected token, lambda0 of Lei et al.", low=0.0,
                                    default_text=f"0 with {{lagrangian}}, else {FIXED_SPARSITY:g}")
    coherence: float | None = option(None, "cost per 0/1 transition, lambda1", low=0.0,
                                     default_text=f"2 x {{sparsity}}, {2 * FIXED_SPARSITY:g} when that is not given")
    baseline: str = option("loo", "REINFORCE baseline: none, ema (moving average) or loo (leave one out "
                           "over {samples})", choices=BASELINES)
    samples: int = option(4, "rationales sampled per document", low=1)
    lagrangian: bool = option(True, "hold the rate at {budget} with a multiplier (added to the {sparsity} "
                              "cost) instead of a fixed cost per selected token")
    estimator: str = option("reinforce", "the selector's gradient of the task loss: reinforce (the score "
                            "function, Lei et al.) or straight-through (Gumbel-softmax, as FR/DR/MGR/MCD's RNP)",
                            choices=ESTIMATORS)
    temperature: float = option(1.0, "temperature of the straight-through relaxation (with {estimator} "
                                "straight-through)", above=0.0)
    exact_penalty: bool = option(True, "differentiate the sparsity and coherence costs' expectations instead "
                                 "of sampling them through REINFORCE: exactly for the independent selector; for "
                                 "the dependent one, each token's expectation given the sampled tokens before it")

    # the search (rationale_cli.models.search): Bastings et al. (2019), appendix B.1, after Lei et al. (2016),
    # took the cost per selected token lambda1 from {2, 3, 4} x 1e-4 and the coherence cost as
    # 2 x lambda1; with the rate held by the multiplier ({lagrangian}) the coherence cost is
    # searched over those three values, and the samples of the baseline (ours: 2, 4 or 8)
    search_space = (OneOf("coherence", (4e-4, 6e-4, 8e-4)), OneOf("samples", (2, 4, 8)))

    def costs(self) -> tuple[float, float]:
        """The cost per selected token and per transition, defaults resolved."""
        sparsity = (0.0 if self.lagrangian else FIXED_SPARSITY) if self.sparsity is None else self.sparsity
        coherence = 2 * (FIXED_SPARSITY if self.sparsity is None else self.sparsity) \
            if self.coherence is None else self.coherence
        return sparsity, coherence

    def check(self) -> None:
        if self.estimator == "straight-through" and self.dependent:
            raise OptionError("estimator", self.estimator, "the independent selector (not {dependent})")
        if self.estimator == "reinforce" and self.baseline == "loo" and self.samples < 2:
            raise OptionError("samples", self.samples, "2 or more with {baseline} loo (leave one out)")


class BernoulliSelector(Selector):
    Options = BernoulliOptions
    summary = ("Lei et al.'s original model: z_i ~ Bernoulli, trained with REINFORCE (or the straight-through "
               "{estimator}) on the task loss plus "
               "{sparsity} x selected + {coherence} x transitions; {lagrangian} holds the rate at {budget} "
               "instead; test time selects p >= 0.5")
    supervised_by = "each token's Bernoulli probability p_i, binary cross-entropy"

    def __init__(self, input_size: int, *, z_hidden: int = 30, ema_decay: float = 0.9, **options):
        super().__init__(**options)
        opts = self.options
        self.sparsity, self.coherence = opts.costs()
        self.baseline, self.samples, self.ema_decay = opts.baseline, opts.samples, ema_decay
        self.budget = opts.budget
        self.exact_penalty = opts.exact_penalty
        self.temperature = opts.temperature if opts.estimator == "straight-through" else None
        self.scan = DependentScan(input_size, 1, z_hidden) if opts.dependent else None
        self.logit_layer = None if opts.dependent else nn.Linear(input_size, 1)
        self.multiplier = (EqualityMultiplier(rho=opts.lagrange_rho, lr=opts.lagrange_lr)
                           if opts.lagrangian else None)
        self.register_buffer("average_cost", torch.tensor(0.0))
        self.register_buffer("average_ready", torch.tensor(False))

    def draw(self, states: Tensor, mask: Tensor, choose) -> tuple[Tensor, Tensor]:
        """z [B, T] and logits [B, T]; ``choose(logits_t)`` samples or decodes."""
        if self.scan is None:
            logits = self.logit_layer(states).squeeze(-1)
            return choose(logits) * mask, logits
        z, logits = self.scan(states, mask, lambda theta: choose(theta[:, 0]))
        return z, logits[..., 0]

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        batch, length, _ = states.shape
        s = self.samples
        many = states.repeat_interleave(s, 0)
        many_mask = mask.repeat_interleave(s, 0)
        if self.temperature is None:
            z, logits = self.draw(many, many_mask, lambda t: torch.bernoulli(torch.sigmoid(t.detach())))
        else:
            z, logits = self.draw(many, many_mask, lambda t: straight_through(t, self.temperature))
        z, logits = z.view(batch, s, length), logits.view(batch, s, length)
        drawn = counts(z, mask.unsqueeze(1))
        lengths = mask.sum(-1, keepdim=True).clamp_min(1.0)
        # exact penalties: costs per document [B, 1] (independent) or sample [B, s] (dependent),
        # differentiable, outside the score function
        if self.exact_penalty and self.scan is not None:
            selected, transitions = prefix_counts(torch.sigmoid(logits), z, mask.unsqueeze(1))
        elif self.exact_penalty:
            selected, transitions = expected_counts(torch.sigmoid(logits[:, :1]), mask.unsqueeze(1))
        else:
            selected, transitions = drawn
        rate = selected / lengths
        target = self.budget.rates(mask).mean()
        extra = self.sparsity * selected + self.coherence * transitions
        if self.exact_penalty or self.temperature is not None:  # straight-through: drawn costs differentiable too
            penalty, sampled = extra.mean(), z.new_zeros(())
            if self.multiplier is not None:  # lambda * c + rho/2 c^2 on the expected rate, as HardKuma's
                penalty = penalty + self.multiplier(rate.mean() - target)
        else:
            if self.multiplier is not None:
                self.multiplier(rate.mean() - target)
                extra = extra + self.multiplier.value * rate
            penalty, sampled = z.new_zeros(()), extra.detach()
        surrogate = None
        if self.temperature is None:
            lp = log_prob(logits, z, mask.unsqueeze(1))
            surrogate = lambda task_loss: self.surrogate(task_loss + sampled, lp)  # noqa: E731
        stats = {"selected": selected_share(z.detach(), mask.unsqueeze(1)),
                 "transitions": (drawn[1] / lengths).mean().detach()}
        if self.multiplier is not None:
            stats["lambda_l0"] = self.multiplier.value.detach()
        return Selection(masks=z, weights=z.new_full((batch, s), 1.0 / s), penalty=penalty,
                         surrogate=surrogate, stats=stats, per_token=PerToken(logits, LOGIT))

    def surrogate(self, cost: Tensor, lp: Tensor) -> Tensor:
        """``mean over documents and samples of (cost - baseline) * log p(z)``; cost detached."""
        cost = cost.detach()
        if self.baseline == "loo":
            s = cost.shape[1]
            advantage = cost - (cost.sum(1, keepdim=True) - cost) / (s - 1)
        elif self.baseline == "ema":
            advantage = cost - self.average_cost if bool(self.average_ready) else cost
            if self.training:
                with torch.no_grad():
                    mean = mean_over_ranks(cost.mean())
                    if bool(self.average_ready):
                        self.average_cost.mul_(self.ema_decay).add_((1 - self.ema_decay) * mean)
                    else:
                        self.average_cost.copy_(mean)
                        self.average_ready.fill_(True)
        else:
            advantage = cost
        return (advantage * lp).mean()

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """z_i = [p_i >= 0.5] and p_i (conditioned on the decoded prefix when dependent)."""
        z, logits = self.draw(states, mask, lambda t: (t >= 0).to(states.dtype))
        return z, torch.sigmoid(logits) * mask
