"""CNN encoder: a stack of convolutions over the masked input, ReLU, masked max-pooling.

The convolutional text encoders of the L2X-style beer experiments (Chen et al.,
2018; Paulus et al., 2020, appendix D.6; Ahmed et al., 2023, appendix C.3)::

    s^0 = m x,    s^l_t = relu(sum_{|k| <= w/2} W^l_k s^{l-1}_{t+k} + b^l) * [m_t > 0]
    summary = max_{t : m_t > 0} s^L_t          (zeros for a row without any)

Every layer's input is zero where the mask is, so the conv's zero 'same' padding
equals padding tokens and padding never changes a result. Since s >= 0 and s = 0
where m = 0, the masked max equals the plain max over s when there is a layer.
``layers = 0`` gives the
dropped-out, masked inputs themselves (the 'simple' selector of D.6: its width-1
convolutions are the selector's own linear maps).

Without gradients a layer is computed as one matrix product of its input rows with the
kernel's taps and shifted sums (:func:`layer`), from the nonzero rows only when most rows
are zero (a predictor reading ``z x`` with a short rationale: a zero row adds exactly
zero to every window), and the first layer from each word's products, kept between
batches, when the input's :class:`~rationale_cli.models.encoders.base.TokenRows` are given: the same
convolution with a fraction of the arithmetic. With gradients, the layers run over the
batch's real rows packed together, as shifted matrix products
(:mod:`rationale_cli.models.encoders.convolution`). In training, a predictor reading several
masks of each document (SparseMAP's support) computes the first layer's tap products once
per document and gates them per mask, at the positions a mask reaches
(:meth:`CNNEncoder.gated`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rationale_cli.models.encoders.base import Encoder, TokenRows, without_grad
from rationale_cli.models.encoders.convolution import Packed
from rationale_cli.models.native.dropout import Dropout
from rationale_cli.models.native.token_rows import token_conv


class CNNEncoder(Encoder):
    """``layers`` Conv1d (odd ``kernel_size``, 'same' padding) + ReLU; ``output_size`` is
    ``hidden_size`` (``input_size`` when ``layers = 0``)."""

    def __init__(self, input_size: int, hidden_size: int, *, kernel_size: int = 3, layers: int = 1,
                 dropout: float = 0.0):
        super().__init__()
        self.skips_unselected = False
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd and positive, got {kernel_size}")
        if layers < 0:
            raise ValueError(f"layers must be 0 or more, got {layers}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.kernel_size = kernel_size
        self.output_size = hidden_size if layers else input_size
        self.dropout = Dropout(dropout)
        sizes = [input_size] + [hidden_size] * layers
        self.convs = nn.ModuleList(
            nn.Conv1d(sizes[i], sizes[i + 1], kernel_size, padding=kernel_size // 2) for i in range(layers)
        )

    def forward(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None,
                skip: bool = False, dropped: bool = False) -> tuple[Tensor, Tensor]:
        mask = mask.to(x.dtype)
        if x.shape[1] == 0:  # no positions: nothing to encode
            return x.new_zeros(*x.shape[:2], self.output_size), x.new_zeros(x.shape[0], self.output_size)
        real = (mask > 0).unsqueeze(-1).to(x.dtype)
        if not self.convs:
            states = self.input_dropout(x, dropped) * mask.unsqueeze(-1)
            summary = states.masked_fill(real == 0, float("-inf")).max(dim=1).values
            return states, torch.where(real.amax(1) > 0, summary, 0.0)
        inference = without_grad(self, x)
        rows = tokens.scaled(mask) if self.uses_tokens(x, tokens) else None
        # with rows, x is not read
        states = x if rows is not None else self.input_dropout(x, dropped) * mask.unsqueeze(-1)
        if not inference:
            states = Packed(mask > 0, self.kernel_size // 2).convolved(self.convs, states)
            # states >= 0 and 0 at padding: the plain max is the masked max (its gradient goes
            # to the first of tied maxima)
            return states, states.max(dim=1).values
        summary = None
        if rows is not None:  # the first layer from the tokens, max-pooled in the same pass when it is the last
            states, summary = token_layer(self.convs[0], rows, real[..., 0], pooled=len(self.convs) == 1)
        for conv in self.convs[rows is not None:]:
            states, summary = layer(conv, states, real), None
        return states, states.amax(dim=1) if summary is None else summary

    def summary(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None, skip: bool = False,
                dropped: bool = False) -> Tensor:
        """At inference from the tokens with one layer, the max-pooled layer: its states not formed."""
        if len(self.convs) != 1 or x.shape[1] == 0 or not self.uses_tokens(x, tokens):
            return super().summary(x, mask, tokens, skip, dropped)
        mask = mask.to(x.dtype)
        return token_layer(self.convs[0], tokens.scaled(mask), (mask > 0).to(x.dtype), states=False, pooled=True)[1]

    def uses_tokens(self, x: Tensor, tokens: TokenRows | None) -> bool:
        return tokens is not None and bool(self.convs) and not self.training and without_grad(self, x)

    def gated(self, x: Tensor, gate: Tensor, mask: Tensor, rows: Tensor | None = None,
              tokens: TokenRows | None = None, skip: bool = False) -> Tensor:
        """With ``rows``, gradients (several masks per document in training) and
        ``skip`` (the gates' zeros need no gradient), the first layer from each document's tap
        products (one matrix product for the batch) instead of a convolution per gate:
        ``conv(x z)_t = b + sum_j z_{t+j-c} (x W_j)_{t+j-c}`` (c = K // 2). That sum is
        computed only at the positions whose window holds a nonzero gate (a short rationale's
        few); everywhere else in the text it is the bias b, which enters the max-pooling once
        per gate. (The tied maxima of a gate share the pooling's gradient, where the convolution
        passes it to the first: the same for the ties at 0 that ReLU leaves.)"""
        if rows is None or not skip or not self.convs or x.shape[1] == 0 or without_grad(self, x):
            return super().gated(x, gate, mask, rows, tokens, skip)
        first = self.convs[0]
        (B, T, _), K = x.shape, self.kernel_size
        # tap j of x_{t-c} [B, T + K - 1, K, H], zero rows about each text: x is padded, not its products
        padded = (F.pad(self.input_dropout(x), (0, 0, K // 2, K // 2)).reshape(B * (T + K - 1), -1)
                  @ kernel_taps(first)).view(B, T + K - 1, K, -1)
        window = F.pad(gate, (K // 2, K // 2)).unfold(-1, K, 1)  # [R, T, K]: the gate at t + j - c
        real = mask > 0
        reached = (window != 0).any(-1) & real
        gates, position = reached.nonzero(as_tuple=True)
        taps = torch.arange(K, device=x.device)
        reach = (rows[gates, None] * (T + K - 1) + position[:, None] + taps) * K + taps  # rows of (x W_j)_{t+j-c}
        states = F.embedding_bag(reach, padded.view(-1, padded.shape[-1]), mode="sum",
                                 per_sample_weights=window[gates, position])  # [N, H]
        states = torch.relu(states + first.bias)
        rest = torch.relu(first.bias).expand(len(gate), -1) * (real & ~reached).any(-1, keepdim=True)
        if len(self.convs) > 1:  # the later layers read every position
            dense = (rest.unsqueeze(1) * real.unsqueeze(-1)).index_put((gates, position), states)
            return Packed(real, K // 2).convolved(self.convs[1:], dense).max(dim=1).values
        # max-pool each gate's reached positions (states >= 0: starting from 0 changes nothing) and its rest
        pooled = states.new_zeros(len(gate), states.shape[-1])
        pooled = pooled.scatter_reduce(0, gates[:, None].expand_as(states), states, "amax")
        return torch.maximum(pooled, rest)


SPARSE_SHARE = 0.5  # below this share of nonzero rows, an inference layer reads only those


def layer(conv: nn.Conv1d, x: Tensor, real: Tensor) -> Tensor:
    """``relu(conv(x)) * real`` for ``x [B, T, In]`` ('same' padding), ``real [B, T, 1]``, without
    gradients (with them: :class:`~rationale_cli.models.encoders.convolution.Packed`), in place: from the
    kernel taps' products of x's rows (:func:`shifted_sum`), of its nonzero rows only when
    most rows are zero (:func:`scattered_sum`)."""
    B, T, _ = x.shape
    taps = kernel_taps(conv)
    read = nonzero_rows(x)
    if read is not None and read.sum() < SPARSE_SHARE * read.numel():
        batch, position = read.nonzero(as_tuple=True)
        out = scattered_sum(conv, x[batch, position] @ taps, batch, position, (B, T))
    else:
        out = shifted_sum(conv, (x.reshape(B * T, -1) @ taps).view(B, T, -1))
    return out.relu_().mul_(real)


def token_layer(conv: nn.Conv1d, rows: TokenRows, real: Tensor, states: bool = True,
                pooled: bool = False) -> tuple[Tensor | None, Tensor | None]:
    """:func:`layer` of ``x`` from what it is made of (``real [B, T]``; x itself is not read), from
    the tokens' tap products (:meth:`TokenRows.products`): its states (with ``states``) and their
    max over positions (with ``pooled``), None for what is not asked for; in one compiled pass
    (:func:`rationale_cli.models.native.token_rows.token_conv`), else from :func:`token_sum`."""
    out_size, _, K = conv.weight.shape
    products, source = rows.products(conv.weight, lambda: kernel_taps(conv))  # [U + 1, K * Out], [B, T]
    compiled = token_conv(products.view(-1, out_size), source, rows.scale, real, conv.bias, K, states, pooled)
    if compiled is not None:
        return compiled
    out = token_sum(conv, products, source, rows.scale).relu_().mul_(real.unsqueeze(-1))
    return out, out.amax(dim=1) if pooled else None


def token_sum(conv: nn.Conv1d, products: Tensor, source: Tensor, scale: Tensor) -> Tensor:
    """The convolution of ``x = table[ids] * scale`` from the tokens' tap products
    ``products [U + 1, K * Out]`` and each position's row ``source [B, T]``: output t is the bias
    plus ``scale_s (table[id_s] W_j)`` summed over the taps j, with ``s = t + j - K // 2``
    inside the sequence; one weighted bag sum of K rows per output."""
    out_size, _, K = conv.weight.shape
    B, T = source.shape
    zero = products.shape[0] - 1  # the zero row, which source gives where the scale is 0
    table = products.view(-1, out_size)  # row u * K + j: token u's tap j (rows zero * K + j: zero)
    padded = source.new_full((B, T + K - 1), zero)
    padded[:, K // 2 : K // 2 + T] = source
    scaled = scale.new_zeros(B, T + K - 1)
    scaled[:, K // 2 : K // 2 + T] = scale
    index = torch.stack([padded[:, j : j + T] * K + j for j in range(K)], -1)  # [B, T, K]
    weight = torch.stack([scaled[:, j : j + T] for j in range(K)], -1)
    out = F.embedding_bag(index.view(-1, K), table, per_sample_weights=weight.view(-1, K), mode="sum")
    return out.view(B, T, out_size).add_(conv.bias)


def nonzero_rows(x: Tensor) -> Tensor | None:
    """Which rows of ``x [B, T, In]`` are not all zero ``[B, T]``; None when a cheap lower bound
    (the first column) already shows that most are."""
    if (x[..., 0] != 0).sum() >= SPARSE_SHARE * x.shape[0] * x.shape[1]:
        return None
    return (x.amax(-1) != 0) | (x.amin(-1) != 0)


def kernel_taps(conv: nn.Conv1d) -> Tensor:
    """The kernel as one matrix ``[In, K * Out]``: ``x_s @ taps`` gives every tap's product ``x_s W_j``."""
    out_size, in_size, K = conv.weight.shape
    return conv.weight.permute(1, 2, 0).reshape(in_size, K * out_size)


def shifted_sum(conv: nn.Conv1d, products: Tensor) -> Tensor:
    """The convolution from every position's tap products ``[B, T, K * Out]``: output t adds
    tap j's product of row ``t + j - K // 2`` (cross-correlation, as Conv1d), and the bias."""
    B, T, _ = products.shape
    out_size, _, K = conv.weight.shape
    products = products.view(B, T, K, out_size)
    out = products[:, :, K // 2] + conv.bias
    for j in range(K):
        shift = j - K // 2
        if shift and abs(shift) < T:
            low, high = max(0, -shift), T - max(0, shift)
            out[:, low:high] += products[:, low + shift : high + shift, j]
    return out


def scattered_sum(conv: nn.Conv1d, products: Tensor, batch: Tensor, position: Tensor,
                  shape: tuple[int, int]) -> Tensor:
    """The convolution over ``shape = (B, length)`` positions from the tap products
    ``[R, K * Out]`` of the rows at ``(batch, position)`` (every other row zero): row s's tap
    j goes to output ``s - j + K // 2``; outputs that no such row reaches are the bias."""
    out_size, _, K = conv.weight.shape
    B, length = shape
    out = conv.bias.expand(B * length, out_size).contiguous()
    products = products.view(-1, K, out_size)
    for j in range(K):
        target = position - j + K // 2
        inside = (target >= 0) & (target < length)
        out.index_add_(0, (batch * length + target)[inside], products[inside, j])
    return out.view(B, length, out_size)
