"""SparseMAP over rationale masks with a budget (Correia et al., 2020, section 4.2,
appendices B-C; Niculae et al., 2018).

Masks z in {0, 1}^n with at most B ones; a_z = z. SparseMAP picks a sparse
distribution xi over masks, ``argmin_{xi in simplex} 1/2 ||A xi - t||^2``: its
marginals ``mu = A xi`` are the Euclidean projection of the scores t onto the
budget polytope ``{0 <= mu <= 1, sum mu <= B}``, and xi has at most n + 1 masks.

- The active set algorithm of appendix B (Algorithm 1) in float64, for a whole batch
  in lockstep: solve the KKT system (eq. 13) on the current support, take a partial
  step and drop a mask when that solution is infeasible (eqs. 14-15), otherwise
  add the mask the MAP oracle finds most violated (eq. 16) until none is. The KKT
  inverses follow each change of a support by a rank-2 update (:class:`Supports`).
- MAP oracle for the budget (appendix C): the top-B positive scores, O(n log n), the
  closed form of the chain program's max reduction (:mod:`rationale_cli.models.distributions.chain_ksubset`).
- Without the coherence factor the marginals have a closed form, the projection
  ``clip(t - tau, 0, 1)``, and Algorithm 1 starts from it written as a few masks, the
  MAP mask first (:func:`greedy_masks`): the start is already optimal, so one KKT solve
  and one oracle call confirm it, instead of one iteration per mask of the support. It
  is one of the sparse distributions with those marginals (they are not unique); on
  trained beer batches it has as many masks as the oracle start's and the same most
  probable mask for 97-100% of the reviews.
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

import torch
import torch.nn.functional as F
from torch import Tensor

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset
from rationale_cli.models.native import greedy_masks as native_greedy


class Supports:
    """The supports of a batch during Algorithm 1: each document's masks as vectors
    ``a_z`` in slots ``[B, S, D]`` (``used`` marks the live ones, ``age`` their order of
    arrival), their weights ``[B, S]``, and the bordered KKT matrix of eq. 13,
    ``K = [[0, 1'], [1, G]]`` ``[B, S+1, S+1]`` (a free slot holds an identity row, so its
    solution is 0) with its inverse. A mask that comes or goes replaces one row and
    column of K, a rank-2 change, so the inverse follows by the Woodbury identity in
    O(S^2) instead of a new O(S^3) solve. One step of iterative refinement keeps the
    solutions exact to rounding; a row whose correction exceeds ``DRIFT`` (relative)
    is inverted afresh, and so is every row every ``REFRESH`` changes. Slots grow in
    blocks; a dropped mask frees its slot for the next one."""

    BLOCK = 8
    REFRESH = 32
    DRIFT = 1e-8

    def __init__(self, start: Tensor, weights: Tensor, target: Tensor):
        """The starting supports: vectors ``start [B, S, D]`` with ``weights [B, S]`` (a slot
        of weight 0 is free)."""
        batch, slots, size = start.shape
        self.target = target
        self.vectors = start.new_zeros(batch, 0, size)
        self.kkt = start.new_zeros(batch, 1, 1)
        self.inverse = start.new_zeros(batch, 1, 1)
        self.xi = start.new_zeros(batch, 0)
        self.projections = start.new_zeros(batch, 0)  # <a_z, target>
        self.used = torch.zeros(batch, 0, dtype=torch.bool, device=start.device)
        self.age = torch.zeros(batch, 0, dtype=torch.long, device=start.device)
        self.added = slots
        self.changes = 0
        self.grow(-(-slots // self.BLOCK))
        used = weights > 0
        self.vectors[:, :slots], self.used[:, :slots], self.xi[:, :slots] = start, used, weights
        self.age[:, :slots] = torch.arange(slots, device=start.device)
        self.projections[:, :slots] = (start * target.unsqueeze(1)).sum(-1)
        gram = start @ start.transpose(1, 2)
        both = used.unsqueeze(-1) & used.unsqueeze(-2)
        self.kkt[:, 1 : slots + 1, 1 : slots + 1] = torch.where(both, gram, torch.diag_embed(~used).to(gram.dtype))
        self.kkt[:, 0, 1 : slots + 1] = self.kkt[:, 1 : slots + 1, 0] = used.to(gram.dtype)
        self.inverse = torch.linalg.inv(self.kkt)

    def solve(self) -> tuple[Tensor, Tensor]:
        """``(tau [B], xi [B, S])`` of eq. 13 on every document's current support."""
        rhs = torch.cat([self.xi.new_ones(len(self.xi), 1), self.projections * self.used], -1)
        solution = (self.inverse * rhs.unsqueeze(1)).sum(-1)  # (elementwise: batched gemv is slower)
        correction = (self.inverse * (rhs - (self.kkt * solution.unsqueeze(1)).sum(-1)).unsqueeze(1)).sum(-1)
        solution = solution + correction  # one step of iterative refinement
        drifted = correction.abs().amax(-1) > self.DRIFT * solution.abs().amax(-1).clamp_min(1.0)
        if drifted.any():  # the updates lost accuracy: invert these rows afresh
            self.inverse[drifted] = torch.linalg.inv(self.kkt[drifted])
            solution[drifted] = (self.inverse[drifted] * rhs[drifted].unsqueeze(1)).sum(-1)
        return solution[:, 0], solution[:, 1:]

    def replace(self, rows: Tensor, slot: Tensor, column: Tensor) -> None:
        """Where ``rows [B]`` holds, the row and column of ``slot [B]`` in K become ``column
        [B, S+1]``; the inverse M follows by the Woodbury identity: ``K' = K + U C U'`` with
        ``U = [e_j, d]``, ``d`` the change of the column and ``C = [[-d_j, 1], [1, 0]]``, so
        ``K'^-1 = M - M U W U' M`` for ``W = (C^-1 + U' M U)^-1``, a 2 x 2 inverse (M stays
        exactly as it was where nothing changes)."""
        picks = torch.arange(len(slot), device=slot.device)
        index = 1 + slot
        old = self.kkt[picks, :, index]
        change = torch.where(rows[:, None], column, old) - old
        self.kkt[picks, index, :] = self.kkt[picks, :, index] = old + change
        self.changes += 1
        if self.changes % self.REFRESH == 0:
            self.inverse = torch.linalg.inv(self.kkt)
            return
        unit_image = self.inverse[picks, :, index]  # M e_j
        change_image = (self.inverse * change.unsqueeze(1)).sum(-1)  # M d
        a = unit_image[picks, index]
        b = change_image[picks, index] + 1.0
        e = (change * change_image).sum(-1) + change[picks, index]
        det = a * e - b * b
        images = torch.stack([unit_image, change_image], -1)  # M U [B, S+1, 2]
        w = torch.stack([torch.stack([e, -b], -1), torch.stack([-b, a], -1)], -2) / det[:, None, None]
        self.inverse.baddbmm_(images @ w, images.transpose(1, 2), alpha=-1.0)

    def add(self, rows: Tensor, vectors: Tensor, overlaps: Tensor) -> None:
        """Where ``rows [B]`` holds, put that row's new mask (its vector, and ``overlaps
        [B, S]`` with every slot's vector) in its first free slot, with weight 0."""
        if not rows.any():
            return
        if not (~self.used[rows]).any(-1).all():
            self.grow()
            overlaps = F.pad(overlaps, (0, self.BLOCK))
        picks = torch.arange(len(rows), device=rows.device)
        slot = (~self.used).to(torch.int8).argmax(-1)
        self.used[picks, slot] |= rows
        column = torch.cat([overlaps.new_ones(len(rows), 1), overlaps * self.used], -1)
        column[picks, 1 + slot] = (vectors * vectors).sum(-1)
        self.replace(rows, slot, column)
        keep = ~rows[:, None]
        self.vectors[picks, slot] = torch.where(keep, self.vectors[picks, slot], vectors)
        self.projections[picks, slot] = torch.where(rows, (vectors * self.target).sum(-1),
                                                    self.projections[picks, slot])
        self.added += 1
        self.age[picks, slot] = torch.where(rows, self.added, self.age[picks, slot])

    def drop(self, rows: Tensor, slot: Tensor) -> None:
        """Where ``rows [B]`` holds, free ``slot [B]``."""
        picks = torch.arange(len(rows), device=rows.device)
        self.used[picks, slot] &= ~rows
        self.xi[picks, slot] *= ~rows
        column = self.kkt.new_zeros(len(rows), self.kkt.shape[-1])
        column[picks, 1 + slot] = 1.0
        self.replace(rows, slot, column)

    def take(self, rows: Tensor) -> None:
        """Keep only ``rows`` (a [B] bool mask): the finished documents leave the batch."""
        for name in ("target", "vectors", "kkt", "inverse", "xi", "projections", "used", "age"):
            setattr(self, name, getattr(self, name)[rows])

    def support(self, rows: Tensor, length: int) -> tuple[Tensor, Tensor, Tensor]:
        """``(masks [R, S, T], weights [R, S], sizes [R])`` of ``rows``: each support's masks
        first, in order of arrival, and their weights summing to 1. A mask whose weight
        ended at exactly 0 leaves (the solution is at a kink there; without it the backward
        pass takes the derivative from the side where it is out)."""
        used = self.used[rows] & (self.xi[rows] > 0)
        sizes = used.sum(-1)
        order = torch.where(used, self.age[rows], self.added + 1).argsort(-1)[:, : int(sizes.max())]
        masks = self.vectors[rows, :, :length].gather(1, order.unsqueeze(-1).expand(-1, -1, length))
        weights = self.xi[rows].gather(1, order)
        return masks, weights / weights.sum(-1, keepdim=True), sizes

    def grow(self, blocks: int = 1) -> None:
        """``blocks`` more blocks of free slots."""
        pad = self.BLOCK * blocks
        if not pad:
            return
        eye = torch.eye(pad, dtype=self.kkt.dtype, device=self.kkt.device)
        self.kkt, self.inverse = F.pad(self.kkt, (0, pad, 0, pad)), F.pad(self.inverse, (0, pad, 0, pad))
        self.kkt[:, -pad:, -pad:] = self.inverse[:, -pad:, -pad:] = eye
        self.vectors = F.pad(self.vectors, (0, 0, 0, pad))
        self.xi = F.pad(self.xi, (0, pad))
        self.projections = F.pad(self.projections, (0, pad))
        self.used = F.pad(self.used, (0, pad))
        self.age = F.pad(self.age, (0, pad))


def budget_oracle(residual: Tensor, mask: Tensor, budgets: Tensor, pair: Tensor | None = None) -> Tensor:
    """``argmax_{|z| <= B} <z, residual> + sum_i pair_i z_i z_{i+1}`` per row ``[B, T]``: the max
    reduction of the chain program (:class:`ChainKSubset` with ``at_most``). Without pair
    scores its closed form (appendix C): the top-B entries that are positive."""
    if pair is None:  # (top-k, not a full sort: the active set calls this every iteration)
        best = residual.masked_fill(mask <= 0, -torch.inf).topk(min(int(budgets.max()), residual.shape[1]), -1)
        keep = (best.values > 0) & (torch.arange(best.values.shape[1], device=residual.device) < budgets[:, None])
        return torch.zeros_like(residual).scatter_(1, best.indices, keep.to(residual.dtype))
    return ChainKSubset(residual, mask, budgets, pair, at_most=True, method="sequential").argmax


def budget_projection(scores: Tensor, mask: Tensor, budgets: Tensor, steps: int = 60) -> Tensor:
    """``mu [B, T]``: the Euclidean projection of ``scores`` onto the budget polytope, ``clip(t -
    tau, 0, 1)`` with ``tau >= 0`` the least that meets the budget (0 where ``mask`` is), tau by
    bisection on ``[0, max t]`` to float64's precision; compiled where it can be
    (:mod:`rationale_cli.models.native.greedy_masks`)."""
    if native_greedy.compiled(scores):
        return native_greedy.budget_projection(scores, mask, budgets, steps)
    scores = scores.masked_fill(mask <= 0, -torch.inf)
    budgets = budgets.to(scores.dtype).unsqueeze(-1)
    low = scores.new_zeros(len(scores), 1)
    high = scores.amax(-1, keepdim=True).clamp_min(0.0)
    for _ in range(steps):
        middle = (low + high) / 2
        over = (scores - middle).clamp(0, 1).sum(-1, keepdim=True) > budgets
        low, high = torch.where(over, middle, low), torch.where(over, high, middle)
    return (scores - high).clamp(0, 1)


def greedy_masks(mu: Tensor, tol: float = 1e-12) -> tuple[Tensor, Tensor]:
    """``(masks [B, S, T], weights [B, S])`` with ``sum_s weights_s masks_s = mu`` for ``mu [B, T]``
    in ``[0, 1]``, each mask with ``size = ceil(sum mu)`` ones or one fewer: a slack token of
    ``size - sum mu`` makes the sum whole, then each step takes the ``size`` largest of what
    is left (the first: the tokens with the largest marginals, the MAP mask's) with the
    largest weight that keeps the rest a mixture of such masks: until one of them reaches 0
    or a token left out reaches the weight still to place, which fixes that token for every
    later mask. So no mask is an affine combination of the later ones (the KKT matrix of
    eq. 13 is invertible), and a document gets about one mask per fractional marginal. The
    same loop runs compiled where it can (:mod:`rationale_cli.models.native.greedy_masks`)."""
    if native_greedy.compiled(mu):
        masks, weights = native_greedy.greedy_masks(mu, tol)
        return masks, weights / weights.sum(-1, keepdim=True)
    batch, length = mu.shape
    total = mu.sum(-1, keepdim=True)
    size = (total - tol).ceil().clamp_min(0)
    rest = torch.cat([mu, (size - total).clamp_min(0)], -1)  # the slack token last
    left = mu.new_ones(batch, 1)  # the weight still to place
    positions = torch.arange(length + 1, device=mu.device).expand(batch, -1)
    masks, weights = [], []
    for _ in range(length + 2):  # each step fixes a token
        if not (left > tol).any():
            break
        order = rest.sort(dim=-1, descending=True, stable=True).indices
        z = torch.empty_like(order).scatter_(1, order, positions) < size
        lowest_in = torch.where(z, rest, torch.inf).amin(-1, keepdim=True)
        highest_out = torch.where(z, -torch.inf, rest).amax(-1, keepdim=True).clamp_min(0)
        step = torch.minimum(lowest_in, left - highest_out).clamp(0, None).minimum(left) * (left > tol)
        rest, left = (rest - step * z).clamp_min(0), left - step
        masks.append(z[:, :length].to(mu.dtype))
        weights.append(step.squeeze(-1))
    masks, weights = torch.stack(masks, 1), torch.stack(weights, 1)
    return masks * (weights > 0).unsqueeze(-1), weights / weights.sum(-1, keepdim=True)


def solve_sparsemap(scores: Tensor, mask: Tensor, budgets: Tensor, pair: Tensor | None = None,
                    max_iter: int = 500, tol: float = 1e-10,
                    closed_form: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """``(masks [B, S, T], weights [B, S], sizes [B])``: a SparseMAP solution per document of
    ``scores [B, T]`` (float64), with at most ``budgets [B]`` ones per mask and the coherence
    scores ``pair [B, T-1]`` if given. Algorithm 1 runs for the whole batch in lockstep:
    every iteration solves the unfinished documents' KKT systems at once, then each
    either drops a mask (its solution infeasible) or asks the oracle for the most
    violated one (eq. 16), and leaves the batch when there is none. It starts from the
    oracle's mask, or, without pair scores and with ``closed_form``, from the closed form:
    the projection (:func:`budget_projection`) written as a few masks (:func:`greedy_masks`),
    already optimal, so that one iteration confirms it. Each document's support is the
    first ``sizes`` slots, in order of arrival."""
    length = scores.shape[1]
    target = scores if pair is None else torch.cat([scores, pair], -1)

    def vectors(z: Tensor) -> Tensor:  # a_z = (z, pair indicators)
        return z if pair is None else torch.cat([z, z[:, :-1] * z[:, 1:]], -1)

    def pairs(x: Tensor) -> Tensor | None:
        return None if pair is None else x[:, length:]

    if pair is None and closed_form:
        supports = Supports(*greedy_masks(budget_projection(scores, mask, budgets)), target)
    else:
        first = vectors(budget_oracle(target[:, :length], mask, budgets, pairs(target))).unsqueeze(1)
        supports = Supports(first, first.new_ones(len(first), 1), target)
    rows = torch.arange(len(scores), device=scores.device)  # the unfinished documents
    live_mask, live_budgets = mask, budgets  # theirs, kept in step with the supports
    finished = []
    for _ in range(max_iter):
        tau, goal = supports.solve()
        used, xi = supports.used, supports.xi
        infeasible = ((goal < -tol) & used).any(-1)
        if infeasible.any():  # step towards the solution until a weight reaches zero, drop that mask
            falling = used & (goal < xi - tol)
            ratios = torch.where(falling, xi / torch.where(falling, xi - goal, 1.0), torch.inf)
            step = ratios.amin(-1)
            drop = torch.where(ratios == step[:, None], supports.age, supports.added + 1).argmin(-1)  # the oldest
            moved = ((xi + step[:, None] * (goal - xi)) * used).clamp_min(0.0)
            supports.xi = torch.where(infeasible[:, None], moved, xi)
            supports.drop(infeasible, drop)
        if infeasible.all():
            continue
        # the oracle's mask against the residual; optimal when it violates nothing
        xi = supports.xi = torch.where(infeasible[:, None], supports.xi, (goal * used).clamp_min(0.0))
        residual = supports.target - (xi.unsqueeze(1) @ supports.vectors).squeeze(1)
        residual = residual.masked_fill(residual.abs() < tol, 0.0)  # rounding must not break the oracle's ties
        z = vectors(budget_oracle(residual[:, :length], live_mask, live_budgets, pairs(residual)))
        overlaps = (supports.vectors * z.unsqueeze(1)).sum(-1)
        size = (z * z).sum(-1, keepdim=True)
        own = supports.kkt[:, 1:, 1:].diagonal(dim1=1, dim2=2)
        repeated = (used & (overlaps == size) & (own == size)).any(-1)
        optimal = ~infeasible & ((tau - (z * residual).sum(-1) >= -tol) | repeated)
        supports.add(~infeasible & ~optimal, z, overlaps)
        if optimal.any():
            finished.append((rows[optimal], *supports.support(optimal, length)))
            supports.take(~optimal)
            rows, live_mask, live_budgets = rows[~optimal], live_mask[~optimal], live_budgets[~optimal]
            if not len(rows):
                break
    if len(rows):  # out of iterations
        finished.append((rows, *supports.support(torch.ones_like(rows, dtype=torch.bool), length)))
    slots = max(len(weights[0]) for _, _, weights, _ in finished)
    masks = scores.new_zeros(len(scores), slots, length)
    weights = scores.new_zeros(len(scores), slots)
    sizes = torch.zeros(len(scores), dtype=torch.long, device=scores.device)
    for done, their_masks, their_weights, their_sizes in finished:
        masks[done, : their_masks.shape[1]] = their_masks
        weights[done, : their_weights.shape[1]] = their_weights
        sizes[done] = their_sizes
    return masks, weights, sizes


class SparseMAPWeights(torch.autograd.Function):
    """Weights ``[B, S]`` of each document's support masks ``[B, S, T]`` (zero weight
    and empty masks past a document's support) from scores ``t [B, T]`` and, for the
    coherence factor, pair scores ``w [B, T-1]`` (``w_i`` for tokens i, i+1)."""

    @staticmethod
    def forward(ctx, scores: Tensor, pair: Tensor | None, mask: Tensor, budgets: Tensor):
        double = None if pair is None else pair.detach().double()
        masks, weights, sizes = solve_sparsemap(scores.detach().double(), mask, budgets, double)
        masks, weights = masks.to(scores.dtype), weights.to(scores.dtype)
        ctx.mark_non_differentiable(masks)
        ctx.save_for_backward(masks)
        ctx.sizes, ctx.pairwise = sizes.tolist(), pair is not None
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
