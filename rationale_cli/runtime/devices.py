"""``--device auto|cpu|cuda|cuda:N``, and how the CPU treats denormal floats."""

from __future__ import annotations

import re

import torch

from rationale_cli.runtime.errors import UserError

DEVICE_NAME = re.compile(r"auto|cpu|cuda(:\d+)?")


def resolve_device(name: str) -> torch.device:
    if not DEVICE_NAME.fullmatch(name):
        raise UserError(f"--device {name}: expected auto, cpu, cuda or cuda:N")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {name}: this torch build has no CUDA device available")
    return torch.device(name)


def flush_denormals() -> bool:
    """Make the CPU flush denormal floats (below 1.2e-38) to zero, in this thread and the threads
    started after it (PyTorch's own start at its first parallel operation); whether the CPU
    can. Gradients carried back over hundreds of recurrent steps shrink into that range, where
    each operation takes some hundred cycles: the RCNN HardKuma beer run's epochs slowed from
    39 s to 147 s as training went on, and a training step took twice as long. The values
    flushed are far below what any result shows. The ``train`` and ``predict`` commands (and
    predict's worker processes) set it for their process; the Python API leaves the caller's
    setting alone. The compiled loops flush them in their own threads whoever calls them, and
    restore the thread's setting after (``models/native/vector_math.h``)."""
    return torch.set_flush_denormal(True)
