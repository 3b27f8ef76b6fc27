"""SparseMAP over rationale masks with a budget (Correia et al., 2020, section 4.2,
appendices B-C; Niculae et al., 2018).

Masks z in {0, 1}^n with at most B ones; a_z = z. SparseMAP picks a sparse
distribution xi over masks, ``argmin_{xi in simplex} 1/2 ||A xi - t||^2``: its
marginals ``mu = A xi`` are the Euclidean projection of the scores t onto the
budget polytope ``{0 <= mu <= 1, sum mu <= B}``, and xi has at most n + 1 masks.

- The active set algorithm of appendix B (Algorithm 1), one document at a time in
  float64: solve the KKT system (eq. 13) on the current support, take a partial
  step and drop a mask when that solution is infeasible (eqs. 14-15), otherwise
  add the mask the MAP oracle finds most violated (eq. 16) until none is.
- MAP oracle for the budget (appendix C): the top-B positive scores, O(n log n), the
  closed form of the chain program's max reduction (:mod:`models.distributions.chain_ksubset`).
- Optional coherence factor: pair scores ``w_i`` reward adjacent selected tokens,
  ``s(z) = <t, z> + sum_i w_i z_i z_{i+1}``. Each mask's vector then holds its pair
  indicators too, ``a_z = (z, z_i z_{i+1})``, against ``(t, w)`` (SparseMAP over the
  chain's factor graph, with the quadratic term on both kinds of marginals, which
  keeps the problem strictly convex in them); the oracle becomes the same program's
  max-plus reduction over (count, last bit) with at most B ones.
- Backward pass: implicit differentiation of eq. 13,
  ``d L / d t = [A 0] K^{-1} [g; 0]`` for ``g = d L / d xi`` on the support
  (eq. 17 written with the KKT matrix K, which stays invertible when the empty mask
  is in the support).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from models.distributions.chain_ksubset import ChainKSubset


def budget_oracle(scores: np.ndarray, budget: int, pair: np.ndarray | None = None) -> np.ndarray:
    """``argmax_{|z| <= B} <z, scores> + sum_i pair_i z_i z_{i+1}``: the max reduction of the
    chain program (:class:`ChainKSubset` with ``at_most``). Without pair scores its closed
    form, the top-B entries that are positive, in numpy: the active set calls it once per
    iteration on one document, where a torch call costs ten times more."""
    if pair is None:
        z = np.zeros_like(scores)
        top = np.argsort(-scores, kind="stable")[:budget]
        z[top[scores[top] > 0]] = 1.0
        return z
    t = torch.from_numpy(scores).unsqueeze(0)
    w = torch.from_numpy(pair).unsqueeze(0)
    return ChainKSubset(t, torch.ones_like(t), budget, w, at_most=True, method="sequential").argmax[0].numpy()


def bordered(gram: np.ndarray) -> np.ndarray:
    """The KKT matrix ``[[G, 1], [1', 0]]`` of eq. 13 around a Gram matrix ``G [s, s]``."""
    s = len(gram)
    kkt = np.ones((s + 1, s + 1))
    kkt[:s, :s] = gram
    kkt[s, s] = 0.0
    return kkt


def solve_sparsemap(t: np.ndarray, budget: int, pair: np.ndarray | None = None, max_iter: int = 500,
                    tol: float = 1e-10):
    """Masks ``[n, s]`` (columns) and weights ``[s]`` of a SparseMAP solution; ``pair [n-1]``
    are the coherence scores, if any. The support's Gram matrix grows and shrinks with it
    (one new row per added mask), so an iteration costs one small solve."""
    n = len(t)
    if pair is not None:  # a_z = (z, pair indicators) against (t, w)
        t = np.concatenate([t, pair])

    def oracle(residual: np.ndarray) -> np.ndarray:
        if pair is None:
            return budget_oracle(residual, budget)
        z = budget_oracle(residual[:n], budget, residual[n:])
        return np.concatenate([z, z[:-1] * z[1:]])

    first = oracle(t)
    active = first[:, None]  # the support's masks as columns
    seen = {first.tobytes()}
    gram = np.array([[first @ first]])
    xi = np.ones(1)
    for _ in range(max_iter):
        solution = np.linalg.solve(bordered(gram), np.concatenate([active.T @ t, [1.0]]))
        target, tau = solution[:-1], solution[-1]
        falling = target < xi - tol
        if (target < -tol).any():  # infeasible: step towards it until a weight hits zero, drop that mask
            ratios = np.where(falling, xi / np.where(falling, xi - target, 1.0), np.inf)
            drop = int(np.argmin(ratios))
            xi = np.clip(np.delete(xi + ratios[drop] * (target - xi), drop), 0.0, None)
            seen.discard(active[:, drop].tobytes())
            active = np.delete(active, drop, 1)
            gram = np.delete(np.delete(gram, drop, 0), drop, 1)
            continue
        xi = np.clip(target, 0.0, None)
        residual = t - active @ xi
        z = oracle(residual)
        if tau - z @ residual >= -tol or z.tobytes() in seen:
            break
        seen.add(z.tobytes())
        grown = np.empty((len(xi) + 1, len(xi) + 1))
        grown[:-1, :-1] = gram
        grown[:-1, -1] = grown[-1, :-1] = active.T @ z
        grown[-1, -1] = z @ z
        gram = grown
        active = np.concatenate([active, z[:, None]], 1)
        xi = np.append(xi, 0.0)
    return active[:n], xi / xi.sum()


class SparseMAPWeights(torch.autograd.Function):
    """Weights ``[B, S]`` of each document's support masks ``[B, S, T]`` (zero weight
    and empty masks past a document's support) from scores ``t [B, T]`` and, for the
    coherence factor, pair scores ``w [B, T-1]`` (``w_i`` for tokens i, i+1)."""

    @staticmethod
    def forward(ctx, scores: Tensor, pair: Tensor | None, mask: Tensor, budgets: Tensor):
        supports = []
        pairs = [None] * len(scores) if pair is None else pair.detach().double().cpu()
        for t, w, keep, budget in zip(scores.detach().double().cpu(), pairs, mask.cpu() > 0, budgets.tolist()):
            n = int(keep.sum())
            active, xi = solve_sparsemap(t[keep].numpy(), int(budget), None if w is None else w[: n - 1].numpy())
            supports.append((keep, active, xi))
        size = max(len(xi) for _, _, xi in supports)
        masks = scores.new_zeros(scores.shape[0], size, scores.shape[1])
        weights = scores.new_zeros(scores.shape[0], size)
        for row, (keep, active, xi) in enumerate(supports):
            masks[row, : len(xi)][:, keep.to(masks.device)] = torch.as_tensor(active.T, dtype=scores.dtype,
                                                                              device=scores.device)
            weights[row, : len(xi)] = torch.as_tensor(xi, dtype=scores.dtype, device=scores.device)
        ctx.mark_non_differentiable(masks)
        ctx.save_for_backward(masks)
        ctx.sizes, ctx.pairwise = [len(xi) for _, _, xi in supports], pair is not None
        return weights, masks

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_weights: Tensor, _grad_masks: Tensor):
        """Eq. 17 for every document at once, in float64: ``[x; .] = K^-1 [g; 0]`` with the
        support's bordered Gram matrix K; slots past a support get an identity row and
        ``g = 0``, so their x is 0."""
        (masks,) = ctx.saved_tensors
        active = masks.double()  # [B, S, T]
        pairs = active[..., :-1] * active[..., 1:]
        vectors = torch.cat([active, pairs], -1) if ctx.pairwise else active
        used = torch.arange(masks.shape[1], device=masks.device) < torch.tensor(ctx.sizes, device=masks.device)[:, None]
        batch, slots = used.shape
        kkt = active.new_zeros(batch, slots + 1, slots + 1)
        gram = vectors @ vectors.transpose(1, 2)
        both = used[:, :, None] & used[:, None, :]
        kkt[:, :slots, :slots] = torch.where(both, gram, torch.diag_embed(~used).double())
        kkt[:, :slots, slots] = kkt[:, slots, :slots] = used.double()
        g = torch.cat([grad_weights.double() * used, active.new_zeros(batch, 1)], -1)
        x = torch.linalg.solve(kkt, g)[:, :slots].unsqueeze(-1)  # [B, S, 1]
        like = dict(device=masks.device, dtype=grad_weights.dtype)
        grad = (active * x).sum(1).to(**like)
        return grad, (pairs * x).sum(1).to(**like) if ctx.pairwise else None, None, None


def sparsemap(scores: Tensor, mask: Tensor, budgets: Tensor, pair: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``(weights [B, S], masks [B, S, T])``: SparseMAP with at most ``budgets [B]`` ones per
    mask, and the coherence factor when pair scores ``[B, T-1]`` are given."""
    return SparseMAPWeights.apply(scores, pair, mask, budgets)
