"""The one interface of the distributions over rationale masks.

A distribution over 0/1 masks ``z [B, T]`` of each document in a batch (padding is
never selected), in the shape of a structured distribution of pytorch-struct
(Rush, 2020): every quantity is computed at most once per object and kept, so a
selector that needs a sample, the marginals and the entropy pays for one pass.

- ``log_partition`` [B]: ``A(theta) = log sum_z exp(score(z))``, always in the natural
  parameters (the scores themselves, not logits of independent Bernoullis);
- ``marginals`` [B, T]: ``P(z_i = 1)`` = ``dA / du_i``, differentiable;
- ``argmax`` [B, T]: the best mask; ``topk(K)``: the K best masks and their scores;
- ``sample(generator)``: an exact sample [B, T];
- ``entropy`` [B]: ``A - E[score(z)]``;
- ``log_prob(z)`` [B]: ``score(z) - A``.
"""

from __future__ import annotations

from functools import cached_property

import torch
from torch import Tensor


class MaskDistribution:
    """Subclasses define ``mask`` and the computations below; the properties cache them."""

    mask: Tensor

    @cached_property
    def log_partition(self) -> Tensor:
        return self.compute_log_partition()

    @cached_property
    def marginals(self) -> Tensor:
        return self.compute_marginals()

    @cached_property
    def argmax(self) -> Tensor:
        with torch.no_grad():
            return self.compute_argmax()

    @cached_property
    def entropy(self) -> Tensor:
        return self.compute_entropy()

    def is_cached(self, name: str) -> bool:
        """Whether ``name`` (a property above) has been computed already."""
        return name in self.__dict__

    def keep(self, **values: Tensor) -> None:
        """Cache values computed on the way to something else (one pass giving several)."""
        self.__dict__.update(values)

    def log_prob(self, z: Tensor) -> Tensor:
        """``log p(z) = score(z) - A`` per row [B] for masks ``z [B, T]``."""
        return self.score(z) - self.log_partition

    def score(self, z: Tensor) -> Tensor:  # pragma: no cover - abstract
        """The unnormalized log-weight of masks ``z [B, T]`` [B]."""
        raise NotImplementedError

    def sample(self, generator: torch.Generator | None = None) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def topk(self, count: int) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        """``(masks [B, K, T], scores [B, K])``, best first."""
        raise NotImplementedError

    def compute_log_partition(self) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def compute_marginals(self) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def compute_argmax(self) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def compute_entropy(self) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError
