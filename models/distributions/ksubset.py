"""The k-subset distribution of SIMPLE (Ahmed et al., 2023, sections 2-3, appendix A).

Independent Bernoulli logits theta condition on exactly k selections:
``p(z | sum z = k) = prod_i p_i^z_i (1 - p_i)^(1 - z_i) / P(sum z = k)``, which is
``exp(<theta, z>) / exp(A(theta))`` over the k-subsets: the chain distribution of
:mod:`rationale_cli.models.distributions.chain_ksubset` without pairwise terms, with the logits as
its natural parameters.

- ``log_partition`` = ``A(theta) = log sum_{|z| = k} exp(<theta, z>)``, from the polynomial
  ``prod_i (1 + e^{theta_i} x)`` of Algorithm 1 in log space;
  ``log_count_probability`` = ``log P(sum z = k) = A - sum_i log(1 + e^{theta_i})``.
- ``marginals`` = dA/dtheta (Theorem 1), differentiable (with logits, d log P(k) / d theta
  is mu - p, not mu); its Hessian, the marginals' Jacobian, is Cov(z | k).
- ``sample``: Algorithm 2 (sequential) or Algorithm 6 (the segment tree walked down).
- ``entropy`` in closed form from the marginals, ``H = A - <mu, theta>``; it equals
  Algorithm 4's recursion (checked against enumeration), and
  ``KL(p || uniform) = log C(n, k) - H`` (Proposition 4).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset


class KSubset(ChainKSubset):
    """k-subsets of the non-pad positions of each row; ``k`` an int or a [B] tensor."""

    def __init__(self, logits: Tensor, mask: Tensor, k: int | Tensor, method: str = "auto"):
        super().__init__(logits, mask, k, method=method)

    @property
    def log_count_probability(self) -> Tensor:
        """log P(sum z = k) per row [B] under the independent Bernoullis."""
        return self.log_partition + (F.logsigmoid(-self.unary) * self.mask).sum(-1)


def simple_estimator(dist: KSubset, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """SIMPLE (section 3, eq. 8): the forward value is an exact discrete sample z; the
    backward pass is the gradient through the exact marginals, ``J_mu^T g``.
    Returns (z with that gradient, the marginals); on a CPU one pass gives both."""
    z = dist.sample(generator)
    mu = dist.marginals
    return z + (mu - mu.detach()), mu
