"""Sequential forward-backward over k-subsets of a chain, with an explicit backward pass.

The same distributions as :mod:`models.distributions.subset_tree`,
``p(z) ~ exp(<u, z> + sum_i w_i z_{i-1} z_i)`` over ``sum z = k``, computed by the
O(T K) dynamic program of SIMPLE's Algorithm 1 (Ahmed et al., 2023) over states
(count j, last bit b) (``bits = 1``: no pairwise terms, the count alone), one
token at a time, with no autograd graph. This is the fast form on a CPU, where a
step costs a few small operations and the log-depth tree's O(T K^2) work does not
pay; on a GPU the tree's few large launches win.

- forward ``alpha_i(j, b)`` and backward ``beta_i(j, b)`` tables in log space give
  log Z, the marginals ``mu_i = P(z_i = 1)`` and the pair marginals
  ``P(z_{i-1} = 1, z_i = 1)`` in one vectorized pass;
- the backward pass of ``(log Z, mu)`` is exact: ``d <g, mu> / d u_i = Cov(z_i, <g, z>)``
  and ``d <g, mu> / d w_i = Cov(z_{i-1} z_i, <g, z>)`` (the Hessian of log Z applied
  to g, section 3 of SIMPLE). ``E[phi <g, z>]`` comes from the expectation semiring:
  two more linear recurrences carry ``E[sum of g z over the prefix | state]`` and the
  same over the suffix, with transition probabilities read off the tables;
- exact samples walk the forward table backwards (Algorithm 2).

Impossible states hold the finite ``NEG``; padding is a token that cannot be 1
(``u = NEG``) with no pairwise term to either side. Precision: log-weights grow to
about k times the largest utility, and T sequential roundings at that size add up;
in float32 the marginals stay within 1e-5 of exact for utilities of tens and within
about 1e-2 when |u| / tau reaches hundreds (the tree, with log2 T roundings, about
10x closer); float64 inputs are exact to 1e-10.
"""

from __future__ import annotations

import torch
from torch import Tensor

from models.distributions.subset_tree import NEG


def forward_table(u: Tensor, w: Tensor | None, max_k: int) -> Tensor:
    """``alpha [T+1, K+2, A, B]``: log-weight of the first i tokens with count j (row j+1;
    row 0 is an impossible guard) and last bit b. ``u [T, B]``, ``w [T, B]`` (w_i couples
    tokens i-1 and i). Count-major, so every shifted slice is a contiguous block."""
    length, batch = u.shape
    bits = 1 if w is None else 2
    alpha = u.new_full((length + 1, max_k + 2, bits, batch), NEG)
    alpha[0, 1, 0] = 0.0
    # views made once (the loops then index tuples): counts j and j-1 of bits 0 and 1
    same, less, us = alpha[:, 1:].unbind(0), alpha[:, :-1].unbind(0), u.unbind(0)
    for i in range(length):
        if w is None:
            torch.logaddexp(same[i][:, 0], less[i][:, 0] + us[i], out=same[i + 1][:, 0])
        else:
            torch.logaddexp(same[i][:, 0], same[i][:, 1], out=same[i + 1][:, 0])
            torch.add(torch.logaddexp(less[i][:, 0], less[i][:, 1] + w[i]), us[i], out=same[i + 1][:, 1])
    return alpha


def backward_table(u: Tensor, w: Tensor | None, k: Tensor, max_k: int) -> Tensor:
    """``beta [T+1, K+2, A, B]``: log-weight of tokens i.. completing a prefix of count j
    (row j; row K+1 is an impossible guard) and last bit b to exactly k ones."""
    length, batch = u.shape
    bits = 1 if w is None else 2
    beta = u.new_full((length + 1, max_k + 2, bits, batch), NEG)
    beta[length, k, :, torch.arange(batch, device=u.device)] = 0.0
    same, more, us = beta[:, :-1].unbind(0), beta[:, 1:].unbind(0), u.unbind(0)
    for i in range(length - 1, -1, -1):
        on = more[i + 1][:, bits - 1] + us[i]
        torch.logaddexp(same[i + 1][:, 0], on, out=same[i][:, 0])
        if w is not None:
            torch.logaddexp(same[i + 1][:, 0], on + w[i], out=same[i][:, 1])
    return beta


def links(u: Tensor, w: Tensor | None) -> Tensor:
    """``b w_i`` for the bit b of token i-1: ``[T, A, B]``."""
    return torch.zeros_like(u).unsqueeze(1) if w is None else torch.stack([torch.zeros_like(w), w], 1)


def log_partition(alpha: Tensor, k: Tensor) -> Tensor:
    rows = torch.arange(alpha.shape[-1], device=alpha.device)
    return torch.logsumexp(alpha[-1, k + 1, :, rows], -1)


def on_terms(alpha: Tensor, beta: Tensor, u: Tensor, w: Tensor | None, log_z: Tensor) -> Tensor:
    """``q_i(j, b) = P(count before token i = j, bit of token i-1 = b, z_i = 1)`` ``[T, K+1, A, B]``."""
    score = alpha[:-1, 1:] + (u.unsqueeze(1) + links(u, w)).unsqueeze(1) + beta[1:, 1:, -1:]
    return torch.exp(score - log_z)


def probability(log_p: Tensor) -> Tensor:
    """``exp(log_p)`` of a transition probability, clamped to 1: in impossible states
    (values near ``NEG``) float rounding can exceed 1, and the recurrences must stay
    convex combinations to stay finite (those states get zero weight in the end)."""
    return torch.exp(log_p).clamp_(max=1.0)


