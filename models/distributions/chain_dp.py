"""Sequential dynamic program over the subsets of a chain of tokens, in two semirings,
with an explicit backward pass.

The same distributions as :mod:`rationale_cli.models.distributions.subset_tree`,
``p(z) ~ exp(<u, z> + sum_i w_i z_{i-1} z_i)`` over masks whose count of ones is
accepted by ``ends`` (exactly k, or at most a budget), computed by the O(T K)
program of SIMPLE's Algorithm 1 (Ahmed et al., 2023) over states (count j, last
bit b) (``bits = 1``: no pairwise terms, the count alone), one token at a time, with
no autograd graph. This is the fast form on a CPU, where a step costs a few small
operations and the log-depth tree's O(T K^2) work does not pay; on a GPU the
tree's few large launches win.

The recurrence is written once over a semiring (pytorch-struct's device, Rush, 2020):

- ``LOG`` (log-sum-exp, product as +): forward ``alpha_i(j, b)`` and backward
  ``beta_i(j, b)`` tables give log Z, the marginals ``mu_i = P(z_i = 1)`` and the pair
  marginals ``P(z_{i-1} = 1, z_i = 1)`` in one vectorized pass. The backward pass of
  ``(log Z, mu)`` is exact: ``d <g, mu> / d u_i = Cov(z_i, <g, z>)`` and
  ``d <g, mu> / d w_i = Cov(z_{i-1} z_i, <g, z>)`` (the Hessian of log Z applied to g,
  section 3 of SIMPLE). ``E[phi <g, z>]`` comes from the expectation semiring: two
  more linear recurrences carry ``E[sum of g z over the prefix | state]`` and the same
  over the suffix, with transition probabilities read off the tables. Exact samples
  walk the forward table backwards (Algorithm 2).
- ``KMax(R)`` (the R best values, product as +): the R best masks by back-pointers,
  the k-best program of top-k sparsemax (Correia et al., 2020, section 4.1); ``Max``
  is its R = 1 case with plain maxima, the argmax and so the MAP oracle of SparseMAP
  with a coherence factor (appendix C).

Impossible states hold the finite ``NEG``; padding is a token that cannot be 1
(``u = NEG``) with no pairwise term to either side. Precision: log-weights grow to
about k times the largest utility, and T sequential roundings at that size add up;
in float32 the marginals stay within 1e-5 of exact for utilities of tens and within
about 1e-2 when |u| / tau reaches hundreds (the tree, with log2 T roundings, about
10x closer); float64 inputs are exact to 1e-10.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from rationale_cli.models.distributions.subset_tree import NEG
from rationale_cli.models.native import chain_tables
from rationale_cli.models.native.kbest import kmax_merge


class LogSemiring:
    """Sums of exponentials in log space; a value per state."""

    ranks = 0

    @staticmethod
    def lift(x: Tensor) -> Tensor:
        return x

    @staticmethod
    def plus(a: Tensor, b: Tensor, out: Tensor) -> None:
        torch.logaddexp(a, b, out=out)


class KMax:
    """The ``ranks`` best values per state (a trailing dimension), and for each the
    position among the two candidates' values it came from (the back-pointer)."""

    def __init__(self, ranks: int):
        self.ranks = ranks

    @staticmethod
    def lift(x: Tensor) -> Tensor:
        return x.unsqueeze(-1)

    def plus(self, a: Tensor, b: Tensor, out: Tensor) -> Tensor:
        pointer = kmax_merge(a, b, out)  # compiled: a merge of the two sorted lists
        if pointer is not None:
            return pointer
        values, pointer = torch.cat([a, b], -1).topk(self.ranks, -1)
        out.copy_(values)
        return pointer


class Max:
    """The best value per state, and whether it came from the second candidate (the
    back-pointer; ties go to the first). ``KMax(1)`` with plain maxima, for the argmax."""

    ranks = 0

    @staticmethod
    def lift(x: Tensor) -> Tensor:
        return x

    @staticmethod
    def plus(a: Tensor, b: Tensor, out: Tensor) -> Tensor:
        second = b > a
        torch.maximum(a, b, out=out)
        return second


