"""``--device auto|cpu|cuda|cuda:N``."""

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
