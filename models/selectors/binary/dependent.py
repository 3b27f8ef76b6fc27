"""Selectors whose choice for token i depends on the choices before it.

Bastings et al. (2019, section 6.1, eq. 16) and Lei et al. (2016): a small RCNN
runs over ``[h_i; z_i]`` and its state conditions the next token's
distribution, ``theta_i = head([h_i; s_{i-1}])``, ``s_i = rcnn([h_i; z_i], s_{i-1})``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rationale_cli.models.encoders.rcnn import RCNNCell
from rationale_cli.models.native.hardkuma_scan import hardkuma_decode, hardkuma_scan


class DependentScan(nn.Module):
    """``scan(states [B,T,H], mask, draw) -> (z [B,T], theta [B,T,K])`` where the head
    gives K distribution parameters per token and ``draw(theta_t [B,K]) -> z_t [B]``."""

    def __init__(self, input_size: int, outputs: int, z_hidden: int = 30):
        super().__init__()
        self.input_size = input_size
        self.head = nn.Linear(input_size + z_hidden, outputs)
        self.cell = RCNNCell(input_size + 1, z_hidden)

    def parts(self, states: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """What the loop needs of the weights: the parts that depend on h only, for all steps
        before the loop, in one product (one gradient for the states) ``[B, T, K + 3 Z]``; the
        head's weight on the loop's state ``[Z, K]``; the cell's input weight on z ``[3 Z]``."""
        n, outputs = self.input_size, self.head.out_features
        weight = torch.cat([self.head.weight[:, :n].t(), self.cell.weight_ih[:n]], 1)
        bias = F.pad(self.head.bias, (0, weight.shape[1] - outputs))
        return F.linear(states, weight.t(), bias), self.head.weight[:, n:].t(), self.cell.weight_ih[n]

    def forward(self, states: Tensor, mask: Tensor, draw: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
        outputs = self.head.out_features
        steps, head_s, cell_z = self.parts(states)
        state = self.cell.initial(states.shape[0], states)
        zs, thetas = [], []
        # split into steps once (indexing each step would zero-fill a whole [B, T, .] gradient per step)
        for step, m_t in zip(steps.unbind(1), mask.unbind(1)):
            theta = torch.addmm(step[:, :outputs], state[-1], head_s)
            z_t = draw(theta) * m_t
            state = self.cell.step(torch.addcmul(step[:, outputs:], z_t.unsqueeze(-1), cell_z), state, m_t)
            zs.append(z_t)
            thetas.append(theta)
        return torch.stack(zs, 1), torch.stack(thetas, 1)

    def hardkuma(self, states: Tensor, mask: Tensor, noise: Tensor, limits: tuple[float, ...]) -> tuple[Tensor, Tensor]:
        """``forward`` with ``HardKuma.rsample`` as the draw, from its uniform ``noise [B, T]``,
        compiled (:mod:`rationale_cli.models.native.hardkuma_scan`; ``limits``: the stretch and the shapes'
        clamp)."""
        steps, head_s, cell_z = self.parts(states)
        cell = self.cell
        return hardkuma_scan(steps, head_s, cell_z, cell.weight_hh, cell.bias_lambda, cell.bias, mask, noise, limits)

    def hardkuma_decoded(self, states: Tensor, mask: Tensor, limits: tuple[float, ...], nodes: tuple[Tensor, ...]):
        """``forward`` with the most likely outcome as the draw, compiled: z and P(z != 0) per
        token (:func:`rationale_cli.models.native.hardkuma_scan.hardkuma_decode`; ``nodes``: the mean's
        quadrature, the logs of its nodes and its weights, and the logs of the stretched 0 and 1)."""
        steps, head_s, cell_z = self.parts(states)
        cell = self.cell
        return hardkuma_decode(steps, head_s, cell_z, cell.weight_hh, cell.bias_lambda, cell.bias, mask, limits,
                               *nodes)