LOG = LogSemiring()


def accepted_counts(k: Tensor, max_k: int, at_most: bool) -> Tensor:
    """``ends [K+1, B]``: whether a mask of each count is in the support of each row."""
    counts = torch.arange(max_k + 1, device=k.device).unsqueeze(1)
    return counts <= k if at_most else counts == k


def forward_table(u: Tensor, w: Tensor | None, max_k: int, semiring=LOG) -> tuple[Tensor, list]:
    """``alpha [T+1, K+2, A, B(, R)]``: the semiring value of the first i tokens with count j
    (row j+1; row 0 is an impossible guard) and last bit b, and the back-pointers of each
    step (none in ``LOG``). ``u [T, B]``, ``w [T, B]`` (w_i couples tokens i-1 and i).
    Count-major, so every shifted slice is a contiguous block."""
    length, batch = u.shape
    bits = 1 if w is None else 2
    alpha = u.new_full((length + 1, max_k + 2, bits, batch, *([semiring.ranks] if semiring.ranks else [])), NEG)
    alpha[0, 1, 0].view(batch, -1)[:, 0] = 0.0  # the empty prefix (its best value only)
    # views made once (the loops then index tuples): counts j and j-1 of bits 0 and 1
    if isinstance(semiring, LogSemiring) and chain_tables.forward_log(u, None if w is None else w + u, alpha):
        return alpha, []
    same, less, us = alpha[:, 1:].unbind(0), alpha[:, :-1].unbind(0), semiring.lift(u).unbind(0)
    linked = None if w is None else semiring.lift(w + u).unbind(0)
    pointers = []
    for i in range(length):
        if w is None:
            pointers.append(semiring.plus(same[i][:, 0], less[i][:, 0] + us[i], out=same[i + 1][:, 0]))
        else:
            off = semiring.plus(same[i][:, 0], same[i][:, 1], out=same[i + 1][:, 0])
            on = semiring.plus(less[i][:, 0] + us[i], less[i][:, 1] + linked[i], out=same[i + 1][:, 1])
            pointers.append((off, on))
    return alpha, pointers


def best_masks(alpha: Tensor, pointers: list, ends: Tensor, count: int) -> tuple[Tensor, Tensor]:
    """``(masks [B, count, T], scores [B, count])``: the ``count`` best accepted masks of a
    ``KMax`` table, best first, followed back through the pointers (``NEG`` scores for
    missing ones, whose masks are meaningless)."""
    last = alpha[-1, 1:].masked_fill(~ends[:, None, :, None], NEG)  # [K+1, A, B, R]
    states, bits, batch, ranks = last.shape
    scores, flat = last.permute(2, 0, 1, 3).reshape(batch, -1).topk(min(count, states * bits * ranks), -1)
    # the walk: T steps of a few operations on B x count numbers, in numpy (a tenth of torch's cost each)
    flat = flat.numpy(force=True)
    j, b, r = flat // (bits * ranks), flat // ranks % bits, flat % ranks
    rows = np.arange(batch)[:, None]
    took = []
    for step in reversed(pointers):
        if bits == 1:
            pointer = step.numpy(force=True)[j, rows, r]
            take = pointer >= ranks  # the second candidate: token i came in
        else:
            pointer = np.where(b > 0, step[1].numpy(force=True)[j, rows, r], step[0].numpy(force=True)[j, rows, r])
            take = b > 0
            b = pointer // ranks  # the bit of the token before
        took.append(take)
        r = pointer % ranks
        j = np.maximum(j - take, 0)  # impossible paths stay in range
    masks = (torch.from_numpy(np.stack(took[::-1], -1)).to(alpha.device, alpha.dtype) if took
             else alpha.new_zeros(batch, flat.shape[1], 0))
    if flat.shape[1] < count:  # fewer masks than asked for at all: fill with impossible ones
        masks = torch.cat([masks, masks.new_zeros(batch, count - flat.shape[1], masks.shape[-1])], 1)
        scores = torch.cat([scores, scores.new_full((batch, count - flat.shape[1]), NEG)], 1)
    return masks, scores


