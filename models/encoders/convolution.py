"""Convolution layers under autograd, ``relu(conv(x)) * real``, as K shifted matrix products
over a batch's real rows only.

A batch ``[B, T]`` is packed (:class:`Packed`): each document's rows up to its last real one,
one document after another, with ``pad`` zero rows before, between and after them. Padding
is not computed at all, and a width-K convolution ('same' padding, K // 2 <= pad) reads, for
every output row, tap j's input as one contiguous slice of the packed rows shifted by j:

    out = b + sum_j  X[s + j : s + j + n] W_j^T,      s = pad - K // 2,  n = rows - 2 pad

K matrix products accumulate in place, with no copy per tap (an im2col matrix) and no
reordering of the input (PyTorch's CPU convolution reorders a ``[B, T, In]`` view). The
rows between documents come out as ``relu(b + ...)``; ``real`` (0 there) zeroes them with
the mask, so the next layer reads zeros there again. The backward is the same products:
``dX[s + j : s + j + n] += G W_j`` and ``dW_j = G^T X[s + j : s + j + n]``, with G the output
gradient where ``relu`` passed it and ``real`` is 1 (one product with ``out > 0``).
"""

from __future__ import annotations

from functools import cached_property
from typing import Iterable

import torch
from torch import Tensor, nn


class Packed:
    """The rows of a batch ``[B, T]`` up to each document's last real one (``real [B, T]``),
    packed with ``pad`` zero rows before, between and after the documents. ``index``: the
    flat position ``b T + t`` of each packed row of a document, ``at``: its packed row;
    ``rows``: how many there are in all; ``real [rows, 1]``: 1 at the real rows, 0 elsewhere;
    ``ends [B]``: where each document's rows end."""

    def __init__(self, real: Tensor, pad: int):
        B, T = real.shape
        self.shape, self.pad = (B, T), pad
        positions = torch.arange(T, device=real.device)
        lengths = torch.where(real, positions + 1, 0).amax(1) if T else positions.new_zeros(B)
        kept = positions < lengths.unsqueeze(1)
        starts = pad + torch.cumsum(lengths + pad, 0) - (lengths + pad)
        self.index = kept.flatten().nonzero().squeeze(1)
        self.at = (starts.unsqueeze(1) + positions)[kept]
        self.rows = pad + int((lengths + pad).sum())
        self.ends = starts + lengths
        # each packed row's flat position (0 between documents, zeroed after), and each flat
        # position's packed row (0, a zero row, past a document's last real one)
        self.source = self.index.new_zeros(self.rows).index_copy_(0, self.at, self.index)
        self.between = (self.source.new_ones(self.rows, dtype=torch.bool).index_fill_(0, self.at, False)
                        .nonzero().squeeze(1))
        self.target = self.index.new_zeros(B * T).index_copy_(0, self.index, self.at)
        self.real = self.pack(real.unsqueeze(-1).float())

    @cached_property
    def document(self) -> Tensor:
        """The document of each packed row ``[rows]`` (that of the next one between them)."""
        rows = torch.arange(self.rows, device=self.ends.device)
        return torch.searchsorted(self.ends, rows, right=True).clamp(max=max(self.shape[0] - 1, 0))

    def pack(self, x: Tensor) -> Tensor:
        """``x [B, T, D]`` as packed rows ``[rows, D]`` (zero between documents): one gather, the
        rows between documents zeroed after."""
        flat = x.reshape(-1, x.shape[-1])
        if flat.shape[0] == 0:  # no positions: only rows between documents
            return flat.new_zeros(self.rows, x.shape[-1])
        return flat.index_select(0, self.source).index_fill_(0, self.between, 0)

    def unpack(self, rows: Tensor) -> Tensor:
        """Packed ``rows [rows, D]``, zero between documents (as :meth:`pack` and :func:`conv_relu`
        leave them), back as ``[B, T, D]`` (zero past each document's last real row): one gather,
        the positions past a document reading the zero row 0."""
        B, T = self.shape
        if self.pad == 0:  # no row between documents to read zeros from
            out = rows.new_zeros(B * T, rows.shape[-1]).index_copy(0, self.index, rows.index_select(0, self.at))
            return out.view(B, T, rows.shape[-1])
        return rows.index_select(0, self.target).view(B, T, rows.shape[-1])

    def convolved(self, convs: Iterable[nn.Conv1d], x: Tensor) -> Tensor:
        """``relu(conv(.)) * real`` of each conv in turn on ``x [B, T, In]``, as ``[B, T, Out]``."""
        rows = self.pack(x)
        real = self.real.to(rows.dtype)
        for conv in convs:
            rows = conv_relu(conv, rows, real, self.pad)
        return self.unpack(rows)


class _ConvReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, real: Tensor, weight: Tensor, bias: Tensor, pad: int) -> Tensor:
        K = weight.shape[-1]
        s, n = pad - K // 2, x.shape[0] - 2 * pad
        y = x.new_empty(x.shape[0], weight.shape[0])
        y[:pad] = 0
        y[pad + n :] = 0
        out = torch.addmm(bias, x[s : s + n], weight[:, :, 0].t(), out=y[pad : pad + n])
        for j in range(1, K):
            out.addmm_(x[s + j : s + j + n], weight[:, :, j].t())
        out.relu_().mul_(real[pad : pad + n])
        ctx.save_for_backward(x, y, weight)
        ctx.pad = pad
        return y

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, y, weight = ctx.saved_tensors
        pad, K = ctx.pad, weight.shape[-1]
        s, n = pad - K // 2, x.shape[0] - 2 * pad
        g = torch.ops.aten.threshold_backward(grad[pad : pad + n], y[pad : pad + n], 0)  # where relu passed
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:  # the middle tap's product written, the others added
            gx = torch.empty_like(x)
            gx[:pad] = 0
            gx[pad + n :] = 0
            torch.mm(g, weight[:, :, K // 2], out=gx[pad : pad + n])
            for j in range(K):
                if j != K // 2:
                    gx[s + j : s + j + n].addmm_(g, weight[:, :, j])
        if ctx.needs_input_grad[2]:
            gw = torch.stack([g.t() @ x[s + j : s + j + n] for j in range(K)], -1)
        if ctx.needs_input_grad[3]:
            gb = g.sum(0)
        return gx, None, gw, gb, None


def conv_relu(conv: nn.Conv1d, rows: Tensor, real: Tensor, pad: int) -> Tensor:
    """``relu(conv(x)) * real`` on packed ``rows [R, In]`` (:class:`Packed`, ``pad`` at least
    ``K // 2``; ``real [R, 1]`` 0 or 1), ``conv`` a Conv1d of odd width K with 'same' padding
    and a bias."""
    return _ConvReLU.apply(rows, real, conv.weight, conv.bias, pad)
