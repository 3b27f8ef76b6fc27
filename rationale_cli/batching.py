"""Padded batches with masks (not packed sequences), grouped by length."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import Tensor

from rationale_cli.records import Record
from rationale_cli.vocab import Vocab


@dataclass
class Batch:
    records: list[Record]
    ids: Tensor
    mask: Tensor
    targets: Tensor | None = None


def make_batch(records: Sequence[Record], vocab: Vocab, task=None, device: str | torch.device = "cpu") -> Batch:
    """Token ids ``[B, T]`` (0 = pad), a float mask and, when a task is given, targets."""
    length = max(len(r.tokens) for r in records)
    ids = torch.zeros(len(records), length, dtype=torch.long)
    for row, record in enumerate(records):
        ids[row, : len(record.tokens)] = torch.tensor(vocab.encode(record.tokens), dtype=torch.long)
    mask = torch.zeros(len(records), length)
    for row, record in enumerate(records):
        mask[row, : len(record.tokens)] = 1.0
    targets = task.targets(records).to(device) if task is not None else None
    return Batch(list(records), ids.to(device), mask.to(device), targets)


def length_batches(records: Sequence[Record], batch_size: int, *, rng: random.Random | None = None) -> Iterator[list[Record]]:
    """Batches of similar length (less padding for recurrent encoders).

    With ``rng``, documents are shuffled, sorted by length within pools of 50
    batches, and the batches shuffled; without, the input order is kept.
    """
    if rng is None:
        for start in range(0, len(records), batch_size):
            yield list(records[start : start + batch_size])
        return
    order = list(records)
    rng.shuffle(order)
    pool = batch_size * 50
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda r: len(r.tokens))
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    yield from batches
