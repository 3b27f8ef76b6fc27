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

from torch import Tensor, nn


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