def prefix_expectations(alpha: Tensor, u: Tensor, w: Tensor | None, g: Tensor) -> Tensor:
    """``ra_i(j, b) = E[sum_{l < i} g_l z_l | state (j, b) after i tokens]`` ``[T+1, K+2, A, B]``."""
    length = u.shape[0]
    ra = torch.zeros_like(alpha)
    if w is None:  # P(z_i = 1 | count j after token i)
        came_on = probability(alpha[:-1, :-1, 0] + u.unsqueeze(1) - alpha[1:, 1:, 0]).unbind(0)
        same, less, gs = ra[:, 1:, 0].unbind(0), ra[:, :-1, 0].unbind(0), g.unbind(0)
        for i in range(length):
            torch.addcmul(same[i], came_on[i], less[i] + gs[i] - same[i], out=same[i + 1])
        return ra
    # bit 0 after token i: from bit 0 or 1 at the same count; bit 1: from either at count j-1
    from_zero_off = probability(alpha[:-1, 1:, 0] - alpha[1:, 1:, 0]).unbind(0)
    from_zero_on = probability(alpha[:-1, :-1, 0] + u.unsqueeze(1) - alpha[1:, 1:, 1]).unbind(0)
    rows, gs = ra.unbind(0), g.unbind(0)
    for i in range(length):
        old, new = rows[i], rows[i + 1]
        gap = old[:, 0] - old[:, 1]
        torch.addcmul(old[1:, 1], from_zero_off[i], gap[1:], out=new[1:, 0])
        torch.addcmul(old[:-1, 1] + gs[i], from_zero_on[i], gap[:-1], out=new[1:, 1])
    return ra


def suffix_expectations(beta: Tensor, u: Tensor, w: Tensor | None, g: Tensor) -> Tensor:
    """``rb_i(j, b) = E[sum_{l >= i} g_l z_l | prefix state (j, b) before token i]`` ``[T+1, K+2, A, B]``."""
    length = u.shape[0]
    rb = torch.zeros_like(beta)
    goes_on = probability(beta[1:, 1:, -1:] + (u.unsqueeze(1) + links(u, w)).unsqueeze(1) - beta[:-1, :-1]).unbind(0)
    off, on, out, gs = rb[:, :-1, :1].unbind(0), rb[:, 1:, -1:].unbind(0), rb[:, :-1].unbind(0), g.unbind(0)
    for i in range(length - 1, -1, -1):
        torch.addcmul(off[i + 1], goes_on[i], on[i + 1] + gs[i] - off[i + 1], out=out[i])
    return rb


def walk_back(alpha: Tensor, u: Tensor, k: Tensor, draws: Tensor) -> Tensor:
    """Exact samples ``[T, B]`` of the k-subset distribution without pairwise terms
    (Algorithm 2): from count k backwards, token i is taken with probability
    ``P(z_i = 1 | j ones among the first i + 1 tokens)``, ``draws`` uniform ``[T, B]``."""
    came_on = probability(alpha[:-1, :-1, 0] + u.unsqueeze(1) - alpha[1:, 1:, 0]).unbind(0)  # [K+1, B] each
    takes = []
    j = k.clone().unsqueeze(0)
    for i in range(u.shape[0] - 1, -1, -1):
        take = draws[i] < came_on[i].gather(0, j)
        takes.append(take)
        j = j - take.long()
    return torch.cat(takes[::-1]).to(u.dtype) if takes else torch.zeros_like(u)


class ChainMarginals(torch.autograd.Function):
    """``(log Z [B], mu [B, T], z)`` from ``u [B, T]``, ``w [B, T]`` or None, ``k [B]``,
    with ``z [B, T]`` an exact sample when uniform ``draws [B, T]`` are given (no pairwise
    terms) and empty otherwise; the backward pass returns exact gradients for u and w."""

    @staticmethod
    def forward(ctx, u: Tensor, w: Tensor | None, k: Tensor, max_k: int, draws: Tensor | None = None):
        ut = u.detach().t().contiguous()
        wt = None if w is None else w.detach().t().contiguous()
        # utilities must stay far from the impossible-state sentinel NEG (padding holds NEG itself)
        if not bool(((ut.abs() < -NEG / 1e3) | (ut == NEG)).all()):
            raise FloatingPointError("k-subset utilities out of range (NaN, infinite or beyond 1e6)")
        alpha, beta = forward_table(ut, wt, max_k), backward_table(ut, wt, k, max_k)
        log_z = log_partition(alpha, k)
        q = on_terms(alpha, beta, ut, wt, log_z)
        z = u.new_zeros(0) if draws is None else walk_back(alpha, ut, k, draws.t()).t()
        ctx.mark_non_differentiable(z)
        ctx.save_for_backward(ut, alpha, beta, q)
        ctx.wt = wt
        return log_z, q.sum((1, 2)).t(), z

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_z: Tensor, grad_mu: Tensor, _grad_sample: Tensor):
        ut, alpha, beta, q = ctx.saved_tensors
        wt = ctx.wt
        g = grad_mu.t().contiguous()
        mu = q.sum((1, 2))
        mean = (g * mu).sum(0)  # E[<g, z>] per row
        ra = prefix_expectations(alpha, ut, wt, g)
        rb = suffix_expectations(beta, ut, wt, g)
        inside = q * (ra[:-1, 1:] + g[:, None, None] + rb[1:, 1:, -1:])  # E[z_i <g, z>; state]
        grad_u = inside.sum((1, 2)) - mu * mean + grad_z * mu
        grad_w = None
        if wt is not None:
            pair = q[:, :, 1].sum(1)
            grad_w = (inside[:, :, 1].sum(1) - pair * mean + grad_z * pair).t()
        return grad_u.t(), grad_w, None, None, None
