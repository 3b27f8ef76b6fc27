"""CSV and TSV files through pandas (imported on first use), read in chunks so memory stays bounded.

One document a row, with a header line naming the columns: ``text_col`` (raw
text, tokenized with offsets), ``label_col`` (none when ``label_col`` is None;
with ``label_required`` False, read where the table has it, an empty cell
leaving the label unknown) and ``id_col`` (a column the table must have, except
``id``, which is read where present; '' or a missing ``id``: the 1-based row
number). Cells are read as strings, exactly as written. A label column whose
filled cells in the first chunk pandas reads as floats (e.g. ``0.8``) holds
regression scores in [0, 1]; any other (words, integer class ids) holds class
names. TSV cells are never quoted, so
quote characters in text stay as they are. Error line numbers count the header
as line 1 (a quoted cell spanning lines shifts them).
"""

from __future__ import annotations

import csv
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from rationale_cli.data.readers.common import check_score
from rationale_cli.data.records import Record
from rationale_cli.data.tokenize import tokenize
from rationale_cli.runtime.errors import UserError, where

if TYPE_CHECKING:
    import pandas as pd

CHUNK_ROWS = 10_000


def is_score_column(values: pd.Series) -> bool:
    """True when pandas would read these cells as a float column."""
    import pandas as pd

    filled = values[values.str.strip() != ""]
    try:
        return len(filled) > 0 and pd.to_numeric(filled).dtype.kind == "f"
    except ValueError:
        return False


def next_chunk(chunks):
    """The next chunk of rows, or None at the end; pandas' warning for a row with extra
    fields (whose data it drops) raised as an error, only while the chunk is read."""
    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        return next(chunks, None)


def iter_table(
    path: str | Path,
    sep: str = ",",
    text_col: str = "text",
    label_col: str | None = "label",
    chunk_rows: int = CHUNK_ROWS,
    id_col: str = "id",
    label_required: bool = True,
) -> Iterator[Record]:
    """Documents of a CSV (``sep=","``) or TSV (``sep="\\t"``) file; ids from ``id_col``
    (else the row number); labels from ``label_col``, which only ``label_required`` tables
    must have."""
    import pandas as pd  # imported here: it takes a third of a second

    path = Path(path)
    scores, done = None, 0
    try:
        chunks = pd.read_csv(
            path,
            sep=sep,
            dtype=str,
            keep_default_na=False,
            chunksize=chunk_rows,
            index_col=False,  # extra fields in a row are an error, never an index
            encoding="utf-8",
            quoting=csv.QUOTE_NONE if sep == "\t" else csv.QUOTE_MINIMAL,
        )
        while (chunk := next_chunk(chunks)) is not None:
            if scores is None:
                if not label_required and label_col not in chunk.columns:
                    label_col = None
                check_columns(path, chunk.columns, text_col, label_col, id_col)
                scores = label_col is not None and is_score_column(chunk[label_col])
            for cells in chunk.to_dict("records"):
                yield row_record(cells, done, path, text_col, label_col, scores, id_col, label_required)
                done += 1
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except pd.errors.ParserWarning:
        raise UserError(f"{path}: a row has more fields than the header names; quote fields that hold "
                        "the separator") from None
    except pd.errors.EmptyDataError:
        raise UserError(f"{path}: empty file, expected a header line naming the columns") from None
    except pd.errors.ParserError as err:
        match = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(err))
        if match is None:
            raise UserError(f"{path}: malformed table ({err})") from None
        expected, line, saw = match.groups()
        raise UserError(f"{where(path, int(line))}: expected {expected} fields, saw {saw}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: expected UTF-8 text") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None


def check_columns(path: Path, columns, text_col: str, label_col: str | None, id_col: str) -> None:
    """One error line for the first of the named columns that the table lacks (the id column
    ``id`` may be missing)."""
    names = ", ".join(map(str, columns))
    for column in (text_col, label_col):
        if column is not None and column not in columns:
            raise UserError(f"{path}: no column {column!r}; columns are: {names}")
    if id_col not in ("", "id", *columns):
        raise UserError(f"{path}: no id column {id_col!r}; columns are: {names} (--id-col NAME names the one "
                        "holding the ids, --id-col '' numbers the rows)")


def row_record(cells: dict, row: int, path: Path, text_col: str, label_col: str | None, scores: bool,
               id_col: str = "id", label_required: bool = True) -> Record:
    """One record from one row (``row`` counts data rows from 0)."""
    at = where(path, row + 2)
    text = cells[text_col]
    tokens, offsets = tokenize(text)
    if not tokens:
        raise UserError(f"{at}: empty document in column {text_col!r}, expected some text")
    label = None
    if label_col is not None:
        value = cells[label_col].strip()
        if value:
            label = check_score(value, at, f"{label_col!r}") if scores else value
        elif label_required:
            raise UserError(f"{at}: missing label in column {label_col!r}")
    doc_id = cells.get(id_col, "").strip()
    return Record(id=doc_id or str(row + 1), tokens=tokens, label=label, text=text, offsets=offsets, source=at)
