"""The bigram RCNN's time loop compiled (``rcnn_steps.c``), with the math and layout of
:mod:`rationale_cli.models.encoders.recurrence` (tested against its loops and the autograd reference).

Where PyTorch carries MKL (its x86 builds), the whole loop runs in C, the products with U
through MKL's ``sgemm`` one thread each, and the batch's rows in parts on PyTorch's threads
(:func:`rationale_cli.models.native.over_rows`): no Python between steps, and the elementwise work, which a
single thread did between the products, shared out. Elsewhere each step is one ``bmm`` and one
C call for its elementwise work, instead of the ten and twenty-five PyTorch operations of the
plain loops."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch
from torch import Tensor

from rationale_cli.models.native import INT, POINTER, declared, library, over_rows, pointers, usable

NAME = "rcnn_steps"


@functools.cache
def _steps():
    lib = library(NAME)
    return (declared(lib, "rcnn_forward_step", *[INT] * 8, *[POINTER] * 9),
            declared(lib, "rcnn_backward_step", *[INT] * 7, *[POINTER] * 15),
            declared(lib, "rcnn_forward_rows", *[POINTER] * 2, *[INT] * 7, *[POINTER] * 10),
            declared(lib, "rcnn_backward_rows", *[POINTER] * 2, *[INT] * 6, *[POINTER] * 16))


@functools.cache
def blas() -> tuple[int, int] | None:
    """The addresses of ``sgemm_`` and ``MKL_SET_NUM_THREADS_LOCAL`` in PyTorch's own library
    (the MKL it is built with), or None where it has no such symbols."""
    for path in sorted((Path(torch.__file__).parent / "lib").glob("libtorch_cpu.*")):
        try:
            lib = ctypes.CDLL(str(path))
            return tuple(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                         for name in ("sgemm_", "MKL_SET_NUM_THREADS_LOCAL"))
        except (OSError, AttributeError):
            continue
    return None


def compiled(*tensors: Tensor) -> bool:
    """Whether :func:`rcnn_forward` and :func:`rcnn_backward` can run on these tensors."""
    return usable(NAME, *tensors)


def rcnn_forward(P: Tensor, M: Tensor, U: Tensor, b: Tensor, store: bool):
    """``_rcnn_forward`` of :mod:`rationale_cli.models.encoders.recurrence`: h of all steps ``[D,T,B,H]``
    and, with ``store``, the states and gates ``(c1s, c2s, rs)`` of every step, each
    ``[D,T,B,H]``, for :func:`rcnn_backward`. Inputs contiguous; ``b [D,1,H]``."""
    forward_step, _, forward_rows, _ = _steps()
    D, T, B, G = P.shape
    H = G // 3
    slots = T if store else 2  # without the backward, the steps before the last are not kept
    out = P.new_empty(D, T, B, H)
    c1s, c2s, rs = (P.new_empty(D, slots, B, H) for _ in range(3))
    a, h = P.new_empty(D, B, H), P.new_empty(D, B, H)  # h U, and h again for it (contiguous operands)
    addresses = pointers(a, P, M, b, out, c1s, c2s, rs, h)
    if blas() is not None:
        U_ = pointers(U)[0]
        over_rows(lambda first, count: forward_rows(*blas(), D, T, B, H, slots, first, count, U_, *addresses), B)
        return out, c1s, c2s, rs
    for t in range(T):
        if t > 0:
            torch.bmm(h, U, out=a)
        forward_step(D, T, B, H, slots, t, 0, B, *addresses)
    return out, c1s, c2s, rs


def rcnn_backward(gout: Tensor, P: Tensor, M: Tensor, U: Tensor, b: Tensor, out: Tensor,
                  c1s: Tensor, c2s: Tensor, rs: Tensor):
    """``_rcnn_backward``: the gradients of P, M, U and b."""
    _, backward_step, _, backward_rows = _steps()
    D, T, B, G = P.shape
    H = G // 3
    gP = torch.empty_like(P)
    gM = torch.empty_like(M)
    gA_t = P.new_empty(D, B, H)
    gh, gc1, gc2, gb = (P.new_zeros(D, B, H) for _ in range(4))
    addresses = pointers(P, M, b, out, c1s, c2s, rs, gout, gh, gc1, gc2, gb, gP, gM, gA_t)
    if blas() is not None:
        U_ = pointers(U)[0]
        over_rows(lambda first, count: backward_rows(*blas(), D, T, B, H, first, count, U_, *addresses), B)
    else:
        Ut_T = U.transpose(1, 2)
        for t in range(T - 1, -1, -1):
            backward_step(D, T, B, H, t, 0, B, *addresses)
            gh.baddbmm_(gA_t, Ut_T)
    gA = gP[:, 1:, :, :H].reshape(D, (T - 1) * B, H)  # a view: rows 3H apart
    gU = torch.bmm(out[:, :-1].reshape(D, (T - 1) * B, H).transpose(1, 2), gA)
    return gP, gM, gU, gb.sum(1)
