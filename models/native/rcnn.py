"""The bigram RCNN's time loop with each step's elementwise work in one compiled pass
(``rcnn_steps.c``): one ``bmm`` and one C call per step (the products' operands contiguous), forward and backward, instead
of the ten and twenty-five PyTorch operations of :mod:`models.encoders.recurrence`, whose
math and layout it shares (tested against its loops and the autograd reference)."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from models.native import INT, POINTER, declared, library, pointers, usable

NAME = "rcnn_steps"


@functools.cache
def _steps():
    lib = library(NAME)
    return (declared(lib, "rcnn_forward_step", *[INT] * 6, *[POINTER] * 9),
            declared(lib, "rcnn_backward_step", *[INT] * 5, *[POINTER] * 15))


def compiled(*tensors: Tensor) -> bool:
    """Whether :func:`rcnn_forward` and :func:`rcnn_backward` can run on these tensors."""
    return usable(NAME, *tensors)


def rcnn_forward(P: Tensor, M: Tensor, U: Tensor, b: Tensor, store: bool):
    """``_rcnn_forward`` of :mod:`models.encoders.recurrence`: h of all steps ``[D,T,B,H]``
    and, with ``store``, the states and gates ``(c1s, c2s, rs)`` of every step, each
    ``[D,T,B,H]``, for :func:`rcnn_backward`. Inputs contiguous; ``b [D,1,H]``."""
    forward_step = _steps()[0]
    D, T, B, G = P.shape
    H = G // 3
    slots = T if store else 2  # without the backward, the steps before the last are not kept
    out = P.new_empty(D, T, B, H)
    c1s, c2s, rs = (P.new_empty(D, slots, B, H) for _ in range(3))
    a, h = P.new_empty(D, B, H), P.new_empty(D, B, H)  # h U, and h again for it (contiguous operands)
    addresses = pointers(a, P, M, b, out, c1s, c2s, rs, h)
    for t in range(T):
        if t > 0:
            torch.bmm(h, U, out=a)
        forward_step(D, T, B, H, slots, t, *addresses)
    return out, c1s, c2s, rs


def rcnn_backward(gout: Tensor, P: Tensor, M: Tensor, U: Tensor, b: Tensor, out: Tensor,
                  c1s: Tensor, c2s: Tensor, rs: Tensor):
    """``_rcnn_backward``: the gradients of P, M, U and b."""
    backward_step = _steps()[1]
    D, T, B, G = P.shape
    H = G // 3
    gP = torch.empty_like(P)
    gM = torch.empty_like(M)
    Ut_T = U.transpose(1, 2)
    gA_t = P.new_empty(D, B, H)
    gh, gc1, gc2, gb = (P.new_zeros(D, B, H) for _ in range(4))
    addresses = pointers(P, M, b, out, c1s, c2s, rs, gout, gh, gc1, gc2, gb, gP, gM, gA_t)
    for t in range(T - 1, -1, -1):
        backward_step(D, T, B, H, t, *addresses)
        gh.baddbmm_(gA_t, Ut_T)
    gA = gP[:, 1:, :, :H].reshape(D, (T - 1) * B, H)  # a view: rows 3H apart
    gU = torch.bmm(out[:, :-1].reshape(D, (T - 1) * B, H).transpose(1, 2), gA)
    return gP, gM, gU, gb.sum(1)
