"""Correlated k-subsets (Paulus et al., 2020, appendix B.5): exactly k of n tokens,
with utilities for each token and for each pair of adjacent tokens that are both
selected, so contiguous rationales can be preferred.

The embedding of a subset is ``x in {0, 1}^(2n-1)``: the token indicators z, then
``z_i z_{i+1}`` for adjacent pairs, with ``sum z = k`` (eq. 44). For utilities
``u`` (unary, [B, T]) and ``w`` (pairwise, [B, T-1]):

- ``log_partition(tau)`` = ``log sum_x exp(<u, x> / tau)``, by a dynamic program over
  (count, bit), vectorized over the batch: on a CPU the sequential forward-backward
  of :mod:`models.distributions.chain_dp`, elsewhere the log-depth program of
  :mod:`models.distributions.subset_tree` over segment tables indexed by
  (first bit, last bit, count);
- ``marginals(tau)``: the exponential-family relaxation (section 3, the
  marginals of ``p(x) ~ exp(<U / tau, x>)``), differentiable with an exact backward
  pass (explicit ``Cov(x) g`` on a CPU, autograd through ceil(log2 T) batched steps
  of the tree elsewhere; the paper fell back to finite differences);
- ``argmax``: ``max <u, z> + <w, z_i z_{i+1}>`` by the same program in max-plus,
  the maximizer being the gradient of the max with respect to u.

Pairwise utilities next to a padding position are ignored; a document with
fewer than k tokens selects all of them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from models.distributions import chain_dp, gradient_of
from models.distributions.ksubset import resolve_method
from models.distributions.subset_tree import (
    NEG,
    best,
    boundary_utilities,
    leaves,
    log_sum,
    root_value,
    up_sweep,
)


class ChainKSubset:
    def __init__(self, unary: Tensor, pairwise: Tensor, mask: Tensor, k: int | Tensor, method: str = "auto"):
        self.unary, self.pairwise, self.mask = unary, pairwise, mask
        self.method = resolve_method(method, unary)
        lengths = mask.sum(-1).long()
        k = torch.as_tensor(k, device=unary.device).long().expand(lengths.shape)
        self.k = torch.minimum(k, lengths)
        self.max_k = int(self.k.max()) if self.k.numel() else 0

    def value(self, unary: Tensor, tau: float, reduce) -> Tensor:
        """``reduce_x <u, x> / tau`` over the correlated k-subsets, per row [B]."""
        table = leaves(unary / tau, self.mask, 2)
        links = boundary_utilities(self.pairwise / tau, self.mask, table.shape[1])
        return root_value(up_sweep(table, links, self.max_k, reduce)[-1], self.k, reduce)

    def sequential(self, tau: float) -> tuple[Tensor, Tensor]:
        """``(log Z, marginals)`` by the sequential program with its explicit backward pass."""
        unary = (self.unary / tau).masked_fill(self.mask <= 0, NEG)
        links = F.pad(boundary_utilities(self.pairwise / tau, self.mask, self.mask.shape[1]), (1, 0))
        return chain_dp.ChainMarginals.apply(unary, links, self.k, self.max_k)

    def log_partition(self, tau: float = 1.0) -> Tensor:
        """``log sum_x exp(<u, x> / tau)`` over the correlated k-subsets, per row [B]."""
        if self.method == "sequential":
            return self.sequential(tau)[0]
        return self.value(self.unary, tau, log_sum)

    def marginals(self, tau: float = 1.0) -> Tensor:
        """E[z_i] under ``p(x) ~ exp(<u, x> / tau)`` [B, T]: the relaxed k-subset."""
        if self.method == "sequential":
            return self.sequential(tau)[1] * self.mask
        return gradient_of(lambda u: self.value(u, tau, log_sum), self.unary) * tau * self.mask

    @torch.no_grad()
    def argmax(self) -> Tensor:
        """The best correlated k-subset per row [B, T] (one of them on ties)."""
        return gradient_of(lambda u: self.value(u, 1.0, best), self.unary) * self.mask
