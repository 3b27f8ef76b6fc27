"""The attention baseline of Lei et al. (2016), as reported in Bastings et al. (2019, Table 2).

An attention layer scores every token, ``s_i = v . tanh(W h_i)`` over the
selector encoder's states, and ``alpha = softmax(s)`` over non-pad tokens.
In training the predictor reads the text gated softly by ``alpha / max(alpha)``
(a gate in [0, 1]: the best token passes whole, the others in proportion).
At test time the rationale is the top ``selection`` share of tokens by
attention weight (at least one per document), and the predictor reads only
those: the heuristic the papers compare against.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from models.selection import Selection, Selector, share_budget


def top_share(scores: Tensor, mask: Tensor, share: float) -> Tensor:
    """0/1 mask of the ``floor(share * length + 0.5)`` best tokens per row (at least one).

    Ties are broken by position (earlier first) so decoding is deterministic.
    """
    k = share_budget(mask, share)
    masked = scores.masked_fill(mask <= 0, float("-inf"))
    order = torch.sort(masked, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    positions = torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
    ranks.scatter_(-1, order, positions)
    return (ranks < k.unsqueeze(-1)).to(mask.dtype) * mask


def as_gate(alpha: Tensor) -> Tensor:
    """Attention weights scaled so that the best token of each row passes whole."""
    return alpha / alpha.amax(-1, keepdim=True).clamp_min(1e-12)


class AttentionSelector(Selector):
    """Soft attention in training, top-``selection`` tokens at test time."""

    def __init__(self, input_size: int, selection: float = 0.13, attention_size: int = 100):
        super().__init__()
        if not 0.0 < selection <= 1.0:
            raise ValueError(f"selection must be in (0, 1], got {selection}")
        self.selection = selection
        self.project = nn.Linear(input_size, attention_size)
        self.score = nn.Linear(attention_size, 1, bias=False)

    def attention(self, states: Tensor, mask: Tensor) -> Tensor:
        logits = self.score(torch.tanh(self.project(states))).squeeze(-1)
        return self.normalize(logits, mask)

    def normalize(self, logits: Tensor, mask: Tensor) -> Tensor:
        """Attention weights over non-pad tokens (softmax here)."""
        alpha = torch.softmax(logits.masked_fill(mask <= 0, float("-inf")), dim=-1)
        return torch.nan_to_num(alpha) * mask

    def gate(self, states: Tensor, mask: Tensor) -> Tensor:
        return as_gate(self.attention(states, mask))

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        return Selection.single(self.gate(states, mask))

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode_with_scores(states, mask)[0]

    def token_scores(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.gate(states, mask)

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        alpha = self.attention(states, mask)
        return top_share(alpha, mask, self.selection), as_gate(alpha)
