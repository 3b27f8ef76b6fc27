"""Log-depth dynamic programs over k-subsets of a chain of tokens.

A segment of tokens is summarized by a table ``S[a, d, m]``: the log-sum (or the
max) of ``<u, z> + sum_i w_i z_i z_{i+1}`` over the segment's assignments z with
first bit a, last bit d and m ones. Without pairwise utilities the bits carry no
information and the table is ``S[0, 0, m]`` (``bits = 1``): the polynomial
``prod_i (1 + e^{u_i} x)`` of SIMPLE's Algorithm 1, in log space. Tables of two
adjacent segments combine associatively::

    S[a, d, m] = reduce_{b, c, j}  L[a, b, j] + R[c, d, m - j] + b c w_boundary

a convolution over counts truncated at K, the largest k needed. Combining neighbours
level by level (the up-sweep of a parallel scan; the divide and conquer of SIMPLE's
Algorithm 6) gives the whole sequence's table in ceil(log2 T) vectorized steps
instead of T sequential ones. Derivatives come from autograd through these few
large operations: marginals as the gradient of the log-partition (Paulus et al.,
2020, section 3; Ahmed et al., 2023, Theorem 1), the marginals' Jacobian-vector
product ``Cov(z) g`` as the second derivative, and the argmax as the gradient of
the max-plus value (the gradient of ``max`` goes to a single argument).

Padding is a leaf whose only assignment is z = 0; pairwise utilities touching a
pad are zero. Every pair is combined with ``logsumexp`` over stacked terms (never
``logaddexp``, whose double backward is NaN once its arguments differ by more than
about 88 in float32), and impossible counts hold the finite ``NEG``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

NEG = -1e9  # log-weight of an impossible assignment; finite, so no inf - inf in any derivative

Reduce = Callable[[Tensor, tuple[int, ...]], Tensor]


def log_sum(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    return torch.logsumexp(x, dims)


def best(x: Tensor, dims: tuple[int, ...]) -> Tensor:
    """Max over ``dims``; its gradient goes to exactly one argument."""
    ends = tuple(range(x.dim() - len(dims), x.dim()))
    return x.movedim(dims, ends).flatten(-len(dims)).max(-1).values


def leaves(unary: Tensor, mask: Tensor, bits: int) -> Tensor:
    """One table per token ``[B, T2, bits, bits, 2]``, T2 the next power of two >= T;
    positions past T and padding allow z = 0 only."""
    batch, length = unary.shape
    width = 1 << max(length - 1, 0).bit_length()
    on = F.pad(torch.where(mask > 0, unary, NEG), (0, width - length), value=NEG)
    table = unary.new_full((batch, width, bits, bits, 2), NEG)
    table[:, :, 0, 0, 0] = 0.0
    table[:, :, bits - 1, bits - 1, 1] = on
    return table


def boundary_utilities(pairwise: Tensor, mask: Tensor, width: int) -> Tensor:
    """``w_i`` for tokens i, i+1 both real, zero otherwise, padded to ``width - 1``."""
    both = (mask[:, :-1] > 0) & (mask[:, 1:] > 0)
    return F.pad(torch.where(both, pairwise, 0.0), (0, width - 1 - pairwise.shape[1]))


def combine(left: Tensor, right: Tensor, link: Tensor | None, max_k: int, reduce: Reduce) -> Tensor:
    """Tables of adjacent segments ``[B, S, A, A, DL]``, ``[B, S, A, A, DR]`` -> ``[B, S, A, A, M]``,
    with ``link [B, S]`` the pairwise utility across each boundary (None when A = 1)."""
    size_l, size_r = left.shape[-1], right.shape[-1]
    size = min(max_k, size_l + size_r - 2) + 1
    j = torch.arange(size_l, device=left.device).unsqueeze(1)
    offset = torch.arange(size, device=left.device).unsqueeze(0) - j
    offset = torch.where((offset >= 0) & (offset < size_r), offset, size_r)  # size_r: the NEG column
    shifted = F.pad(right, (0, 1), value=NEG)[..., offset]  # [B, S, c, d, j, m] = R[c, d, m - j]
    if link is not None:  # fold b into c: L'[a, c, j] = reduce_b L[a, b, j] + b c w
        bits = left.shape[2]
        both = torch.arange(bits, device=left.device)
        pair = link[:, :, None, None] * (both[:, None] * both[None, :]).to(link.dtype)  # [B, S, b, c]
        left = reduce(left.unsqueeze(4) + pair[:, :, None, :, :, None], (3,))
    total = left[:, :, :, :, None, :, None] + shifted[:, :, None]  # [B, S, a, c, d, j, m]
    return reduce(total, (3, 5))


def up_sweep(table: Tensor, links: Tensor | None, max_k: int, reduce: Reduce) -> list[Tensor]:
    """Tables of segments of 1, 2, 4, ... tokens; the last holds the whole sequence ``[B, 1, A, A, K+1]``."""
    levels = [table]
    width = 1
    while table.shape[1] > 1:
        link = None if links is None else links[:, width - 1 :: 2 * width]
        table = combine(table[:, 0::2], table[:, 1::2], link, max_k, reduce)
        levels.append(table)
        width *= 2
    return levels


def root_value(root: Tensor, k: Tensor, reduce: Reduce, at_most: bool = False) -> Tensor:
    """``reduce_{a, d} S[a, d, k]`` per row from the whole sequence's table (with
    ``at_most``, reduced over the counts up to k as well)."""
    if at_most:
        allowed = torch.arange(root.shape[-1], device=root.device) <= k.unsqueeze(1)  # [B, M]
        return reduce(root[:, 0].masked_fill(~allowed[:, None, None], NEG), (1, 2, 3))
    bits = root.shape[2]
    index = k.view(-1, 1, 1, 1).expand(-1, bits, bits, 1)
    return reduce(root[:, 0].gather(-1, index).squeeze(-1), (1, 2))
