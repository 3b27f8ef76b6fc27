"""Correlated k-subsets (Paulus et al., 2020, appendix B.5): exactly k of n tokens,
with utilities for each token and for each pair of adjacent tokens that are both
selected, so contiguous rationales can be preferred.

The embedding of a subset is ``x in {0, 1}^(2n-1)``: the token indicators z, then
``z_i z_{i+1}`` for adjacent pairs, with ``sum z = k`` (eq. 44). For utilities
``u`` (unary, [B, T]) and ``w`` (pairwise, [B, T-1]):

- ``argmax``: ``max <u, z> + <w, z_i z_{i+1}>`` by a max-plus dynamic program over
  (position, count, previous bit), with backtracking, vectorized over the batch;
- ``log_partition(tau)`` = ``log sum_x exp(<u, x> / tau)`` by the same program in
  log space (``logsumexp`` over stacked alternatives);
- ``marginals(tau)``: the exponential-family relaxation (section 3, the
  marginals of ``p(x) ~ exp(<U / tau, x>)``), as the gradient of the
  log-partition, differentiable (the exact backward pass, by autograd).

Padding positions are skipped (the state passes through them); a document with
fewer than k tokens selects all of them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.distributions import gradient_of

NEG = -1e9


class ChainKSubset:
    def __init__(self, unary: Tensor, pairwise: Tensor, mask: Tensor, k: int | Tensor):
        self.unary, self.pairwise, self.mask = unary, pairwise, mask
        lengths = mask.sum(-1).long()
        k = torch.as_tensor(k, device=unary.device).long().expand(lengths.shape)
        self.k = torch.minimum(k, lengths)
        self.max_k = int(self.k.max()) if self.k.numel() else 0

    def scan(self, tau: float, combine) -> list[Tensor]:
        """Tables ``[B, K+1, 2]`` after each token: best (``combine = max``) or log-summed
        (``combine = logsumexp``) score of the first i tokens with count j and last bit b."""
        batch, length = self.unary.shape
        u, w = self.unary / tau, self.pairwise / tau
        state = u.new_full((batch, self.max_k + 1, 2), NEG)
        state[:, 0, 0] = 0.0
        pad = u.new_full((batch, 1), NEG)
        tables = [state]
        for i in range(length):
            off = combine(state, -1)  # z_i = 0 after either bit
            link = w[:, i - 1 : i] if i > 0 else torch.zeros_like(pad)
            on = combine(torch.stack([state[..., 0], state[..., 1] + link], -1), -1) + u[:, i : i + 1]
            on = torch.cat([pad, on[:, :-1]], 1)  # z_i = 1 raises the count
            new = torch.stack([off, on], -1)
            state = torch.where(self.mask[:, i, None, None] > 0, new, state)
            tables.append(state)
        return tables

    def final(self, table: Tensor, combine) -> Tensor:
        rows = torch.arange(table.shape[0], device=table.device)
        return combine(table[rows, self.k], -1)

    def log_partition(self, tau: float = 1.0) -> Tensor:
        """``log sum_x exp(<u, x> / tau)`` over the correlated k-subsets, per row [B]."""
        return self.final(self.scan(tau, torch.logsumexp)[-1], torch.logsumexp)

    def marginals(self, tau: float = 1.0) -> Tensor:
        """E[z_i] under ``p(x) ~ exp(<u, x> / tau)`` [B, T]: the relaxed k-subset."""
        grad = gradient_of(lambda u: ChainKSubset(u, self.pairwise, self.mask, self.k).log_partition(tau), self.unary)
        return grad * tau * self.mask

    @torch.no_grad()
    def argmax(self) -> Tensor:
        """The best correlated k-subset per row [B, T] (ties: the later 1, deterministically)."""
        values = lambda x, dim: x.max(dim).values  # noqa: E731
        tables = self.scan(1.0, values)
        batch, length = self.unary.shape
        rows = torch.arange(batch, device=self.unary.device)
        z = torch.zeros_like(self.unary)
        j = self.k.clone()
        bit = tables[-1][rows, j].argmax(-1)
        for i in range(length - 1, -1, -1):
            real = self.mask[:, i] > 0
            z[:, i] = torch.where(real, bit.to(z.dtype), z[:, i])
            before = tables[i]
            j_prev = torch.where(real & (bit == 1), j - 1, j)
            link = self.pairwise[:, i - 1] if i > 0 else torch.zeros(batch, device=z.device, dtype=z.dtype)
            candidates = before[rows, j_prev.clamp_min(0)]  # [B, 2]
            scores = torch.where((bit == 1).unsqueeze(-1), candidates + torch.stack([torch.zeros_like(link), link], -1),
                                 candidates)
            prev_bit = scores.argmax(-1)
            bit = torch.where(real, prev_bit, bit)
            j = j_prev
        return z
