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
- MAP oracle for the budget (appendix C): the top-B positive scores, O(n log n).
- Backward pass: implicit differentiation of eq. 13,
  ``d L / d t = [A 0] K^{-1} [g; 0]`` for ``g = d L / d xi`` on the support
  (eq. 17 written with the KKT matrix K, which stays invertible when the empty mask
  is in the support).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def budget_oracle(scores: np.ndarray, budget: int) -> np.ndarray:
    """``argmax_{|z| <= B} <z, scores>``: the top-B entries that are positive."""
    z = np.zeros_like(scores)
    top = np.argsort(-scores, kind="stable")[:budget]
    z[top[scores[top] > 0]] = 1.0
    return z


def kkt_matrix(active: np.ndarray) -> np.ndarray:
    """``[[A'A, 1], [1', 0]]`` for the support's masks as columns of ``active [n, s]``."""
    s = active.shape[1]
    kkt = np.zeros((s + 1, s + 1))
    kkt[:s, :s] = active.T @ active
    kkt[:s, s] = kkt[s, :s] = 1.0
    return kkt


def solve_sparsemap(t: np.ndarray, budget: int, max_iter: int = 500, tol: float = 1e-10):
    """Masks ``[n, s]`` (columns) and weights ``[s]`` of a SparseMAP solution."""
    columns = [budget_oracle(t, budget)]
    xi = np.ones(1)
    for _ in range(max_iter):
        active = np.stack(columns, 1)
        solution = np.linalg.solve(kkt_matrix(active), np.concatenate([active.T @ t, [1.0]]))
        target, tau = solution[:-1], solution[-1]
        falling = target < xi - tol
        if (target < -tol).any():  # infeasible: step towards it until a weight hits zero, drop that mask
            ratios = np.where(falling, xi / np.where(falling, xi - target, 1.0), np.inf)
            drop = int(np.argmin(ratios))
            xi = xi + ratios[drop] * (target - xi)
            keep = np.arange(len(columns)) != drop
            columns = [c for c, k in zip(columns, keep) if k]
            xi = np.clip(xi[keep], 0.0, None)
            continue
        xi = np.clip(target, 0.0, None)
        residual = t - active @ xi
        z = budget_oracle(residual, budget)
        if tau - z @ residual >= -tol or any(np.array_equal(z, c) for c in columns):
            break
        columns.append(z)
        xi = np.append(xi, 0.0)
    return np.stack(columns, 1), xi / xi.sum()


class SparseMAPWeights(torch.autograd.Function):
    """Weights ``[B, S]`` of each document's support masks ``[B, S, T]`` (zero weight
    and empty masks past a document's support) from scores ``t [B, T]``."""

    @staticmethod
    def forward(ctx, scores: Tensor, mask: Tensor, budgets: Tensor):
        supports = []
        for row, (t, keep, budget) in enumerate(zip(scores.detach().double().cpu(), mask.cpu() > 0, budgets.tolist())):
            active, xi = solve_sparsemap(t[keep].numpy(), int(budget))
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
        ctx.sizes = [len(xi) for _, _, xi in supports]
        return weights, masks

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_weights: Tensor, _grad_masks: Tensor):
        (masks,) = ctx.saved_tensors
        grad = torch.zeros(masks.shape[0], masks.shape[2], dtype=torch.float64)
        for row, support in enumerate(ctx.sizes):
            active = masks[row, :support].double().cpu().numpy().T  # [T, s]
            g = grad_weights[row, :support].double().cpu().numpy()
            x = np.linalg.solve(kkt_matrix(active), np.concatenate([g, [0.0]]))[:-1]
            grad[row] = torch.from_numpy(active @ x)
        return grad.to(device=masks.device, dtype=grad_weights.dtype), None, None


def sparsemap(scores: Tensor, mask: Tensor, budgets: Tensor) -> tuple[Tensor, Tensor]:
    """``(weights [B, S], masks [B, S, T])``: SparseMAP with at most ``budgets [B]`` ones per mask."""
    return SparseMAPWeights.apply(scores, mask, budgets)
