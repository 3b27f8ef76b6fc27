"""The k-best semiring's sum compiled (``kbest.c``), for :class:`rationale_cli.models.distributions.chain_dp.KMax`:
the R best of two sorted candidate lists per state by one merge, written into the table's
slice, where PyTorch's concatenation, top-k and copy took a third of a top-k sparsemax
training step (one call per token). None where it cannot run: PyTorch's then."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from rationale_cli.models.native import INT, POINTER, declared, library, usable

NAME = "kbest"


@functools.cache
def _merge():
    return declared(library(NAME), "kmax_merge", INT, INT, INT, POINTER, INT, POINTER, INT, POINTER, INT, POINTER)


def _rows(x: Tensor) -> int | None:
    """The step between the rows of ``x [J, N, R]`` when each row's ``N R`` values are contiguous."""
    J, N, R = x.shape
    return x.stride(0) if x.stride(2) == 1 and (N == 1 or x.stride(1) == R) else None


def kmax_merge(a: Tensor, b: Tensor, out: Tensor) -> Tensor | None:
    """``out [J, N, R]`` = the R best of ``a`` and ``b`` (each ``[J, N, R]``, sorted best
    first) per state, best first (``a``'s on ties), and the pointers ``[J, N, R]`` (as
    ``torch.cat([a, b], -1).topk(R)`` gives them); None, ``out`` untouched, where it cannot run."""
    if not (a.dim() == 3 and a.shape == b.shape == out.shape and usable(NAME, a, b, out)):
        return None
    steps = [_rows(x) for x in (a, b, out)]
    if None in steps:
        return None
    J, N, R = out.shape
    pointer = torch.empty(J, N, R, dtype=torch.int64)
    _merge()(J, N, R, a.data_ptr(), steps[0], b.data_ptr(), steps[1], out.data_ptr(), steps[2], pointer.data_ptr())
    return pointer
