"""SIMPLE rationales: exactly ``budget`` tokens (k, or a share of each document), sampled exactly, trained through the exact
marginals (Ahmed et al., 2023, sections 3-4; the distribution is in
:mod:`rationale_cli.models.distributions.ksubset`).

Per-token logits come from a linear layer over the selector encoder's states.
Training: the predictor reads an exact sample of ``p(z | sum z = k)``; the
selector's gradient is the gradient through the marginals (eq. 8). Optional
``kl_weight`` adds ``KL(p(z | k) || uniform)`` (Proposition 4) to the loss.
Rationale supervision (the Selection's ``per_token``) takes the marginals.
Test time: the k highest logits; token scores are the marginals P(z_i = 1 | sum z = k).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from rationale_cli.models.budget import Budget, BudgetUse
from rationale_cli.models.distributions.ksubset import KSubset, simple_estimator
from rationale_cli.models.options import Options, option
from rationale_cli.models.search import OneOf
from rationale_cli.models.selection import PROBABILITY, PerToken, Selection, Selector, selected_share


@dataclass(frozen=True)
class KSubsetOptions(Options):
    """The size of a k-subset extractor's rationale (exact)."""

    budget: Budget = option(Budget(count=10), "exactly this many tokens per document (k)", role="exact size",
                            use=BudgetUse.EXACT)


@dataclass(frozen=True)
class SimpleOptions(KSubsetOptions):
    kl_weight: float = option(0.0, "weight of KL(p(z | k) || uniform) in the loss", low=0.0)

    # the search (rationale_cli.models.search): no paper gives one for this weight; ours, from none up
    search_space = (OneOf("kl_weight", (0.0, 1e-3, 1e-2, 1e-1)),)


class SimpleSelector(Selector):
    Options = SimpleOptions
    summary = ("SIMPLE (Ahmed et al. 2023): exactly {budget} tokens, an exact sample of the k-subset "
               "distribution in training with gradients through its exact marginals; test time takes "
               "the k highest-scoring tokens")
    supervised_by = "the exact marginals P(z_i = 1 | sum z = k), binary cross-entropy"

    def __init__(self, input_size: int, **options):
        super().__init__(**options)
        self.kl_weight = self.options.kl_weight
        self.logit_layer = nn.Linear(input_size, 1)

    def table_bytes(self, length: int) -> int:
        """The k-subset program's tables, per position and count of tokens so far: 38 bytes an entry
        (measured on 1,600-token documents at a budget of 0.2, over a HardKuma step's)."""
        return 38 * length * self.options.budget.tokens_of(length)

    def distribution(self, states: Tensor, mask: Tensor) -> KSubset:
        return KSubset(self.logit_layer(states).squeeze(-1), mask, self.options.budget.tokens(mask))

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        dist = self.distribution(states, mask)
        z, marginals = simple_estimator(dist)
        penalty = z.new_zeros(())
        stats = {"selected": selected_share(z, mask)}
        if self.kl_weight > 0:
            kl = dist.kl_uniform().mean()
            penalty = self.kl_weight * kl
            stats["kl_uniform"] = kl.detach()
        return Selection.single(z, penalty, per_token=PerToken(marginals, PROBABILITY), **stats)

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The k highest logits and the conditional marginals P(z_i = 1 | sum z = k)."""
        dist = self.distribution(states, mask)
        return dist.argmax, dist.marginals
