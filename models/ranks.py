"""State that must agree across the processes of a distributed run (torch.distributed).

A Lagrange multiplier or a moving-average baseline is updated from a batch statistic;
with several processes each sees its own share of the batch, so the statistic is
averaged over processes first and every process makes the same update. With one
process these are the identity.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor


def distributed() -> bool:
    """Whether this process is in a process group (torchrun, even with one process)."""
    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    return dist.get_world_size() if distributed() else 1


def mean_over_ranks(value: Tensor) -> Tensor:
    """``value`` (detached) averaged over every process of the run."""
    value = value.detach()
    if not distributed():
        return value
    total = value.clone()
    dist.all_reduce(total)
    return total / world_size()


def all_ranks(flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` holds on every process."""
    if not distributed():
        return flag
    value = torch.tensor(int(flag), device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value.item())
