"""The k-subset distribution of SIMPLE (Ahmed et al., 2023, sections 2-3, appendix A).

Independent Bernoulli logits theta condition on exactly k selections:
``p(z | sum z = k) = prod_i p_i^z_i (1 - p_i)^(1 - z_i) / P(sum z = k)``.

- ``log_partition`` = log P(sum z = k), by the O(n k) dynamic program of
  Algorithm 1 in log space over (position, count), vectorized over the batch.
  Both ``log p_i = logsigmoid(theta_i)`` and ``log(1 - p_i) = logsigmoid(-theta_i)``
  are functions of theta, so every derivative, the second order included, is exact.
  Pairs are combined with ``logsumexp`` over a stacked pair (never
  ``logaddexp``, whose double backward is NaN once its arguments differ by more
  than about 88 in float32). Padding is never selectable; a document shorter
  than k selects all of its tokens.
- ``marginals`` = d A / d theta (Theorem 1), differentiable, where
  ``A(theta) = log sum_{|z| = k} exp(<theta, z>) = log P(sum z = k) - sum_i log(1 - p_i)``
  is the log-partition in the natural parameters (with logits, d log P(k) / d theta
  is mu - p, not mu); its Hessian, the marginals' Jacobian, is Cov(z | k).
- ``sample`` walks the table backwards (Algorithm 2): exact samples.
- ``entropy`` in closed form from the marginals, ``H = A - <mu, theta>``, since
  ``log p(z | k) = <theta, z> - A``; it equals Algorithm 4's recursion (checked
  against enumeration), and
  ``KL(p || uniform) = log C(n, k) - H`` (Proposition 4).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from models.distributions import gradient_of

NEG = -1e9  # log of an impossible count; finite, so no inf - inf in any derivative


class KSubset:
    """k-subsets of the non-pad positions of each row; ``k`` an int or a [B] tensor."""

    def __init__(self, logits: Tensor, mask: Tensor, k: int | Tensor):
        self.logits, self.mask = logits, mask
        lengths = mask.sum(-1).long()
        k = torch.as_tensor(k, device=logits.device).long().expand(lengths.shape)
        self.k = torch.minimum(k, lengths)
        self.max_k = int(self.k.max()) if self.k.numel() else 0

    def table(self) -> Tensor:
        """``alpha[i, b, j] = log P(sum of the first i tokens = j)``, shape [T+1, B, K+1]."""
        batch, length = self.logits.shape
        log_on = F.logsigmoid(self.logits)
        log_off = F.logsigmoid(-self.logits)
        alpha = self.logits.new_full((batch, self.max_k + 1), NEG)
        alpha[:, 0] = 0.0
        shifted_pad = self.logits.new_full((batch, 1), NEG)
        rows = [alpha]
        for i in range(length):
            off = alpha + log_off[:, i : i + 1]
            on = torch.cat([shifted_pad, alpha[:, :-1]], 1) + log_on[:, i : i + 1]
            step = torch.logsumexp(torch.stack([off, on]), 0)
            alpha = torch.where(self.mask[:, i : i + 1] > 0, step, alpha)
            rows.append(alpha)
        return torch.stack(rows)

    def log_partition(self) -> Tensor:
        """log P(sum z = k) per row [B]."""
        return self.table()[-1].gather(1, self.k.unsqueeze(1)).squeeze(1)

    def natural_log_partition(self) -> Tensor:
        """``A(theta) = log sum_{|z| = k} exp(<theta, z>)`` per row [B]."""
        return self.log_partition() - (F.logsigmoid(-self.logits) * self.mask).sum(-1)

    def marginals(self) -> Tensor:
        """P(z_i = 1 | sum z = k) = dA/dtheta_i [B, T]; differentiable when grad mode is on."""
        mu = gradient_of(lambda logits: KSubset(logits, self.mask, self.k).natural_log_partition(), self.logits)
        return mu * self.mask

    @torch.no_grad()
    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        """An exact sample of ``p(z | sum z = k)`` per row [B, T] (Algorithm 2)."""
        alpha = self.table()
        log_on = F.logsigmoid(self.logits)
        batch, length = self.logits.shape
        rows = torch.arange(batch, device=self.logits.device)
        j = self.k.clone()
        z = torch.zeros_like(self.logits)
        for i in range(length - 1, -1, -1):
            before = alpha[i][rows, (j - 1).clamp_min(0)]
            p_on = torch.exp(before + log_on[:, i] - alpha[i + 1][rows, j])
            p_on = torch.where(j > 0, p_on, torch.zeros_like(p_on)) * self.mask[:, i]
            u = torch.rand(batch, generator=generator, device=self.logits.device, dtype=self.logits.dtype)
            take = u < p_on
            z[:, i] = take.to(z.dtype)
            j = j - take.long()
        return z

    def argmax(self) -> Tensor:
        """The k highest logits of each row (exactly k; ties go to the earlier position)."""
        scores = self.logits.masked_fill(self.mask <= 0, float("-inf"))
        order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
        ranks = torch.empty_like(order)
        positions = torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
        ranks.scatter_(-1, order, positions)
        return (ranks < self.k.unsqueeze(-1)).to(self.logits.dtype) * self.mask

    def entropy(self, marginals: Tensor | None = None) -> Tensor:
        """H(p(z | sum z = k)) per row, exact and differentiable."""
        mu = self.marginals() if marginals is None else marginals
        return self.natural_log_partition() - (mu * self.logits * self.mask).sum(-1)

    def kl_uniform(self, marginals: Tensor | None = None) -> Tensor:
        """KL(p(z | k) || uniform over k-subsets) = log C(n, k) - H (Proposition 4)."""
        n = self.mask.sum(-1)
        k = self.k.to(n.dtype)
        log_choose = torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)
        return log_choose - self.entropy(marginals)


def simple_estimator(dist: KSubset, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """SIMPLE (section 3, eq. 8): the forward value is an exact discrete sample z; the
    backward pass is the gradient through the exact marginals, ``J_mu^T g``.
    Returns (z with that gradient, the marginals)."""
    mu = dist.marginals()
    z = dist.sample(generator)
    return z + (mu - mu.detach()), mu

