"""The resume state of a run: everything ``rationale train --resume`` needs to go on
after the last finished epoch exactly as if training had never stopped.

One file, ``resume.safetensors``, rewritten atomically after every epoch: the
model's current weights (``model.*``, Lagrange multipliers and baselines
included, since they are buffers), Adam's moments (``optimizer.*``) and the
torch random state (``rng.*``); the epoch, the best epoch so far, the history,
the learning rates, the batch-order random state and a fingerprint of the
training and validation data go in its JSON metadata. ``model.safetensors``
stays the best epoch's weights, as in every run directory.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from rationale_cli.data.records import Record
from rationale_cli.runtime.atomic import atomic_path
from rationale_cli.runtime.errors import UserError

RESUME = "resume.safetensors"


def data_fingerprint(train: list[Record], valid: list[Record]) -> str:
    """A hash of the tokens and labels of both splits, in order."""
    digest = hashlib.sha256()
    for part in (train, valid):
        digest.update(json.dumps([[r.tokens, r.label] for r in part]).encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def save_checkpoint(out: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    rng: random.Random, device: torch.device, state: dict,
                    random_states: list[dict] | None = None) -> None:
    """Write the resume state after an epoch; ``state`` holds the loop's own counters,
    ``random_states`` every process's torch random states in a distributed run
    (``rng.torch.R``, ``rng.cuda.R`` for rank R)."""
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    for index, slots in optimizer.state_dict()["state"].items():
        for name, value in slots.items():
            tensors[f"optimizer.{index}.{name}"] = torch.as_tensor(value).detach().cpu().contiguous()
    tensors["rng.torch"] = torch.get_rng_state()
    if device.type == "cuda":
        tensors["rng.cuda"] = torch.cuda.get_rng_state(device).cpu()
    if random_states is not None and len(random_states) > 1:
        for index, states in enumerate(random_states):
            tensors.update({f"rng.{kind}.{index}": value for kind, value in states.items()})
    meta = {**state, "lrs": [group["lr"] for group in optimizer.param_groups], "python_rng": rng.getstate()}
    if all("initial_lr" in group for group in optimizer.param_groups):  # a linear schedule's start
        meta["initial_lrs"] = [group["initial_lr"] for group in optimizer.param_groups]
    with atomic_path(out / RESUME) as tmp:
        save_file(tensors, str(tmp), metadata={"state": json.dumps(meta)})


def load_checkpoint(out: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    rng: random.Random, device: torch.device, rank: int = 0) -> dict:
    """Restore the model, optimizer and random states saved by :func:`save_checkpoint`
    (process ``rank``'s own in a distributed run); returns the loop's counters."""
    path = out / RESUME
    try:
        with safe_open(str(path), framework="pt") as handle:
            meta = json.loads(handle.metadata()["state"])
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except (SafetensorError, OSError, KeyError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: missing or unreadable resume state ({err})") from None
    weights = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:
        raise UserError(f"{path}: weights do not match config.json ({str(err).splitlines()[0]})") from None
    saved = optimizer.state_dict()
    slots: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer."):
            _, index, name = key.split(".", 2)
            slots.setdefault(int(index), {})[name] = value
    saved["state"] = slots
    for group, lr in zip(saved["param_groups"], meta.pop("lrs")):
        group["lr"] = lr
    for group, lr in zip(saved["param_groups"], meta.pop("initial_lrs", [])):
        group["initial_lr"] = lr
    optimizer.load_state_dict(saved)
    own = f".{rank}" if f"rng.torch.{rank}" in tensors else ""
    torch.set_rng_state(tensors[f"rng.torch{own}"])
    if device.type == "cuda" and f"rng.cuda{own}" in tensors:
        torch.cuda.set_rng_state(tensors[f"rng.cuda{own}"], device)
    version, internal, gauss = meta.pop("python_rng")
    rng.setstate((version, tuple(internal), gauss))
    return meta
