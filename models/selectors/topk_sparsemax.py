"""Top-k sparsemax rationales: sparse marginalization over the K best masks
(Correia et al., 2020, section 4.1; the enumeration is in :mod:`models.distributions.kbest`).

Token scores theta come from a linear layer over the selector encoder's states; a
mask's score is ``<theta, z>`` and each document's budget is at most
``round(selection * length)`` tokens. The K best masks (``top_masks``) are
enumerated exactly, ``xi = sparsemax(their scores)``, and the trainer sums the
task loss over the masks with ``xi > 0``: deterministic, no sampling. Whenever fewer
than K masks get weight, xi equals sparsemax over all masks (the paper's
certificate); the run reports that share as ``exact`` and the support size.
Test time: the best mask.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.distributions.kbest import NEG, k_best_masks
from models.selection import Selection, Selector


class TopKSparsemaxSelector(Selector):
    def __init__(self, input_size: int, selection: float = 0.13, top_masks: int = 10):
        super().__init__()
        if not 0.0 < selection <= 1.0 or top_masks < 1:
            raise ValueError(f"need selection in (0, 1] and top_masks >= 1, got {selection}, {top_masks}")
        self.selection, self.top_masks = selection, top_masks
        self.score = nn.Linear(input_size, 1)

    def solve(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        from entmax import sparsemax  # imported here so the other extractors never need it

        theta = self.score(states).squeeze(-1)
        budgets = torch.clamp(torch.floor(mask.sum(-1) * self.selection + 0.5), min=1.0).long()
        masks, best = k_best_masks(theta.detach(), mask, budgets, self.top_masks)
        scores = (masks * theta.unsqueeze(1)).sum(-1).masked_fill(best <= NEG / 2, NEG)
        return sparsemax(scores, dim=-1), masks

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        weights, masks = self.solve(states, mask)
        with torch.no_grad():
            support = (weights > 0).sum(-1).float()
        return Selection(masks=masks, weights=weights, penalty=weights.new_zeros(()),
                         stats={"support": float(support.mean()),
                                "exact": float((support < self.top_masks).float().mean())})

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode_with_scores(states, mask)[0]

    def token_scores(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode_with_scores(states, mask)[1]

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """The best mask and the marginals ``sum_z xi_z z``."""
        weights, masks = self.solve(states, mask)
        return masks[:, 0] * mask, (weights.unsqueeze(-1) * masks).sum(1) * mask
