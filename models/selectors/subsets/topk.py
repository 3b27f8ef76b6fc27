"""Stochastic softmax tricks for k-subsets (Paulus et al., 2020, sections 3-4,
appendix B.5 and D.6): ``topk`` (exponential-family-entropy top-k) and
``corr-topk`` (correlated top-k, which can reward adjacent selected tokens).

Utilities: unary ``U_i ~ Gumbel(theta_i)`` with ``theta_i`` a linear map of the
selector states; for ``corr-topk`` fixed pairwise utilities
``theta_{i,i+1} = phi_i + phi'_{i+1} + phi_{i,i+1}`` (two width-1 maps and a
width-2 convolution, as in D.6). Training reads the relaxed mask: the marginals
of ``p(x) ~ exp(<U / tau, x>)`` over (correlated) k-subsets, with the exact
backward pass; optionally straight-through (hard sample forward, relaxed
gradient). Rationale supervision (the Selection's ``per_token``) takes the relaxed
mask, those marginals. Test time: the argmax with the unperturbed utilities. The subset size k
is each document's ``budget`` (a count, or a share of its length: :mod:`rationale_cli.models.budget`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset
from rationale_cli.models.options import option
from rationale_cli.models.search import Searched
from rationale_cli.models.selection import PROBABILITY, PerToken, Selection, Selector
from rationale_cli.models.selectors.subsets.simple import KSubsetOptions


def gumbel_like(x: Tensor) -> Tensor:
    u = torch.rand_like(x).clamp(1e-10, 1 - 1e-10)
    return -torch.log(-torch.log(u))


@dataclass(frozen=True)
class TopKOptions(KSubsetOptions):
    tau: float = option(1.0, "temperature of the relaxation", above=0.0)
    straight_through: bool = option(False, "hard sample forward, relaxed gradient")

    # the search (rationale_cli.models.search): Paulus et al. (2020), appendix D.6, sampled the temperature
    # uniformly from [0.1, 2] (their learning-rate and weight-decay grids are the training
    # options' space, rationale_cli.runs.config.TrainConfig)
    search_space = (Searched("tau", 0.1, 2.0),)


class TopKSelector(Selector):
    Options = TopKOptions
    summary = ("stochastic softmax trick (Paulus et al. 2020): Gumbel-perturbed token utilities, trained "
               "on the relaxed k-subset of {budget} tokens (temperature {tau}); test time takes the best "
               "k-subset of the unperturbed utilities")
    supervised_by = "the relaxed mask (the marginals of the perturbed k-subset distribution), binary cross-entropy"
    correlated = False

    def __init__(self, input_size: int, **options):
        super().__init__(**options)
        self.tau, self.straight_through = self.options.tau, self.options.straight_through
        self.unary = nn.Linear(input_size, 1)

    def table_bytes(self, length: int) -> int:
        """The k-subset chain's tables, per position and count of tokens so far: 55 bytes an entry
        (measured on 1,600-token documents at a budget of 0.2, over a HardKuma step's; the same
        correlated)."""
        return 55 * length * self.options.budget.tokens_of(length)

    def utilities(self, states: Tensor) -> tuple[Tensor, Tensor | None]:
        return self.unary(states).squeeze(-1), None

    def distribution(self, unary: Tensor, pairwise: Tensor | None, mask: Tensor) -> ChainKSubset:
        """The k-subset distribution with utilities / tau (a chain when there are pairwise terms)."""
        k = self.options.budget.tokens(mask)
        return ChainKSubset(unary / self.tau, mask, k, None if pairwise is None else pairwise / self.tau)

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        unary, pairwise = self.utilities(states)
        dist = self.distribution(unary + gumbel_like(unary), pairwise, mask)
        soft = dist.marginals
        z = soft
        if self.straight_through:  # the argmax does not depend on tau
            z = dist.argmax + soft - soft.detach()
        with torch.no_grad():
            entropy = -(soft * torch.log(soft.clamp_min(1e-12))).sum(-1).mean()
        return Selection.single(z * mask, per_token=PerToken(soft * mask, PROBABILITY), soft_entropy=entropy)

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The best k-subset and the relaxed mask at temperature tau, both without noise
        (one distribution: the argmax does not depend on tau)."""
        dist = self.distribution(*self.utilities(states), mask)
        return dist.argmax, dist.marginals


class CorrelatedTopKSelector(TopKSelector):
    summary = ("correlated top-k (Paulus et al. 2020): as topk, with learned utilities for adjacent "
               "selected pairs, so rationales come out more contiguous")
    correlated = True

    def __init__(self, input_size: int, **options):
        super().__init__(input_size, **options)
        self.left = nn.Linear(input_size, 1)
        self.right = nn.Linear(input_size, 1)
        self.pair = nn.Conv1d(input_size, 1, kernel_size=2)

    def utilities(self, states: Tensor) -> tuple[Tensor, Tensor]:
        """``unary(s_t)`` and, for each adjacent pair, ``left(s_t) + right(s_{t+1}) + pair(s_t, s_{t+1})``
        (a width-2 convolution), from one product of the states with the maps' weights: the
        first of a pair contributes ``left + pair tap 0``, the second ``right + pair tap 1``."""
        weights = torch.stack([self.unary.weight[0], self.left.weight[0] + self.pair.weight[0, :, 0],
                               self.right.weight[0] + self.pair.weight[0, :, 1]], 1)  # [H, 3]
        scores = states @ weights
        unary = scores[..., 0] + self.unary.bias
        pairwise = scores[:, :-1, 1] + scores[:, 1:, 2] + (self.left.bias + self.right.bias + self.pair.bias)
        return unary, pairwise
