"""The one interface every extractor implements (see the project's design notes).

A selector maps token states and a padding mask to a :class:`Selection`: a
weighted set of masks. One sample is ``S = 1``; sparse marginalization returns
its whole support. The trainer then computes

    loss = (weights * task_loss).sum(-1).mean() + penalty + surrogate(task_loss)

with no special case per method.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn


def share_budget(mask: Tensor, share: float) -> Tensor:
    """``round(share * length)`` tokens per row, at least one and at most the length ``[B]``."""
    lengths = mask.sum(-1)
    return torch.minimum(torch.clamp(torch.floor(lengths * share + 0.5), min=1.0), lengths)


@dataclass
class Selection:
    """Masks ``[B, S, T]`` in [0, 1], weights ``[B, S]`` (rows sum to 1), a scalar
    penalty, an optional score-function ``surrogate(loss [B, S])`` built from
    detached losses, and float ``stats`` for logging."""

    masks: Tensor
    weights: Tensor
    penalty: Tensor
    surrogate: Callable[[Tensor], Tensor | None] | None = None
    stats: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def single(mask: Tensor, penalty: Tensor | None = None, **stats: float) -> Selection:
        """One mask ``[B, T]`` with weight 1."""
        batch = mask.shape[0]
        return Selection(
            masks=mask.unsqueeze(1),
            weights=mask.new_ones(batch, 1),
            penalty=penalty if penalty is not None else mask.new_zeros(()),
            stats=dict(stats),
        )


class Selector(nn.Module):
    """Base class of extractors.

    ``needs_states``: whether the model must run a selector encoder for it
    (``full`` does not). Subclasses implement :meth:`forward` (training,
    stochastic where the method samples) and :meth:`decode` (the deterministic
    test-time rationale, a mask ``[B, T]``); :meth:`token_scores` gives a
    per-token score in [0, 1] shown to users next to the rationale.
    :meth:`decode_with_scores` gives both; selectors that get them from one
    pass (a sequential loop, one set of utilities) override it.
    """

    needs_states: bool = True

    def forward(self, states: Tensor, mask: Tensor) -> Selection:  # pragma: no cover - abstract
        raise NotImplementedError

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def token_scores(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode(states, mask)

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        return self.decode(states, mask), self.token_scores(states, mask)



class MaskSetSelector(Selector):
    """Sparse marginalization over whole masks (Correia et al., 2020): token scores from a
    linear layer, at most ``round(selection * length)`` tokens per mask, and a subclass's
    :meth:`solve` returning weights ``[B, S]`` over masks ``[B, S, T]``. Training sums the
    task loss over the masks with their weights and reports the support size; test time
    takes the most probable mask, token scores are the marginals ``sum_z xi_z z``."""

    def __init__(self, input_size: int, selection: float = 0.13):
        super().__init__()
        if not 0.0 < selection <= 1.0:
            raise ValueError(f"selection must be in (0, 1], got {selection}")
        self.selection = selection
        self.score = nn.Linear(input_size, 1)

    def solve(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def budgets(self, mask: Tensor) -> Tensor:
        return share_budget(mask, self.selection).long()

    def support_stats(self, weights: Tensor, masks: Tensor, mask: Tensor) -> dict[str, float]:
        return {"support": float((weights > 0).sum(-1).float().mean())}

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        weights, masks = self.solve(states, mask)
        with torch.no_grad():
            stats = self.support_stats(weights, masks, mask)
        return Selection(masks=masks, weights=weights, penalty=weights.new_zeros(()), stats=stats)

    def decode(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode_with_scores(states, mask)[0]

    def token_scores(self, states: Tensor, mask: Tensor) -> Tensor:
        return self.decode_with_scores(states, mask)[1]

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        weights, masks = self.solve(states, mask)
        best = masks.gather(1, weights.argmax(-1)[:, None, None].expand(-1, 1, masks.shape[-1]))[:, 0]
        return best * mask, (weights.unsqueeze(-1) * masks).sum(1) * mask
