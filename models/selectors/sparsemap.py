"""SparseMAP rationales: deterministic sparse marginalization over masks with a
budget (Correia et al., 2020, section 4.2; the distribution is in
:mod:`models.distributions.sparsemap`).

Token scores ``t_i`` come from a linear layer over the selector encoder's states;
with ``pairwise``, a coherence factor adds a learned score ``w_i`` (a linear layer
over ``[h_i; h_{i+1}]``) for each pair of adjacent selected tokens.
Each document's budget is ``B = round(selection * length)`` (at least 1). SparseMAP
returns a handful of masks with at most B tokens and their weights; the trainer
evaluates the predictor on each mask and sums the losses weighted by xi: no
sampling, no relaxation. The support size is reported (it adapts during training:
the paper's observation). Test time: the most probable mask; token scores are the
marginals ``mu = sum_z xi_z z``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.distributions.sparsemap import sparsemap
from models.selection import MaskSetSelector


class SparseMAPSelector(MaskSetSelector):
    def __init__(self, input_size: int, selection: float = 0.13, pairwise: bool = False):
        super().__init__(input_size, selection)
        self.pair = nn.Linear(2 * input_size, 1) if pairwise else None
        if self.pair is not None:  # start without coherence scores
            nn.init.zeros_(self.pair.weight)
            nn.init.zeros_(self.pair.bias)

    def solve(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        pair = None
        if self.pair is not None:
            pair = self.pair(torch.cat([states[:, :-1], states[:, 1:]], -1)).squeeze(-1)
        return sparsemap(self.score(states).squeeze(-1), mask, self.budgets(mask), pair)

    def support_stats(self, weights: Tensor, masks: Tensor, mask: Tensor) -> dict[str, float]:
        selected = (weights.unsqueeze(-1) * masks).sum((1, 2)) / mask.sum(-1).clamp_min(1.0)
        return {**super().support_stats(weights, masks, mask), "selected": float(selected.mean())}
