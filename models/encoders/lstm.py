"""(Bi)LSTM encoder with mask-gated steps (Bastings et al., 2019, Sec. 5).

One direction, for input x_t and gate m_t in [0, 1] (padding mask times the
rationale z; ``h_i = rnn(h_{i-1}, z_i e_i)``), standard LSTM cells
(Hochreiter & Schmidhuber, 1997)::

    [i; f; o; g]_t = [sigma; sigma; sigma; tanh](W x_t + U h_{t-1} + b)
    c'_t = f_t * c_{t-1} + i_t * g_t,     h'_t = o_t * tanh(c'_t)
    s_t  = m_t * s'_t + (1 - m_t) * s_{t-1}      for s in (c, h)

so a step with m_t = 0 carries the state over (padding and unselected tokens
are skipped). ``torch.nn.LSTM`` cannot do this for gaps inside a sequence
(packing only removes trailing padding), hence our own loop, in
:mod:`rationale_cli.models.encoders.recurrence`. States are ``[h_fwd_t ; h_bwd_t]`` (zero
where m = 0); the summary is ``[h_fwd_T ; h_bwd_1]``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rationale_cli.models.encoders.base import RecurrentEncoder, TokenRows
from rationale_cli.models.encoders.recurrence import lstm_scan, merge_directions, stack_directions


class LSTMEncoder(RecurrentEncoder):
    """Masked (Bi)LSTM; ``output_size = hidden_size * (2 if bidirectional else 1)``.

    Parameters per direction d (gates ordered i, f, o, g): ``weight_ih[d]``
    (input x 4H), ``bias[d]`` (4H), ``weight_hh[d]`` (H x 4H, applied as h @ U).
    Initialised like ``torch.nn.LSTM``: uniform in +-1/sqrt(H).
    """

    def __init__(self, input_size: int, hidden_size: int, *, bidirectional: bool = True, dropout: float = 0.0):
        super().__init__(input_size, hidden_size, bidirectional=bidirectional, dropout=dropout)
        D = self.directions
        self.weight_ih = nn.Parameter(torch.empty(D, input_size, 4 * hidden_size))
        self.weight_hh = nn.Parameter(torch.empty(D, hidden_size, 4 * hidden_size))
        self.bias = nn.Parameter(torch.empty(D, 4 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.hidden_size)
        for p in (self.weight_ih, self.weight_hh, self.bias):
            nn.init.uniform_(p, -bound, bound)

    def scan(self, x: Tensor, mask: Tensor, tokens: TokenRows | None = None,
             states: bool = True) -> tuple[Tensor | None, Tensor]:
        P, M = stack_directions(x, mask, self.weight_ih, self.bias, tokens)
        return merge_directions(lstm_scan(P, M, self.weight_hh), mask, states)