def best_mask(alpha: Tensor, pointers: list, ends: Tensor) -> Tensor:
    """The best accepted mask ``[B, T]`` of a ``Max`` table, followed back through the
    pointers (ties to the first-found state). The walk is T steps of a few operations on
    B numbers each, so it runs in numpy, where such an operation costs a tenth of torch's."""
    last = alpha[-1, 1:].masked_fill(~ends[:, None, :], NEG)  # [K+1, A, B]
    counts, bits, batch = last.shape
    state = last.permute(2, 0, 1).reshape(batch, -1).argmax(-1).cpu().numpy()
    j, b = state // bits, state % bits
    # each step's pointers as one flat [A * (K+1) * B] row, read at (bit, count, row)
    steps = torch.stack([torch.stack(step if bits == 2 else (step,)) for step in pointers]).flatten(1)
    steps = steps.cpu().numpy() if len(pointers) else np.zeros((0, 0), dtype=bool)
    column = np.arange(batch)
    took = np.zeros((len(pointers), batch), dtype=bool)
    for i in reversed(range(len(pointers))):
        pointer = steps[i, (b * counts + j) * batch + column]  # bits 2: the bit of the token before
        took[i] = b > 0 if bits == 2 else pointer
        b = pointer.astype(np.int64) if bits == 2 else b
        j = np.maximum(j - took[i], 0)  # impossible paths stay in range
    return torch.from_numpy(took.T.copy()).to(device=alpha.device, dtype=alpha.dtype)


def backward_table(u: Tensor, w: Tensor | None, ends: Tensor, max_k: int) -> Tensor:
    """``beta [T+1, K+2, A, B]``: log-weight of tokens i.. completing a prefix of count j
    (row j; row K+1 is an impossible guard) and last bit b to an accepted count."""
    length, batch = u.shape
    bits = 1 if w is None else 2
    beta = u.new_full((length + 1, max_k + 2, bits, batch), NEG)
    beta[length, :-1] = torch.where(ends, 0.0, NEG).unsqueeze(1)
    if chain_tables.backward_log(u, w, beta):
        return beta
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


def log_partition(alpha: Tensor, ends: Tensor) -> Tensor:
    return torch.logsumexp(alpha[-1, 1:].masked_fill(~ends.unsqueeze(1), NEG), (0, 1))


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
        came_on = probability(alpha[:-1, :-1, 0] + u.unsqueeze(1) - alpha[1:, 1:, 0])
        if chain_tables.prefix(came_on, None, g, ra):
            return ra
        came_on = came_on.unbind(0)
        same, less, gs = ra[:, 1:, 0].unbind(0), ra[:, :-1, 0].unbind(0), g.unbind(0)
        for i in range(length):
            torch.addcmul(same[i], came_on[i], less[i] + gs[i] - same[i], out=same[i + 1])
        return ra
    # bit 0 after token i: from bit 0 or 1 at the same count; bit 1: from either at count j-1
    from_zero_off = probability(alpha[:-1, 1:, 0] - alpha[1:, 1:, 0])
    from_zero_on = probability(alpha[:-1, :-1, 0] + u.unsqueeze(1) - alpha[1:, 1:, 1])
    if chain_tables.prefix(from_zero_off, from_zero_on, g, ra):
        return ra
    from_zero_off, from_zero_on = from_zero_off.unbind(0), from_zero_on.unbind(0)
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
    goes_on = probability(beta[1:, 1:, -1:] + (u.unsqueeze(1) + links(u, w)).unsqueeze(1) - beta[:-1, :-1])
    if chain_tables.suffix(goes_on, g, rb):
        return rb
    goes_on = goes_on.unbind(0)
    off, on, out, gs = rb[:, :-1, :1].unbind(0), rb[:, 1:, -1:].unbind(0), rb[:, :-1].unbind(0), g.unbind(0)
    for i in range(length - 1, -1, -1):
        torch.addcmul(off[i + 1], goes_on[i], on[i + 1] + gs[i] - off[i + 1], out=out[i])
    return rb


