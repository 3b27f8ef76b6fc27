"""CNN encoder: one convolution over the masked input, ReLU, masked max-pooling.

The L2X-style text encoder used with SIMPLE (Ahmed et al., 2023, Tables 2-3)::

    s_t = relu(sum_{|k| <= w/2} W_k (m_{t+k} x_{t+k}) + b) * [m_t > 0]
    summary = max_{t : m_t > 0} s_t          (zeros for a row without any)

The input is multiplied by the mask before the convolution, so the conv's zero
'same' padding equals padding tokens and padding never changes a result. Since
s >= 0 and s = 0 where m = 0, the masked max equals the plain max over s.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.encoders import Encoder


class CNNEncoder(Encoder):
    """Conv1d (odd ``kernel_size``, 'same' padding) + ReLU; ``output_size = hidden_size``."""

    def __init__(self, input_size: int, hidden_size: int, *, kernel_size: int = 3, dropout: float = 0.0):
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd and positive, got {kernel_size}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.kernel_size = kernel_size
        self.output_size = hidden_size
        self.dropout = nn.Dropout(dropout)
        self.conv = nn.Conv1d(input_size, hidden_size, kernel_size, padding=kernel_size // 2)

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        mask = mask.to(x.dtype)
        if x.shape[1] == 0:  # no positions: nothing to encode
            return x.new_zeros(*x.shape[:2], self.output_size), x.new_zeros(x.shape[0], self.output_size)
        x = self.dropout(x) * mask.unsqueeze(-1)
        states = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        states = states * (mask > 0).unsqueeze(-1).to(states.dtype)
        summary = states.max(dim=1).values
        return states, summary
