"""Which validation epoch a run keeps: the lowest validation loss, or the lowest among
epochs on a selection-rate target."""

from __future__ import annotations

from dataclasses import dataclass

STARTED = 0.5  # a run holding a rate has started selecting once its kept epoch decodes this share of it


@dataclass(frozen=True)
class Keep:
    """Which validation epoch is the best, the one whose weights are kept: the lowest
    validation loss (``target`` None), or with a selection-rate ``target`` the lowest
    loss among epochs whose decoded validation rate lies within ``tolerance`` of it
    (an epoch off the target ranks after every epoch on it, and nearer is better).
    ``held``: the rate an extractor holds in training, for patience alone (:meth:`reached`)."""

    target: float | None = None
    tolerance: float = 0.02
    held: float | None = None

    def key(self, valid: dict) -> tuple:
        if self.target is None:
            return 0, valid["loss"]
        off = abs(valid["selection_rate"] - self.target)
        return (0, valid["loss"]) if off <= self.tolerance + 1e-12 else (1, off)

    def reached(self, valid: dict) -> bool:
        """Whether an epoch counts for patience: with a target, once the kept epoch is at the
        target rate; with a ``held`` rate, once the kept epoch decodes at least half of it (a
        selector that samples its rate from the first step may decode almost nothing for some
        epochs, until it is confident); else always. Before that, training is still starting,
        and early stopping and learning-rate decay wait."""
        if self.held is not None and valid["selection_rate"] < STARTED * self.held:
            return False
        return self.key(valid)[0] == 0

    def describe(self) -> str:
        return ("validation loss" if self.target is None else
                f"validation loss at a selection rate within {self.tolerance:g} of {self.target:g}")
