"""Bidirectional bigram RCNN encoder (Lei et al., 2016; Bastings et al., 2019, App. B.1.1).

One direction, for input x_t and gate m_t in [0, 1] (padding mask times the
rationale z; Bastings et al. 2019, Sec. 5, ``h_i = rnn(h_{i-1}, z_i e_i)``)::

    lambda_t = sigmoid(W^l x_t + U^l h_{t-1} + b^l)
    c1'_t    = lambda_t * c1_{t-1} + (1 - lambda_t) * W1 x_t
    c2'_t    = lambda_t * c2_{t-1} + (1 - lambda_t) * (c1_{t-1} + W2 x_t)
    h'_t     = tanh(c2'_t + b)
    s_t      = m_t * s'_t + (1 - m_t) * s_{t-1}      for s in (c1, c2, h)

so a step with m_t = 0 carries the state over (padding and unselected tokens
are skipped, as Lei et al. and Bastings et al. do). The backward direction runs
the same recurrence, with its own weights, on the reversed sequence. States are
``[h_fwd_t ; h_bwd_t]`` (zero where m = 0); the summary is the final state of
each direction, ``[h_fwd_T ; h_bwd_1]``.

The time loop and its hand-written backward live in
:mod:`rationale_cli.models.encoders.recurrence`. :class:`RCNNCell` is the same cell one step
at a time, for loops whose next input depends on the previous output (the
dependent HardKuma selector, Bastings et al. 2019, Sec. 5 / App. B.1.2).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rationale_cli.models.encoders.base import RecurrentEncoder, TokenRows
from rationale_cli.models.encoders.recurrence import merge_directions, rcnn_scan, stack_directions


class RCNNCell(nn.Module):
    """One mask-gated RCNN step: ``cell(x_t [B,In], (c1, c2, h), m_t [B] or None) -> (c1, c2, h)``.

    ``initial(batch, like)`` gives the zero state (dtype/device of ``like``);
    ``state[-1]`` is h. With ``m_t`` the step is ``s_t = m_t s'_t + (1 - m_t) s_{t-1}``
    like :class:`RCNNEncoder`; stepping it over a sequence gives a
    unidirectional encoder's states with the same weights.
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(input_size, 3 * hidden_size))
        self.bias_lambda = nn.Parameter(torch.zeros(hidden_size))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        nn.init.uniform_(self.weight_ih, -1 / math.sqrt(input_size), 1 / math.sqrt(input_size))
        nn.init.uniform_(self.weight_hh, -1 / math.sqrt(hidden_size), 1 / math.sqrt(hidden_size))

    def initial(self, batch: int, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        zero = like.new_zeros(batch, self.hidden_size)
        return zero, zero, zero

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor, Tensor], mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        return self.step(x @ self.weight_ih, state, mask)

    def step(
        self, p: Tensor, state: tuple[Tensor, Tensor, Tensor], mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The same step from the input projection ``p = x @ weight_ih`` [B, 3H] (callers
        that know most of x in advance project it for all steps at once)."""
        H = self.hidden_size
        c1, c2, h = state
        lam = torch.sigmoid(torch.addmm(p[:, :H] + self.bias_lambda, h, self.weight_hh))
        c1_new = torch.lerp(p[:, H : 2 * H], c1, lam)  # lam c1 + (1 - lam) W1 x
        c2_new = torch.lerp(c1 + p[:, 2 * H :], c2, lam)  # lam c2 + (1 - lam) (c1 + W2 x)
        h_new = torch.tanh(c2_new + self.bias)
        if mask is None:
            return c1_new, c2_new, h_new
        m = mask.to(p.dtype).unsqueeze(-1)
        return torch.lerp(c1, c1_new, m), torch.lerp(c2, c2_new, m), torch.lerp(h, h_new, m)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class RCNNEncoder(RecurrentEncoder):
    """Masked (Bi)RCNN; ``output_size = hidden_size * (2 if bidirectional else 1)``.

    Parameters per direction d: ``weight_ih[d] = [W^l | W1 | W2]`` (input x 3H),
    ``bias_lambda[d] = b^l``, ``weight_hh[d] = U^l`` (H x H, applied as h @ U),
    ``bias[d] = b``.
    """

    def __init__(self, input_size: int, hidden_size: int, *, bidirectional: bool = True, dropout: float = 0.0):
        super().__init__(input_size, hidden_size, bidirectional=bidirectional, dropout=dropout)
        D = self.directions
        self.weight_ih = nn.Parameter(torch.empty(D, input_size, 3 * hidden_size))
        self.bias_lambda = nn.Parameter(torch.zeros(D, hidden_size))
        self.weight_hh = nn.Parameter(torch.empty(D, hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.zeros(D, hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.uniform_(self.weight_ih, -1 / math.sqrt(self.input_size), 1 / math.sqrt(self.input_size))
        nn.init.uniform_(self.weight_hh, -1 / math.sqrt(self.hidden_size), 1 / math.sqrt(self.hidden_size))
        nn.init.zeros_(self.bias_lambda)
        nn.init.zeros_(self.bias)

    def scan(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None,
             states: bool = True) -> tuple[Tensor | None, Tensor]:
        # only the lambda gate has an input-side bias
        D, H = self.bias_lambda.shape
        bias_ih = torch.cat((self.bias_lambda, self.bias_lambda.new_zeros(D, 2 * H)), -1)
        P, M = stack_directions(x, mask, self.weight_ih, bias_ih, tokens)
        return merge_directions(rcnn_scan(P, M, self.weight_hh, self.bias), mask, states)
