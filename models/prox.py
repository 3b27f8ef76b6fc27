"""Proximal operators of 1-d total variation and of OSCAR, with their Jacobians
(Niculae & Blondel, 2017, section 3.2, Propositions 2-3): the first stage of
fusedmax and oscarmax, ``Pi(x) = P_simplex(P(x / gamma))``.

- ``P_TV(x) = argmin_y 1/2 ||y - x||^2 + lam sum_i |y_{i+1} - y_i|``, exactly, as
  the slopes of the taut string: the shortest path from (0, 0) to (n, S_n) that
  stays within ``lam`` of the cumulative sums ``S_k = x_1 + ... + x_k`` (Davies &
  Kovac, 2001). Its Jacobian averages over each group of equal adjacent values.
- ``P_OSC(x) = argmin_y 1/2 ||y - x||^2 + lam sum_{i<j} max(|y_i|, |y_j|)``, exactly:
  OSCAR is the ordered weighted l1 norm with weights ``lam (d - r)`` for the r-th
  largest ``|y|``; its prox sorts ``|x|``, subtracts the weights, projects onto
  non-increasing sequences (pool adjacent violators), clips at 0 and restores
  signs and order (Zeng & Figueiredo, 2014). Jacobian:
  ``J_ij = sign(z_i z_j) / |G_i|`` within each group of equal ``|z_i| > 0``.

Both run row by row on the CPU in float64 over the non-pad positions (the paper
does the same); padding passes through unchanged and gets no gradient. ``P_TV`` runs
compiled for all rows at once where it can (:mod:`rationale_cli.models.native.tv_prox`, the same steps);
the loops here are its fallback and reference.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rationale_cli.models.native.tv_prox import compiled, tv_prox_rows


def tv_prox_row(x: list[float], lam: float) -> tuple[list[float], list[int]]:
    """``P_TV`` of one sequence and the group (segment) index of every position."""
    n = len(x)
    if n == 0:
        return [], []
    cumulative = [0.0]
    for value in x:
        cumulative.append(cumulative[-1] + value)
    upper = [c + lam for c in cumulative]
    lower = [c - lam for c in cumulative]
    upper[0] = lower[0] = 0.0
    upper[n] = lower[n] = cumulative[n]
    y, groups = [0.0] * n, [0] * n
    start, height, group = 0, 0.0, 0
    while start < n:
        lo, hi, at_lo, at_hi = float("-inf"), float("inf"), start, start
        end, slope = n, None
        for j in range(start + 1, n + 1):
            need_lo = (lower[j] - height) / (j - start)
            need_hi = (upper[j] - height) / (j - start)
            if need_lo > hi:  # the string touches the upper tube wall at at_hi
                end, slope, height = at_hi, hi, upper[at_hi]
                break
            if need_hi < lo:  # ... or the lower wall at at_lo
                end, slope, height = at_lo, lo, lower[at_lo]
                break
            if need_lo >= lo:
                lo, at_lo = need_lo, j
            if need_hi <= hi:
                hi, at_hi = need_hi, j
        else:  # the pinned end point is reachable in a straight line
            slope = (cumulative[n] - height) / (n - start)
        for i in range(start, end):
            y[i], groups[i] = slope, group
        start, group = end, group + 1
    return y, groups


def oscar_prox_row(x: list[float], lam: float) -> tuple[list[float], list[int]]:
    """``P_OSC`` of one sequence and a group index per position (-1 where the result is 0)."""
    n = len(x)
    order = sorted(range(n), key=lambda i: -abs(x[i]))
    # blocks of the non-increasing projection of |x|_(r) - lam (n - r), r = 1..n
    blocks: list[list[float]] = []  # [sum, count]
    for rank, i in enumerate(order, start=1):
        blocks.append([abs(x[i]) - lam * (n - rank), 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] <= blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    y, groups = [0.0] * n, [-1] * n
    rank = 0
    for group, (total, count) in enumerate(blocks):
        value = max(total / count, 0.0)
        for i in order[rank : rank + count]:
            if value > 0:
                y[i] = value if x[i] >= 0 else -value
                groups[i] = group
        rank += count
    return y, groups


def rows_of(x: Tensor, mask: Tensor) -> list[list[float]]:
    real = mask > 0
    return [row[keep].tolist() for row, keep in zip(x.detach().double().cpu(), real.cpu())]


def group_mean(values: Tensor, groups: Tensor) -> Tensor:
    """Each position's mean of ``values`` over its group ``[B, T]`` (groups numbered per row,
    -1: no group, result 0)."""
    batch, length = values.shape
    flat = (groups + torch.arange(batch, device=groups.device).unsqueeze(1) * length).clamp_min(0).flatten()
    valid = (groups >= 0).flatten().to(values.dtype)
    sums = torch.zeros(batch * length, dtype=values.dtype, device=values.device)
    counts = torch.zeros_like(sums)
    sums.index_add_(0, flat, values.flatten() * valid)
    counts.index_add_(0, flat, valid)
    return ((sums / counts.clamp_min(1.0))[flat] * valid).view(batch, length)


class _RowProx(torch.autograd.Function):
    """A row-wise prox with the group-structured Jacobian of Proposition 3."""

    @staticmethod
    def forward(ctx, x: Tensor, mask: Tensor, lam: float, oscar: bool):
        out = x.detach().clone()
        groups = torch.full(x.shape, -1, dtype=torch.long, device=x.device)
        real = mask > 0
        if not oscar and compiled(x):  # every row at once: each row's real values packed to its front
            lengths = real.sum(1)
            front = torch.arange(x.shape[1], device=x.device) < lengths.unsqueeze(1)
            packed = torch.zeros(x.shape, dtype=torch.float64)
            packed[front] = x.detach()[real].double()
            y, g = tv_prox_rows(packed, lengths, lam)
            out[real] = y[front].to(x.dtype)
            groups[real] = g[front]
        else:
            solve = oscar_prox_row if oscar else tv_prox_row
            for row, values in enumerate(rows_of(x, mask)):
                y, g = solve(values, lam)
                out[row, real[row]] = torch.tensor(y, dtype=x.dtype, device=x.device)
                groups[row, real[row]] = torch.tensor(g, dtype=torch.long, device=x.device)
        signs = torch.sign(out) if oscar else torch.ones_like(out)
        ctx.save_for_backward(groups, signs)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        groups, signs = ctx.saved_tensors
        return signs * group_mean(signs * grad, groups), None, None, None


def tv_prox(x: Tensor, mask: Tensor, lam: float) -> Tensor:
    """``P_TV`` of every row's non-pad positions ``[B, T]``; padding passes through."""
    return _RowProx.apply(x, mask, lam, False)


def oscar_prox(x: Tensor, mask: Tensor, lam: float) -> Tensor:
    """``P_OSC`` of every row's non-pad positions ``[B, T]``; padding passes through."""
    return _RowProx.apply(x, mask, lam, True)
