"""SparseMAP's starting support compiled (``greedy_masks.c``): the budget projection's
bisection (:func:`rationale_cli.models.distributions.sparsemap.budget_projection`, one pass over a row per
step instead of seven batch operations), and the loop of
:func:`rationale_cli.models.distributions.sparsemap.greedy_masks`, one document at a time, its entries
sorted once and then kept in order by moving those a step lowered back into place, instead
of a sort and some ten batch operations per step (a beer review's support starts with 40-50
masks early in training). The same masks and weights (tested against the PyTorch loop);
float64 on the CPU. It runs twice: once to count each document's steps, which sizes the
output, then to write them."""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from rationale_cli.models.native import INT, POINTER, declared, library, pointers, usable

NAME = "greedy_masks"
DOUBLE = ctypes.c_double


@functools.cache
def _loops():
    lib = library(NAME)
    return (declared(lib, "greedy_steps", INT, INT, DOUBLE, *[POINTER] * 3),
            declared(lib, "greedy_masks", INT, INT, INT, DOUBLE, *[POINTER] * 4),
            declared(lib, "budget_projection", INT, INT, INT, *[POINTER] * 4))


def compiled(mu: Tensor) -> bool:
    """Whether :func:`greedy_masks` can run on ``mu``: float64 on the CPU, the library built."""
    return usable(NAME, mu, dtype=torch.float64)


def greedy_masks(mu: Tensor, tol: float) -> tuple[Tensor, Tensor]:
    """``(masks [B, S, T], weights [B, S])`` of ``mu [B, T]``: each document's steps, S the most
    any document takes, the weights not yet normalized (0 past a document's last step)."""
    count, write, _ = _loops()
    mu = mu.contiguous()
    B, T = mu.shape
    totals = mu.sum(-1).contiguous()  # as the PyTorch loop sums them: the same sizes and slack
    steps = torch.zeros(B, dtype=torch.int64)
    count(B, T, tol, *pointers(mu, totals, steps))
    slots = int(steps.max()) if B else 0
    masks, weights = mu.new_zeros(B, slots, T), mu.new_zeros(B, slots)
    write(B, T, slots, tol, *pointers(mu, totals, masks, weights))
    return masks, weights


def budget_projection(scores: Tensor, mask: Tensor, budgets: Tensor, steps: int) -> Tensor:
    """``mu [B, T]``: the projection of ``scores`` (float64) onto the budget polytope, ``steps``
    bisections for its threshold."""
    B, T = scores.shape
    scores, mask = scores.contiguous(), mask.to(scores.dtype).contiguous()
    budgets = budgets.to(scores.dtype).contiguous()
    mu = torch.empty_like(scores)
    _loops()[2](B, T, steps, *pointers(scores, mask, budgets, mu))
    return mu
