"""The size of a rationale, one vocabulary for every extractor.

A budget is a share of each document's tokens (``0.13``) or a token count (``10``,
written ``k=10`` too), resolved per document: a share gives ``round(share * length)``
tokens (at least one), a count ``min(count, length)``. What an extractor does with
it differs (a target held in training, a cap, an exact size, a test-time top
share); each extractor's options declare which (:class:`BudgetUse`).
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

import torch
from torch import Tensor

ALLOWED = "a share of the tokens in (0, 1] (e.g. 0.13) or a token count >= 1 (e.g. 10 or k=10)"
COUNT = re.compile(r"^(?:k\s*=\s*)?(\d+)$")
PERCENT = re.compile(r"^(\d+(?:\.\d*)?)\s*%$")


class BudgetUse(enum.Enum):
    """What an extractor does with its budget, declared with the option (``option(..., use=...)``)
    and read by the code that depends on it (the rate a run holds in training,
    :meth:`rationale_cli.models.options.Options.held_budget`); the option's ``role`` says the
    same in words for people, and no code reads those words."""

    HELD = "held"  # a selection rate held in training (a target), while its ``requires`` option is on
    CAP = "cap"  # at most this many tokens
    EXACT = "exact"  # exactly this many tokens
    TEST_TIME = "test-time"  # the size of the rationale at test time only


@dataclass(frozen=True)
class Budget:
    """Exactly one of ``share`` (in (0, 1]) and ``count`` (>= 1)."""

    share: float | None = None
    count: int | None = None

    def __post_init__(self) -> None:
        if (self.share is None) == (self.count is None):
            raise ValueError("a budget is a share or a count")
        if self.share is not None and not 0.0 < self.share <= 1.0:
            raise ValueError(f"{self.share:g} is out of range: expected {ALLOWED}")
        if self.count is not None and self.count < 1:
            raise ValueError(f"{self.count} is out of range: expected {ALLOWED}")

    @classmethod
    def parse(cls, value: Budget | str | int | float) -> Budget:
        """``0.13``, ``"0.13"`` or ``"13%"``: a share; ``10``, ``"10"`` or ``"k=10"``: a count.
        A float is always a share (``1.0`` is every token), an int always a count."""
        if isinstance(value, Budget):
            return value
        if isinstance(value, bool):
            raise ValueError(f"{value!r}: expected {ALLOWED}")
        if isinstance(value, int):
            return cls(count=value)
        if isinstance(value, float):
            return cls(share=value)
        text = str(value).strip()
        if match := COUNT.match(text):
            return cls(count=int(match.group(1)))
        if match := PERCENT.match(text):
            return cls(share=float(match.group(1)) / 100)
        try:
            return cls(share=float(text))
        except ValueError:
            raise ValueError(f"{text!r}: expected {ALLOWED}") from None

    def to_json(self) -> float | int:
        """A float for a share, an int for a count (what :meth:`parse` reads back)."""
        return self.share if self.share is not None else self.count

    def __str__(self) -> str:
        return f"{self.share:g}" if self.share is not None else f"k={self.count}"

    def tokens(self, mask: Tensor) -> Tensor:
        """Tokens per document ``[B]`` (float): the share rounded, at least one, or the
        count; never more than the document's length."""
        lengths = mask.sum(-1)
        if self.share is not None:
            wanted = torch.clamp(torch.floor(lengths * self.share + 0.5), min=1.0)
        else:
            wanted = torch.full_like(lengths, float(self.count))
        return torch.minimum(wanted, lengths)

    def tokens_of(self, length: int) -> int:
        """:meth:`tokens` for one document of ``length`` tokens, without tensors (it is asked per
        document when training batches are cut)."""
        wanted = max(1, math.floor(length * self.share + 0.5)) if self.share is not None else self.count
        return min(wanted, length)

    def rates(self, mask: Tensor) -> Tensor:
        """The share of each document's tokens ``[B]``: the share itself, or count / length."""
        if self.share is not None:
            return mask.new_full(mask.shape[:-1], self.share)
        lengths = mask.sum(-1)
        return torch.minimum(lengths, torch.full_like(lengths, float(self.count))) / lengths.clamp_min(1.0)


def top_k_mask(scores: Tensor, mask: Tensor, k: Tensor) -> Tensor:
    """0/1 mask of the ``k [B]`` highest scores of each row, never padding; ties go to
    the earlier position, so the result is deterministic."""
    masked = scores.masked_fill(mask <= 0, float("-inf"))
    order = torch.sort(masked, dim=-1, descending=True, stable=True).indices
    ranks = torch.empty_like(order)
    positions = torch.arange(scores.shape[-1], device=scores.device).expand_as(order)
    ranks.scatter_(-1, order, positions)
    return (ranks < k.unsqueeze(-1)).to(scores.dtype) * mask
