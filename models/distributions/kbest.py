"""The K best rationale masks under a budget, for top-k sparsemax (Correia et al., 2020,
section 4.1).

Masks z in {0, 1}^n with at most B ones, scored ``s(z) = <theta, z>``. A k-best
dynamic program over (position, count) keeps the K best partial scores of every
state: token i either stays out (same count) or comes in (count + 1, score +
theta_i), and the K best of those 2K candidates survive (``torch.topk``),
vectorized over the batch, the counts and the K ranks. Back-pointers then give the
K masks. Padding is never selected; a row with fewer than K masks fills the rest
with impossible ones (score ``NEG``), which sparsemax gives weight 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

NEG = -1e9


@torch.no_grad()
def k_best_masks(theta: Tensor, mask: Tensor, budgets: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """``(masks [B, K, T], scores [B, K])``: the K best masks of each row with at most
    ``budgets [B]`` ones, best first (scores ``NEG`` for missing ones)."""
    batch, length = theta.shape
    most = int(budgets.max()) if budgets.numel() else 0
    on = theta.masked_fill(mask <= 0, NEG)
    best = theta.new_full((batch, most + 1, k), NEG)  # best[b, j, r]: r-th best score with count j
    best[:, 0, 0] = 0.0
    pointers = []
    for i in range(length):
        came_in = torch.cat([best.new_full((batch, 1, k), NEG), best[:, :-1] + on[:, i, None, None]], 1)
        best, pointer = torch.cat([best, came_in], 2).topk(k, dim=2)  # pointer >= k: token i came in
        pointers.append(pointer)
    counts = torch.arange(most + 1, device=theta.device)
    allowed = (counts[None, :] <= budgets[:, None]).unsqueeze(-1)
    scores, flat = best.masked_fill(~allowed, NEG).flatten(1).topk(k, dim=1)
    count, rank = flat // k, flat % k
    masks = theta.new_zeros(batch, k, length)
    for i in range(length - 1, -1, -1):
        pointer = pointers[i].gather(1, count.unsqueeze(-1).expand(-1, -1, k)).gather(2, rank.unsqueeze(-1))[..., 0]
        took = pointer >= k
        masks[:, :, i] = took
        count, rank = (count - took.long()).clamp_min(0), pointer % k  # impossible paths stay in range
    return masks * mask.unsqueeze(1), scores
