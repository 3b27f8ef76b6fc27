"""SIMPLE rationales: exactly k tokens, sampled exactly, trained through the exact
marginals (Ahmed et al., 2023, sections 3-4; the distribution is in
:mod:`models.distributions.ksubset`).

Per-token logits come from a linear layer over the selector encoder's states.
Training: the predictor reads an exact sample of ``p(z | sum z = k)``; the
selector's gradient is the gradient through the marginals (eq. 8). Optional
``kl_weight`` adds ``KL(p(z | k) || uniform)`` (Proposition 4) to the loss.
Test time: the k highest logits.
"""

from __future__ import annotations

from torch import Tensor, nn

from models.distributions.ksubset import KSubset, simple_estimator
from models.selection import Selection, Selector


class SimpleSelector(Selector):
    def __init__(self, input_size: int, k: int = 10, kl_weight: float = 0.0):
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        self.k, self.kl_weight = k, kl_weight
        self.logit_layer = nn.Linear(input_size, 1)

    def distribution(self, states: Tensor, mask: Tensor) -> KSubset:
        return KSubset(self.logit_layer(states).squeeze(-1), mask, self.k)

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        dist = self.distribution(states, mask)
        z, mu = simple_estimator(dist)
        penalty = z.new_zeros(())
        stats = {"selected": float((z.detach() * mask).sum() / mask.sum().clamp_min(1.0))}
        if self.kl_weight > 0:
            kl = dist.kl_uniform(mu).mean()
            penalty = self.kl_weight * kl
            stats["kl_uniform"] = kl.item()
        return Selection.single(z, penalty, **stats)

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.distribution(states, mask).argmax()

    def token_scores(self, states: Tensor, mask: Tensor) -> Tensor:
        """The conditional marginals P(z_i = 1 | sum z = k)."""
        return self.distribution(states, mask).marginals()