def last_state(alpha: Tensor, ends: Tensor, draw: Tensor) -> tuple[Tensor, Tensor]:
    """The count and last bit ``[B]`` of a sample, drawn by inverting the distribution of the
    accepted final states with uniform ``draw [B]``."""
    last = alpha[-1, 1:].masked_fill(~ends.unsqueeze(1), NEG).flatten(0, 1)  # [(K+1) A, B]
    cdf = torch.softmax(last, 0).cumsum(0)
    state = (cdf <= draw).sum(0).clamp(max=last.shape[0] - 1)
    bits = alpha.shape[2]
    return state // bits, state % bits


def walk_back(alpha: Tensor, u: Tensor, w: Tensor | None, ends: Tensor, draws: Tensor) -> Tensor:
    """Exact samples ``[T, B]`` (Algorithm 2, with pairwise terms), ``draws`` uniform
    ``[T+1, B]``: the final state from the last draw, then backwards, without pairwise
    terms token i is taken with probability ``P(z_i = 1 | j ones among the first i + 1)``;
    with them the bit of token i - 1 given that of token i (which is z_i) and the count."""
    j, b = last_state(alpha, ends, draws[-1])
    takes = []
    if w is None:
        came_on = probability(alpha[:-1, :-1, 0] + u.unsqueeze(1) - alpha[1:, 1:, 0]).unbind(0)  # [K+1, B] each
        j = j.unsqueeze(0)
        for i in range(u.shape[0] - 1, -1, -1):
            take = draws[i] < came_on[i].gather(0, j)
            takes.append(take)
            j = j - take.long()
        return torch.cat(takes[::-1]).to(u.dtype) if takes else torch.zeros_like(u)
    # T steps of a few operations on B numbers: in numpy, at a tenth of torch's cost each
    table, weights, uniform = alpha.numpy(force=True), w.numpy(force=True), draws.numpy(force=True)
    j, b = j.numpy(force=True), b.numpy(force=True)
    rows = np.arange(u.shape[1])
    for i in range(u.shape[0] - 1, -1, -1):
        takes.append(b)
        j = np.maximum(j - b, 0)
        before = table[i, j + 1, :, rows]  # [B, 2]: the prefix's weight by the bit of token i - 1
        odds = before[:, 1] + b * weights[i] - before[:, 0]
        b = (uniform[i] < 0.5 + 0.5 * np.tanh(odds / 2)).astype(np.int64)  # its sigmoid, without overflow
    return torch.from_numpy(np.stack(takes[::-1])).to(u.device, u.dtype)


class ChainMarginals(torch.autograd.Function):
    """``(log Z [B], mu [B, T], z)`` from ``u [B, T]``, ``w [B, T]`` or None and the accepted
    counts ``ends [K+1, B]``, with ``z [B, T]`` an exact sample when uniform ``draws [B, T+1]``
    are given and empty otherwise; the backward pass returns exact gradients for u and w."""

    @staticmethod
    def forward(ctx, u: Tensor, w: Tensor | None, ends: Tensor, max_k: int, draws: Tensor | None = None):
        ut = u.detach().t().contiguous()
        wt = None if w is None else w.detach().t().contiguous()
        # utilities must stay far from the impossible-state sentinel NEG (padding holds NEG itself)
        if not bool(((ut.abs() < -NEG / 1e3) | (ut == NEG)).all()):
            raise FloatingPointError("k-subset utilities out of range (NaN, infinite or beyond 1e6)")
        alpha, beta = forward_table(ut, wt, max_k)[0], backward_table(ut, wt, ends, max_k)
        log_z = log_partition(alpha, ends)
        q = on_terms(alpha, beta, ut, wt, log_z)
        z = u.new_zeros(0) if draws is None else walk_back(alpha, ut, wt, ends, draws.t()).t()
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


def chain_marginals(u: Tensor, w: Tensor | None, ends: Tensor, max_k: int,
                    draws: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(log Z [B], mu [B, T], z)``: :class:`ChainMarginals` as a function."""
    return ChainMarginals.apply(u, w, ends, max_k, draws)
