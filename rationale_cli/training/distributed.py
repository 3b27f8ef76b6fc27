"""Training on several processes with torch DistributedDataParallel, launched by torchrun.

torchrun sets ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK``; :func:`start` joins the
process group (gloo on the CPU, NCCL on GPUs, one GPU per process). Every process
reads the same batches in the same order (the same seed) and trains on its own share
of each (``batch_size`` documents: the effective batch is ``batch_size x processes``);
DDP averages the gradients. Rank 0 validates and tells the others the result, writes
the run directory and prints. Without torchrun nothing here does anything.
"""

from __future__ import annotations

import inspect
import os
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from rationale_cli.models.ranks import distributed, world_size


def rank() -> int:
    return dist.get_rank() if distributed() else 0


def launched() -> bool:
    """Whether torchrun started this process (it sets ``RANK`` and ``WORLD_SIZE``)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


@contextmanager
def process_group(device: str) -> Iterator[None]:
    """Join the run's process group for the block when torchrun launched this process
    (``device`` decides the backend); otherwise do nothing. With one process, training
    then goes through DDP and its collectives, to the same result."""
    if not launched() or dist.is_initialized():
        yield
        return
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        yield
        dist.barrier()  # leave together: a rank torn down while rank 0 still writes can abort
    finally:
        dist.destroy_process_group()


def local_device(device: torch.device) -> torch.device:
    """This process's GPU in a distributed run on GPUs (``LOCAL_RANK``), else ``device``."""
    if device.type == "cuda" and distributed():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def wrap(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``model`` in DistributedDataParallel when there are several processes. Buffers (the
    Lagrange multipliers, moving baselines) are not copied from rank 0 at each forward:
    every process updates them identically (:mod:`rationale_cli.models.ranks`)."""
    if not distributed():
        return model
    names = inspect.signature(DistributedDataParallel.__init__).parameters
    buffers = {"forward_sync_buffers": False} if "forward_sync_buffers" in names else {"broadcast_buffers": False}
    return DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None, **buffers)


def from_rank_zero(value: Any) -> Any:
    """Rank 0's ``value`` on every process (a picklable object)."""
    if not distributed():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def share(batch: Sequence, index: int, processes: int) -> list:
    """Process ``index``'s documents of a global batch: every ``processes``-th one, so
    each process gets documents of every length in it."""
    return list(batch[index::processes])


def gather_random_states(device: torch.device) -> list[dict[str, torch.Tensor]]:
    """Every process's torch random states (CPU, and CUDA on a GPU), in rank order."""
    state = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device).cpu()
    if not distributed():
        return [state]
    states: list = [None] * world_size()
    dist.all_gather_object(states, state)
    return states
