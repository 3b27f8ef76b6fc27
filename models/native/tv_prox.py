"""The total-variation prox of :mod:`rationale_cli.models.prox` compiled (``tv_prox.c``): the taut string of
``tv_prox_row``, the same steps in float64, for all rows in one call per part of them (rows
shared over PyTorch's threads) instead of a Python loop over every position. Fusedmax
attention runs it on every document of every batch. Tested against the Python loop."""

from __future__ import annotations

import ctypes
import functools

import torch
from torch import Tensor

from rationale_cli.models.native import INT, POINTER, declared, library, over_rows, rows_from

NAME = "tv_prox"


@functools.cache
def _loop():
    return declared(library(NAME), "tv_prox_rows", INT, INT, ctypes.c_double, *[POINTER] * 5)


def compiled(x: Tensor) -> bool:
    """Whether :func:`tv_prox_rows` can run for ``x``: on the CPU, the library built (the
    values go in as float64, as the Python loop computes them)."""
    return x.device.type == "cpu" and library(NAME) is not None


def tv_prox_rows(values: Tensor, lengths: Tensor, lam: float) -> tuple[Tensor, Tensor]:
    """``P_TV`` of each row's first ``lengths[row]`` values of ``values [B, T]`` (float64): the
    results and each position's group, ``[B, T]`` each (unwritten past a row's length)."""
    values, lengths = values.contiguous(), lengths.to(torch.int64).contiguous()
    B, T = values.shape
    out, groups = torch.empty_like(values), torch.empty(B, T, dtype=torch.int64)

    def rows(first: int, count: int) -> None:
        work = values.new_empty(3 * (T + 1))  # each part's own
        _loop()(count, T, lam, *rows_from(first, values, lengths, out, groups), work.data_ptr())

    over_rows(rows, B)
    return out, groups
