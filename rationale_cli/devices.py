"""``--device auto|cpu|cuda``."""

from __future__ import annotations

import torch

from rationale_cli.errors import UserError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: this torch build has no CUDA device available")
        return torch.device(name)
    raise UserError(f"--device {name}: expected auto, cpu or cuda")
