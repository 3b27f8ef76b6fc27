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
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.encoders.base import Encoder


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
        self.dropout = nn.Dropout(dropout)
        sizes = [input_size] + [hidden_size] * layers
        self.convs = nn.ModuleList(
            nn.Conv1d(sizes[i], sizes[i + 1], kernel_size, padding=kernel_size // 2) for i in range(layers)
        )

    def forward(self, x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        mask = mask.to(x.dtype)
        if x.shape[1] == 0:  # no positions: nothing to encode
            return x.new_zeros(*x.shape[:2], self.output_size), x.new_zeros(x.shape[0], self.output_size)
        states = self.dropout(x) * mask.unsqueeze(-1)
        real = (mask > 0).unsqueeze(-1).to(x.dtype)
        for conv in self.convs:
            states = torch.relu(conv(states.transpose(1, 2))).transpose(1, 2) * real
        summary = states.masked_fill(real == 0, float("-inf")).max(dim=1).values
        return states, torch.where(real.amax(1) > 0, summary, 0.0)
