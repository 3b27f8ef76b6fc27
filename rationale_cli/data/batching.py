"""Padded batches with masks (not packed sequences), grouped by length."""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import chain
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from rationale_cli.data.records import Record
from rationale_cli.data.vocab import Vocab
from rationale_cli.runtime.errors import UserError

SEP = "[SEP]"  # between a document and its query


@dataclass
class Batch:
    records: list[Record]
    ids: Tensor
    mask: Tensor
    targets: Tensor | None = None
    visible: Tensor | None = None  # [B, T] 1 on query positions: always read, never selected
    gold: Tensor | None = None  # [B, T] the gold rationale's tokens (0 for documents without gold), when asked
    golden: Tensor | None = None  # [B] 1 for a document with a gold rationale, beside ``gold``

    @property
    def selectable(self) -> Tensor:
        """The positions a rationale may hold ``[B, T]``: the documents' tokens, not the query."""
        return self.mask if self.visible is None else self.mask - self.visible

    def sentences(self) -> Tensor:
        """Each position's sentence index ``[B, T]`` (:meth:`Record.sentence_spans`; query and
        padding positions in the last sentence), made when a decoding asks for it."""
        index = torch.zeros(self.ids.shape, dtype=torch.long)
        for row, record in enumerate(self.records):
            spans = record.sentence_spans()
            for number, (start, end) in enumerate(spans):
                index[row, start:end] = number
            index[row, spans[-1][1] if spans else 0:] = max(len(spans) - 1, 0)
        return index.to(self.ids.device)


def model_tokens(record: Record) -> list[str]:
    """What the model reads: the document, then ``[SEP]`` and the query when it has one.
    The query comes after the document so that token positions stay the document's."""
    return record.tokens + [SEP] + record.query if record.query else record.tokens


TOKENS_PER_DOCUMENT = 256  # a batch of n documents holds at most n times this many padded positions
MAX_DOCUMENT_TOKENS = 1 << 16  # a longer document is refused: no batch holds more positions at test time
MAX_TRAINING_TOKENS = 1 << 18  # padded positions of a training batch (per process), whatever --batch-size
# the memory of the extractor's tables in a training batch, padded (:meth:`Selector.table_bytes`)
MAX_TABLE_BYTES = 5 << 29  # 2.5 GiB


def model_length(record: Record) -> int:
    """How many tokens the model reads for ``record`` (:func:`model_tokens`)."""
    return len(record.tokens) + (len(record.query) + 1 if record.query else 0)


def checked_length(record: Record) -> int:
    """:func:`model_length`, or a :class:`UserError` naming a document longer than
    :data:`MAX_DOCUMENT_TOKENS` (a file without line breaks reads as one such document)."""
    length = model_length(record)
    if length > MAX_DOCUMENT_TOKENS:
        raise UserError(f"{record.where}: a document of {length:,} tokens; at most {MAX_DOCUMENT_TOKENS:,} are "
                        "read (is the file missing line breaks? split longer documents into parts)")
    return length


