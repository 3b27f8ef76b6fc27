"""The k-subset distribution of SIMPLE (Ahmed et al., 2023, sections 2-3, appendix A).

Independent Bernoulli logits theta condition on exactly k selections:
``p(z | sum z = k) = prod_i p_i^z_i (1 - p_i)^(1 - z_i) / P(sum z = k)``.

- ``log_partition`` = log P(sum z = k), from the polynomial ``prod_i (1 + e^{theta_i} x)``
  of Algorithm 1 in log space, batched, each row with its own length and k, by one
  of two exact programs (``method``): on a CPU the sequential forward-backward of
  :mod:`models.distributions.chain_dp` with its explicit backward pass, elsewhere
  the log-depth divide and conquer of :mod:`models.distributions.subset_tree`
  (ceil(log2 T) vectorized steps, derivatives by autograd). Working in the natural
  parameters theta makes every derivative, the second order included, exact.
  Padding is never selectable; a document shorter than k selects all of its tokens.
- ``marginals`` = d A / d theta (Theorem 1), differentiable, where
  ``A(theta) = log sum_{|z| = k} exp(<theta, z>) = log P(sum z = k) - sum_i log(1 - p_i)``
  is the log-partition in the natural parameters (with logits, d log P(k) / d theta
  is mu - p, not mu); its Hessian, the marginals' Jacobian, is Cov(z | k).
- ``sample``: on a CPU the forward table walked backwards (Algorithm 2), in the same
  pass as the marginals; elsewhere the segment tree walked back down (Algorithm 6):
  each segment's count is split between its halves in proportion to ``L_j R_{m-j}``.
- ``entropy`` in closed form from the marginals, ``H = A - <mu, theta>``, since
  ``log p(z | k) = <theta, z> - A``; it equals Algorithm 4's recursion (checked
  against enumeration), and
  ``KL(p || uniform) = log C(n, k) - H`` (Proposition 4).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from models.budget import top_k_mask
from models.distributions import chain_dp, gradient_of
from models.distributions.subset_tree import NEG, leaves, log_sum, root_value, up_sweep

METHODS = ("auto", "sequential", "tree")


def resolve_method(method: str, x: Tensor) -> str:
    """``auto``: the sequential program on a CPU, the log-depth tree elsewhere (GPUs)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method == "auto":
        return "sequential" if x.device.type == "cpu" else "tree"
    return method

class KSubset:
    """k-subsets of the non-pad positions of each row; ``k`` an int or a [B] tensor."""

    def __init__(self, logits: Tensor, mask: Tensor, k: int | Tensor, method: str = "auto"):
        self.logits, self.mask = logits, mask
        self.method = resolve_method(method, logits)
        lengths = mask.sum(-1).long()
        k = torch.as_tensor(k, device=logits.device).long().expand(lengths.shape)
        self.k = torch.minimum(k, lengths)
        self.max_k = int(self.k.max()) if self.k.numel() else 0

    def levels(self, logits: Tensor | None = None) -> list[Tensor]:
        """Segment tables ``[B, S, 1, 1, D]`` from single tokens up to the whole row."""
        logits = self.logits if logits is None else logits
        return up_sweep(leaves(logits, self.mask, 1), None, self.max_k, log_sum)

    def natural_log_partition(self, logits: Tensor | None = None) -> Tensor:
        """``A(theta) = log sum_{|z| = k} exp(<theta, z>)`` per row [B]."""
        if self.method == "sequential":
            return self.sequential(logits)[0]
        return root_value(self.levels(logits)[-1], self.k, log_sum)

    def sequential(self, logits: Tensor | None = None, draws: Tensor | None = None):
        """``(A, marginals, sample)`` by the sequential program with its explicit backward
        pass; the sample is drawn from uniform ``draws [B, T]`` when they are given."""
        logits = self.logits if logits is None else logits
        masked = logits.masked_fill(self.mask <= 0, NEG)
        return chain_dp.ChainMarginals.apply(masked, None, self.k, self.max_k, draws)

    def uniforms(self, generator: torch.Generator | None) -> Tensor:
        return torch.rand(self.logits.shape, generator=generator, device=self.logits.device, dtype=self.logits.dtype)

    def log_partition(self) -> Tensor:
        """log P(sum z = k) per row [B]."""
        return self.natural_log_partition() + (F.logsigmoid(-self.logits) * self.mask).sum(-1)

    def marginals(self) -> Tensor:
        """P(z_i = 1 | sum z = k) = dA/dtheta_i [B, T]; differentiable when grad mode is on."""
        if self.method == "sequential":
            mu = self.sequential()[1]
        else:
            mu = gradient_of(self.natural_log_partition, self.logits)
        return mu * self.mask

    @torch.no_grad()
    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        """An exact sample of ``p(z | sum z = k)`` per row [B, T] (Algorithm 6): from the
        root down, each segment with m ones gives j of them to its left half with
        probability ``exp(L_j + R_{m-j}) / exp(S_m)``; on a CPU the sequential walk of
        Algorithm 2."""
        if self.method == "sequential":
            return self.sequential(draws=self.uniforms(generator))[2] * self.mask
        levels = self.levels()
        counts = self.k.unsqueeze(1)  # [B, segments]
        for table in reversed(levels[:-1]):
            left, right = table[:, 0::2, 0, 0], table[:, 1::2, 0, 0]  # [B, S, D]
            rest = counts.unsqueeze(-1) - torch.arange(left.shape[-1], device=counts.device)
            fits = (rest >= 0) & (rest < right.shape[-1])
            scores = left + right.gather(-1, rest.clamp(0, right.shape[-1] - 1))
            u = torch.rand(scores.shape, generator=generator, device=scores.device, dtype=scores.dtype)
            noisy = scores - torch.log(-torch.log(u.clamp(1e-12, 1 - 1e-7)))  # Gumbel-max
            j = noisy.masked_fill(~fits, float("-inf")).argmax(-1)
            counts = torch.stack([j, counts - j], -1).flatten(1)
        return counts[:, : self.logits.shape[1]].to(self.logits.dtype) * self.mask

    def marginals_and_sample(self, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """The marginals (differentiable) and an exact sample, from one pass on a CPU."""
        if self.method == "sequential":
            _, mu, z = self.sequential(draws=self.uniforms(generator))
            return mu * self.mask, z * self.mask
        return self.marginals(), self.sample(generator)

    def argmax(self) -> Tensor:
        """The k highest logits of each row (exactly k; ties go to the earlier position)."""
        return top_k_mask(self.logits, self.mask, self.k)

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
    mu, z = dist.marginals_and_sample(generator)
    return z + (mu - mu.detach()), mu

