"""The straightforward vectorized k-subset program, kept as the speed baseline of
``ksubset_speed.py``: the DP of SIMPLE's Algorithm 1 unrolled over positions in
log space, batched, with marginals and their backward pass by autograd through the
unrolled loop (create_graph), and the sample by walking the table back (Algorithm 2).
Exact, like the library's programs; only the way it is computed differs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

NEG = -1e9


def table(logits: Tensor, mask: Tensor, max_k: int) -> Tensor:
    """``alpha[i, b, j] = log P(sum of the first i tokens = j)`` ``[T+1, B, K+1]``."""
    batch, length = logits.shape
    log_on, log_off = F.logsigmoid(logits), F.logsigmoid(-logits)
    alpha = logits.new_full((batch, max_k + 1), NEG)
    alpha[:, 0] = 0.0
    pad = logits.new_full((batch, 1), NEG)
    rows = [alpha]
    for i in range(length):
        off = alpha + log_off[:, i : i + 1]
        on = torch.cat([pad, alpha[:, :-1]], 1) + log_on[:, i : i + 1]
        alpha = torch.where(mask[:, i : i + 1] > 0, torch.logsumexp(torch.stack([off, on]), 0), alpha)
        rows.append(alpha)
    return torch.stack(rows)


def marginals(logits: Tensor, mask: Tensor, k: Tensor) -> Tensor:
    """``d/dtheta [log P(sum z = k) - sum log(1 - p)]``, differentiable."""
    max_k = int(k.max())
    log_z = table(logits, mask, max_k)[-1].gather(1, k.unsqueeze(1)).sum()
    natural = log_z - (F.logsigmoid(-logits) * mask).sum()
    (mu,) = torch.autograd.grad(natural, logits, create_graph=True)
    return mu * mask


@torch.no_grad()
def sample(logits: Tensor, mask: Tensor, k: Tensor) -> Tensor:
    alpha = table(logits, mask, int(k.max()))
    log_on = F.logsigmoid(logits)
    batch, length = logits.shape
    rows = torch.arange(batch, device=logits.device)
    j, z = k.clone(), torch.zeros_like(logits)
    for i in range(length - 1, -1, -1):
        p_on = torch.exp(alpha[i][rows, (j - 1).clamp_min(0)] + log_on[:, i] - alpha[i + 1][rows, j])
        take = torch.rand(batch, device=logits.device) < torch.where(j > 0, p_on, 0.0) * mask[:, i]
        z[:, i] = take.to(z.dtype)
        j = j - take.long()
    return z
