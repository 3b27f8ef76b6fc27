"""Pre-trained word vectors in GloVe or word2vec text format (``.gz`` too).

Both formats hold one word a line followed by its values, separated by single
spaces; word2vec files start with a header line ``N D`` (two integers), which is
recognised and skipped. The file is streamed and only the vectors of vocabulary
words are parsed and kept, so large files cost time, not memory.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from rationale_cli.data.readers.common import iter_lines
from rationale_cli.data.vocab import PAD, UNK, Vocab
from rationale_cli.runtime.errors import UserError, where

INIT_STD = 0.1


def load_vectors(path: str | Path, vocab: Vocab) -> tuple[torch.Tensor, dict]:
    """An embedding matrix ``[len(vocab), D]`` (float32) and coverage statistics.

    Rows of words found in the file hold their vectors; ``<pad>`` is zero; the
    others are drawn from normal(0, 0.1) with a generator seeded 0, so the result
    is deterministic. A word matches its vocabulary entry exactly or, for a
    lower-cased vocabulary, after lower-casing; an exact match wins. Statistics:
    ``dim``, ``found`` (vocabulary words with a vector), ``vocab`` (vocabulary
    words, ``<pad>`` and ``<unk>`` not counted), ``coverage`` (found / vocab)
    and ``file_words`` (vectors in the file). Values are parsed only for
    vocabulary words; every line is checked for the number of values.
    """
    pad, unk = vocab.stoi[PAD], vocab.stoi[UNK]
    dim = None
    file_words = 0
    rows: dict[int, list[float]] = {}
    exact: set[int] = set()
    for line_no, line in iter_lines(path):
        line = line.rstrip(" ")
        if not line:
            continue
        fields = line.count(" ")
        if dim is None:
            head = line.split(" ")
            if line_no == 1 and len(head) == 2 and all(h.isdigit() for h in head):
                dim = int(head[1])
                continue
            dim = fields
        if fields != dim or dim == 0:
            raise UserError(f"{where(path, line_no)}: expected a word and {dim or 'some'} numbers, got {fields} values")
        file_words += 1
        word = line[: line.index(" ")]
        index = vocab.stoi.get(word)
        is_exact = index is not None
        if index is None and vocab.lower:
            index = vocab.stoi.get(word.lower())
        if index is None or index == pad or (index in rows and (index in exact or not is_exact)):
            continue
        try:
            rows[index] = [float(v) for v in line.split(" ")[1:]]
        except ValueError:
            raise UserError(f"{where(path, line_no)}: expected a word and {dim} numbers") from None
        if not all(math.isfinite(v) for v in rows[index]):
            raise UserError(f"{where(path, line_no)}: the vector of {word!r} holds a non-finite number (nan or inf)")
        if is_exact:
            exact.add(index)
    if not file_words:
        raise UserError(f"{path}: no vectors found")

    matrix = torch.randn(len(vocab), dim, generator=torch.Generator().manual_seed(0)) * INIT_STD
    if rows:
        found_rows = list(rows)
        matrix[found_rows] = torch.tensor([rows[i] for i in found_rows], dtype=torch.float32)
    matrix[pad] = 0.0
    words = len(vocab) - 2
    found = len(rows.keys() - {unk})
    stats = {
        "dim": dim,
        "found": found,
        "vocab": words,
        "coverage": found / words if words else 0.0,
        "file_words": file_words,
    }
    return matrix, stats
