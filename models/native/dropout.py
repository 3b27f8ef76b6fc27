"""Dropout with a hashed mask (``dropout.c``): element i of the input is kept when a 32-bit
hash of i and two keys drawn from PyTorch's generator is at least ``p 2^32``, and scaled by
``1 / (1 - p)`` as :class:`torch.nn.Dropout` scales it. On the CPU, PyTorch draws a dropout
mask at 8-18 ns per element (a tenth of an RCNN training step on beer batches); the hash is
one vectorized pass (under 1 ns per element), and the backward recomputes the mask from the
keys instead of keeping it. The keys come from PyTorch's default generator, so a seed, and a
checkpoint's random state, fix the masks. Where the C loop cannot run (no compiler, not
float32 on the CPU), :class:`Dropout` is PyTorch's own: other masks, the same distribution."""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from rationale_cli.models.native import FLOAT, INT, POINTER, declared, library, usable

NAME = "dropout"


@functools.cache
def _loop():
    return declared(library(NAME), "hashed_dropout", INT, INT, INT, INT, FLOAT, POINTER, POINTER)


def dropped(x: Tensor, keys: tuple[int, int], p: float) -> Tensor:
    """``x`` (float32, CPU) with the hashed mask of ``keys`` applied, kept elements times
    ``1 / (1 - p)`` (the same for its gradient); ``0 < p < 1``."""
    threshold, scale = min(round(p * 2.0**32), 2**32 - 1), 1.0 / (1.0 - p)
    x = x.contiguous()
    out = torch.empty_like(x)
    _loop()(x.numel(), *keys, threshold, scale, x.data_ptr(), out.data_ptr())
    return out


class _HashedDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float, keys: tuple[int, int]) -> Tensor:
        ctx.p, ctx.keys = p, keys
        return dropped(x, keys, p)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        return dropped(grad, ctx.keys, ctx.p), None, None


class Dropout(nn.Dropout):
    """:class:`torch.nn.Dropout` with the hashed mask in training, on float32 CPU tensors."""

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or not 0 < self.p < 1 or not usable(NAME, x):
            return super().forward(x)
        keys = tuple(int(k) for k in torch.randint(0, 2**32, (2,), dtype=torch.int64))
        return _HashedDropout.apply(x, self.p, keys)
