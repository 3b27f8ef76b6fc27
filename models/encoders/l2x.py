"""The L2X selector network (Chen et al., 2018), used for beer by SIMPLE (Ahmed et
al., 2023, appendix C.3: "4 convolutional and one dense layer")::

    h      = relu(conv_w(m x))                       first layer, width w (3)
    global = relu(W_g max_t h_t)                     global branch: max-pool + dense
    local  = relu(conv_3(relu(conv_3(h))))           local branch: two width-3 convolutions
    s_t    = relu(conv_1(dropout([global; local_t])))  states; the selector's own linear
                                                       map is the fourth convolution (width 1)

with the mask applied after every layer, so padding never changes a result.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rationale_cli.models.encoders.base import Encoder, TokenRows
from rationale_cli.models.encoders.convolution import Packed, conv_relu
from rationale_cli.models.native.dropout import Dropout


class L2XEncoder(Encoder):
    def __init__(self, input_size: int, hidden_size: int, *, kernel_size: int = 3, dropout: float = 0.0):
        super().__init__()
        self.skips_unselected = False
        self.output_size = hidden_size
        self.dropout = Dropout(dropout)
        self.first = nn.Conv1d(input_size, hidden_size, kernel_size, padding=kernel_size // 2)
        self.global_layer = nn.Linear(hidden_size, hidden_size)
        self.local = nn.ModuleList(nn.Conv1d(hidden_size, hidden_size, 3, padding=1) for _ in range(2))
        self.combine = nn.Conv1d(2 * hidden_size, hidden_size, 1)

    def forward(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None,
                skip: bool = False, dropped: bool = False) -> tuple[Tensor, Tensor]:
        if x.shape[1] == 0:
            return x.new_zeros(*x.shape[:2], self.output_size), x.new_zeros(x.shape[0], self.output_size)
        packed = Packed(mask > 0, max(self.first.kernel_size[0] // 2, 1))
        real, pad = packed.real.to(x.dtype), packed.pad
        h = conv_relu(self.first, packed.pack(self.input_dropout(x, dropped) * mask.unsqueeze(-1)), real, pad)
        global_info = torch.relu(self.global_layer(packed.unpack(h).max(1).values))  # h >= 0, zero at padding
        local = h
        for conv in self.local:
            local = conv_relu(conv, local, real, pad)
        both = torch.cat([global_info[packed.document], local], -1)
        states = packed.unpack(conv_relu(self.combine, self.dropout(both), real, pad))
        return states, states.max(1).values
