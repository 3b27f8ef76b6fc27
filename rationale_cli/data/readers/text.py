"""Plain text: one document a line, no labels (input for predictions)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from rationale_cli.data.readers.common import iter_lines
from rationale_cli.data.records import Record
from rationale_cli.data.tokenize import tokenize
from rationale_cli.runtime.errors import where


def iter_text(path: str | Path) -> Iterator[Record]:
    """Each non-blank line as a tokenized document with the line number as id."""
    for line_no, line in iter_lines(path):
        tokens, offsets = tokenize(line)
        if tokens:
            yield Record(id=str(line_no), tokens=tokens, text=line, offsets=offsets, source=where(path, line_no))
