"""The dependent HardKuma selector's sampling loop compiled (``hardkuma_scan.c``): the whole
loop of :class:`rationale_cli.models.selectors.binary.dependent.DependentScan` with ``HardKuma.rsample`` as its
draw, forward and backward, one call each, instead of some thirty autograd operations per
token. Same math and the same noise (tested against the PyTorch loop)."""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rationale_cli.models.native import FLOAT, INT, POINTER, declared, library, over_rows, pointers, rows_from, usable

NAME = "hardkuma_scan"
_SIZES = [INT] * 3 + [FLOAT] * 4


@functools.cache
def _loops():
    lib = library(NAME)
    return (declared(lib, "hardkuma_forward", *_SIZES, *[POINTER] * 14),
            declared(lib, "hardkuma_backward", *_SIZES, *[POINTER] * 21),
            declared(lib, "hardkuma_decode", *_SIZES, INT, *[POINTER] * 12))


def compiled(*tensors: Tensor) -> bool:
    """Whether :func:`hardkuma_scan` can run on these tensors."""
    return usable(NAME, *tensors)


class _Scan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, steps, head_s, cell_z, W, bias_l, bias, mask, u, limits):
        B, T, _ = steps.shape
        Z = W.shape[0]
        z, theta = steps.new_empty(B, T), steps.new_empty(B, T, 2)
        kept = [steps.new_empty(B, T, Z) for _ in range(4)]  # hs, c1s, c2s, lams
        inputs = (steps, head_s, cell_z, W, bias_l, bias, mask, u)
        weights = pointers(head_s, cell_z, W, bias_l, bias)

        def rows(first: int, count: int) -> None:
            _loops()[0](count, T, Z, *limits, *rows_from(first, steps), *weights,
                        *rows_from(first, mask, u, z, theta, *kept))

        over_rows(rows, B)
        ctx.save_for_backward(*inputs, z, theta, *kept)
        ctx.limits = limits
        return z, theta

    @staticmethod
    @once_differentiable
    def backward(ctx, gz, gtheta):
        steps, head_s, cell_z, W, bias_l, bias, mask, u, z, theta, *kept = ctx.saved_tensors
        B, T, _ = steps.shape
        Z = W.shape[0]
        gz = torch.zeros_like(z) if gz is None else gz.contiguous()
        gtheta = torch.zeros_like(theta) if gtheta is None else gtheta.contiguous()
        gsteps = torch.empty_like(steps)
        weights = pointers(head_s, cell_z, W, bias)
        parts: dict[int, list[Tensor]] = {}  # each part's gradients of the shared weights, by its first row

        def rows(first: int, count: int) -> None:
            own = [torch.zeros_like(x) for x in (head_s, cell_z, W, bias_l, bias)]
            _loops()[1](count, T, Z, *ctx.limits, *rows_from(first, steps), *weights,
                        *rows_from(first, mask, u, z, theta, *kept, gz, gtheta, gsteps), *pointers(*own))
            parts[first] = own

        over_rows(rows, B)
        ordered = [parts[first] for first in sorted(parts)]  # added in row order, whichever part ended first
        return gsteps, *(sum(grads) for grads in zip(*ordered)), None, None, None


def hardkuma_scan(steps: Tensor, head_s: Tensor, cell_z: Tensor, W: Tensor, bias_l: Tensor, bias: Tensor,
                  mask: Tensor, u: Tensor, limits: tuple[float, float, float, float]) -> tuple[Tensor, Tensor]:
    """``(z [B,T], theta [B,T,2])`` of the dependent loop (see ``hardkuma_scan.c`` for the
    shapes) for uniform noise ``u [B,T]``; ``limits``: the stretch ``(l, r)`` and the clamp
    of the shapes ``(a_min, a_max)``."""
    return _Scan.apply(*(x.contiguous() for x in (steps, head_s, cell_z, W, bias_l, bias, mask, u)), limits)


def hardkuma_decode(steps: Tensor, head_s: Tensor, cell_z: Tensor, W: Tensor, bias_l: Tensor, bias: Tensor,
                    mask: Tensor, limits: tuple[float, float, float, float], log_k: Tensor, weights: Tensor,
                    log_k01: Tensor) -> tuple[Tensor, Tensor]:
    """The test-time loop: ``(z [B,T], P(z != 0) [B,T])``, z the most likely of 0, 1 and the
    rectified mean (by quadrature: nodes ``log_k``, ``weights``; ``log_k01`` the logs of the
    stretched 0 and 1), each token conditioned on the decoded prefix."""
    B, T, _ = steps.shape
    z, p_nonzero = steps.new_empty(B, T), steps.new_empty(B, T)
    quadrature = [x.contiguous() for x in (log_k, weights, log_k01)]
    steps, mask = steps.contiguous(), mask.contiguous()
    parameters = [x.contiguous() for x in (head_s, cell_z, W, bias_l, bias)]

    def rows(first: int, count: int) -> None:
        _loops()[2](count, T, W.shape[0], *limits, log_k.numel(), *pointers(*quadrature), *rows_from(first, steps),
                    *pointers(*parameters), *rows_from(first, mask, z, p_nonzero))

    over_rows(rows, B)
    return z, p_nonzero
