"""An encoder's first layer at inference from each word's products, compiled (``token_rows.c``):
the words' rows gathered where the layer reads them, times their gates, and finished in the same
pass (a convolution's bias, ReLU, padding mask and max-pooling; the recurrent input projections'
bias), where PyTorch makes one pass over ``[B, T, .]`` per operation. For
:func:`rationale_cli.models.encoders.cnn.token_layer` and :func:`rationale_cli.models.encoders.recurrence.token_projections`;
each returns None where the loop cannot run, and its caller then runs PyTorch's operations."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from rationale_cli.models.native import INT, POINTER, declared, library, over_rows, usable

NAME = "token_rows"


@functools.cache
def _conv():
    return declared(library(NAME), "token_conv", *[INT] * 5, *[POINTER] * 7)


@functools.cache
def _projections():
    return declared(library(NAME), "token_projections", *[INT] * 6, *[POINTER] * 5)


def token_conv(table: Tensor, source: Tensor, scale: Tensor, real: Tensor, bias: Tensor, K: int,
               states: bool = True, pooled: bool = False) -> tuple[Tensor | None, Tensor | None] | None:
    """A width-``K`` convolution's ``relu(conv(x) + bias) * real`` for ``x = table rows * scale``
    (``table [rows * K, O]``: row ``u K + j`` is word u's tap j; ``source``, ``scale``, ``real``
    ``[B, T]``): its states ``[B, T, O]`` (with ``states``) and their max over positions
    ``[B, O]`` (with ``pooled``), None for what is not asked for."""
    if source.dtype != torch.int64 or not usable(NAME, table, scale, real, bias):
        return None
    (B, T), O = source.shape, table.shape[-1]
    source, scale, real = source.contiguous(), scale.contiguous(), real.contiguous()
    out = table.new_empty(B, T, O) if states else None
    summary = table.new_empty(B, O) if pooled else None
    loop = _conv()
    over_rows(lambda first, count: loop(first, count, T, K, O, table.data_ptr(), source.data_ptr(), scale.data_ptr(),
                                        real.data_ptr(), bias.data_ptr(), None if out is None else out.data_ptr(),
                                        None if summary is None else summary.data_ptr()), B)
    return out, summary


def token_projections(products: Tensor, rows: Tensor, scale: Tensor | None, bias: Tensor) -> Tensor | None:
    """``P [D, T, B, G]``: ``products[rows_{b,s}, d G : (d + 1) G] * scale_{b,s} + bias[d]``
    with ``s = t`` in direction 0, ``T - 1 - t`` in direction 1 (``rows``, ``scale`` ``[B, T]``;
    ``scale`` None: every gate is 1)."""
    if rows.dtype != torch.int64 or not usable(NAME, products, bias, *([] if scale is None else [scale])):
        return None
    (B, T), (D, G) = rows.shape, bias.shape
    rows, bias = rows.contiguous(), bias.contiguous()
    scale = None if scale is None else scale.contiguous()
    P = products.new_empty(D, T, B, G)
    loop = _projections()
    over_rows(lambda first, count: loop(first, count, D, T, B, G, products.data_ptr(), rows.data_ptr(),
                                        None if scale is None else scale.data_ptr(), bias.data_ptr(), P.data_ptr()),
              T)
    return P