def capped_batches(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """Batches in input order of at most ``size`` documents and ``size * TOKENS_PER_DOCUMENT``
    padded positions (never more than :data:`MAX_DOCUMENT_TOKENS`), so that long documents
    make smaller batches and memory stays bounded whatever the lengths and ``size``; a document
    longer than that is a batch of its own."""
    return cut(records, size, min(size * TOKENS_PER_DOCUMENT, MAX_DOCUMENT_TOKENS))


def cut(records: Iterable[Record], size: int, budget: int,
        tables: Callable[[int], int] | None = None) -> Iterator[list[Record]]:
    """``records`` in input order in parts of at most ``size`` documents and ``budget`` padded
    positions (a document longer than ``budget`` alone); with ``tables`` (the bytes of the
    extractor's tables for a document length), also at most :data:`MAX_TABLE_BYTES` of them,
    padded. A document longer than :data:`MAX_DOCUMENT_TOKENS` is refused."""
    batch: list[Record] = []
    longest = 0
    for record in records:
        length = checked_length(record)
        widest = max(longest, length)
        if batch and (len(batch) == size or widest * (len(batch) + 1) > budget
                      or (tables is not None and tables(widest) * (len(batch) + 1) > MAX_TABLE_BYTES)):
            yield batch
            batch, widest = [], length
        batch.append(record)
        longest = widest
    if batch:
        yield batch


def documents_per_batch(length: int, tables: Callable[[int], int]) -> int:
    """How many documents of ``length`` tokens a training batch holds at most by their tables."""
    return max(1, MAX_TABLE_BYTES // max(1, tables(length)))


def made_batches(records: Iterable[Record], vocab: Vocab, size: int, device: str | torch.device = "cpu",
                 task=None) -> Iterator[tuple[list[Record], Batch]]:
    """Each of the :func:`capped_batches` of ``records`` with its :func:`make_batch`; with ``task``,
    a batch whose documents all have labels carries targets."""
    for chunk in capped_batches(records, size):
        labelled = task is not None and all(record.label is not None for record in chunk)
        yield chunk, make_batch(chunk, vocab, task if labelled else None, device)


def make_batch(records: Sequence[Record], vocab: Vocab, task=None, device: str | torch.device = "cpu",
               gold: bool = False) -> Batch:
    """Token ids ``[B, T]`` (0 = pad), a float mask, the query positions (``visible``, None
    when no document has a query), when a task is given, targets, and with ``gold`` the gold
    rationales' masks and which documents have one (rationale supervision)."""
    read = [model_tokens(r) for r in records]  # model_length(r) tokens each
    lengths = torch.tensor([len(tokens) for tokens in read])
    real = torch.arange(int(lengths.max())) < lengths.unsqueeze(1)
    ids = torch.zeros(real.shape, dtype=torch.long)
    ids[real] = torch.from_numpy(np.array(vocab.encode(list(chain.from_iterable(read))), dtype=np.int64))
    mask = real.float()
    visible = None
    if any(r.query for r in records):
        visible = torch.zeros(real.shape)
        for row, (record, tokens) in enumerate(zip(records, read)):
            visible[row, len(record.tokens) : len(tokens)] = 1.0
        visible = visible.to(device)
    targets = task.targets(records).to(device) if task is not None else None
    batch = Batch(list(records), ids.to(device), mask.to(device), targets, visible)
    if gold:
        masks = torch.zeros(real.shape)
        for row, record in enumerate(records):
            if record.rationale is not None:
                masks[row, : len(record.tokens)] = torch.tensor(record.gold_mask(), dtype=torch.float32)
        batch.gold = masks.to(device)
        batch.golden = torch.tensor([float(r.rationale is not None) for r in records], device=device)
    return batch


def by_class(records: Sequence[Record]) -> dict[str, list[Record]]:
    """The documents of each class, in their order; one error line for a document without a class
    name (a score, or no label), which ``--balance-classes`` cannot balance."""
    classes: dict[str, list[Record]] = {}
    for record in records:
        if not isinstance(record.label, str):
            raise UserError(f"{record.where}: --balance-classes balances classes, but this document's label is "
                            f"{record.label!r}, not a class name")
        classes.setdefault(record.label, []).append(record)
    return classes


def balanced_draw(records: Sequence[Record], rng: random.Random) -> list[Record]:
    """Every document of the rarest class and a fresh draw (with ``rng``, without replacement) of
    as many of each other class: one epoch of ``--balance-classes``, so unbalanced data trains
    on balanced epochs and, over the epochs, on every document."""
    classes = by_class(records)
    fewest = min(len(members) for members in classes.values())
    return list(chain.from_iterable(members if len(members) == fewest else rng.sample(members, fewest)
                                    for members in classes.values()))


def balanced_size(records: Sequence[Record]) -> int:
    """How many documents :func:`balanced_draw` gives: the rarest class's count, once per class."""
    classes = by_class(records)
    return len(classes) * min(len(members) for members in classes.values())


def length_batches(records: Sequence[Record], batch_size: int, *, rng: random.Random | None = None,
                   budget: int = MAX_TRAINING_TOKENS,
                   tables: Callable[[int], int] | None = None) -> Iterator[list[Record]]:
    """Batches of similar length (less padding for recurrent encoders) of at most
    ``batch_size`` documents and ``budget`` padded positions, and with ``tables`` the bytes of
    the extractor's tables (:func:`cut`: a batch of long documents is split, a document longer than
    :data:`MAX_DOCUMENT_TOKENS` refused).

    With ``rng``, documents are shuffled, sorted by length within pools of 50
    batches, and the batches shuffled; without, the input order is kept.
    """
    if rng is None:
        yield from cut(records, batch_size, budget, tables)
        return
    order = list(records)
    rng.shuffle(order)
    pool = batch_size * 50
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda r: len(r.tokens))
        batches += cut(chunk, batch_size, budget, tables)
    rng.shuffle(batches)
    yield from batches
