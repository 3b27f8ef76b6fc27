"""Where a command's documents come from: a file or folder, the word ``demo``, or
standard input (``-``); documents given in memory (:func:`as_record`)."""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from rationale_cli.data.batching import checked_length
from rationale_cli.data.readers import SPANS_KEY, detect_format, iter_records
from rationale_cli.data.records import Record
from rationale_cli.data.synthetic import demo_records
from rationale_cli.data.tokenize import tokenize
from rationale_cli.runtime.errors import UserError

DEMO = "demo"
ERASER_SPLITS = {"train": "train", "valid": "val", "test": "test"}
Document = str | Record | dict  # what the Python API accepts as a document
SPLITS = {"train": "train", "valid": "valid", "val": "valid", "test": "test"}  # names a user may give


_demo_path_noted = False


def is_demo(path: str | Path) -> bool:
    """Whether ``path`` is the word ``demo``: always the synthetic corpus, whatever the working
    folder holds (a file or folder of that name is ``./demo``; a note says so once when one is
    there)."""
    global _demo_path_noted
    if str(path) != DEMO:
        return False
    if not _demo_path_noted and os.path.lexists(DEMO):
        _demo_path_noted = True
        sys.stderr.write("note: 'demo' is the synthetic corpus; write ./demo for the path of that name here\n")
    return True


def load(path: str, split: str, *, fmt: str = "auto", aspect: int | None = None,
         text_col: str = "text", label_col: str = "label", id_field: str = "id", query: bool = True,
         rationale_label: str | None = None, spans_key: str = SPANS_KEY) -> list[Record]:
    """Documents of ``split`` (train, valid or test): the split of the demo corpus or of an
    ERASER folder; any other source is read whole. Without ``query`` the documents'
    queries are dropped; ``rationale_label`` and ``spans_key`` say where an annotation tool's
    file holds the gold rationale (:func:`~rationale_cli.data.readers.iter_records`). A document
    longer than a model reads is refused here, before any work
    (:func:`~rationale_cli.data.batching.checked_length`)."""
    records = list(stream(path, split, fmt=fmt, aspect=aspect, text_col=text_col, label_col=label_col,
                          id_field=id_field, query=query, rationale_label=rationale_label, spans_key=spans_key))
    for record in records:
        checked_length(record)
    return records


def stream(path: str, split: str = "test", *, fmt: str = "auto", aspect: int | None = None,
           text_col: str = "text", label_col: str | None = "label", id_field: str = "id",
           query: bool = True, rationale_label: str | None = None, spans_key: str = SPANS_KEY,
           label_required: bool = True) -> Iterator[Record]:
    """The same documents one at a time (constant memory for files)."""
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}: expected train, val or test")
    if is_demo(path):
        return iter(demo_records(SPLITS[split], aspect=aspect or 0))
    records = iter_records(path, fmt, aspect=aspect, split=ERASER_SPLITS[SPLITS[split]], text_col=text_col,
                           label_col=label_col, id_field=id_field, rationale_label=rationale_label,
                           spans_key=spans_key, label_required=label_required)
    return records if query else map(without_query, records)


def without_query(record: Record) -> Record:
    record.query = None
    return record


def run_documents(path: str, config, *, fmt: str = "auto", aspect: int | None = None,
                  text_col: str | None = None, labelled: bool = True, id_field: str | None = None,
                  split: str = "test", rationale_label: str | None = None,
                  spans_key: str | None = None) -> Iterator[Record]:
    """The documents of ``path`` read for a trained run (an ERASER folder's or the demo
    corpus's ``split``): with its ``config``'s aspect, text, label and id columns, gold span
    label and group and use of queries unless given; labels where the input has them, which a
    table's every row must unless not ``labelled``."""
    return stream(path, split, fmt=fmt, aspect=config.aspect if aspect is None else aspect,
                  text_col=text_col or config.text_col, label_col=config.label_col,
                  id_field=config.id_col if id_field is None else id_field, query=config.query,
                  rationale_label=rationale_label or config.rationale_label,
                  spans_key=spans_key or config.spans_key, label_required=labelled)


def has_own_validation(path: str, fmt: str) -> bool:
    """The demo corpus and ERASER folders come with a validation split."""
    if is_demo(path):
        return True
    return Path(path).is_dir() and (fmt if fmt != "auto" else detect_format(path)) == "eraser"


def from_stdin() -> str:
    """Standard input saved to a temporary file (removed at exit) whose name tells the
    format detection what it holds (:func:`stdin_suffix`); empty input is one error line."""
    data = sys.stdin.buffer.read()
    if not data.strip():
        raise UserError("standard input (-) is empty: no documents to read")
    fd, name = tempfile.mkstemp(prefix="rationale-stdin-", suffix=stdin_suffix(data.lstrip().split(b"\n", 1)[0]))
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return name


def stdin_suffix(first: bytes) -> str:
    """What standard input holds, from its first line: JSON lines when it is an object, CSV or
    TSV when it is a header naming a ``text`` column, else text (``--format`` says otherwise)."""
    if first.startswith(b"{"):
        return ".jsonl"
    header = first.decode("utf-8", "replace").strip().lower()
    for separator, suffix in ((",", ".csv"), ("\t", ".tsv")):
        if separator in header and "text" in (field.strip().strip('"') for field in header.split(separator)):
            return suffix
    return ".txt"


def as_records(documents: Iterable[Document]) -> list[Record]:
    """Records from a list of documents (:func:`as_record`); one string is refused, as its
    characters would each be a document."""
    if isinstance(documents, (str, dict, Record)):
        raise UserError("expected a list of documents, got one document; put it in a list")
    return [as_record(doc, i) for i, doc in enumerate(documents)]


def as_record(document: Document, index: int) -> Record:
    """A record from a string (tokenized as ``rationale`` tokenizes raw text), a
    :class:`Record`, or a dict with ``text`` or ``tokens`` (and optionally ``id``, ``label``)."""
    if isinstance(document, Record):
        return document
    if isinstance(document, str):
        document = {"text": document}
    if not isinstance(document, dict):
        raise UserError(f"document {index}: expected a string, a Record or a dict, got {type(document).__name__}")
    name = str(document.get("id", index))
    if "tokens" in document:
        tokens, text, offsets = document["tokens"], None, None
        if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
            raise UserError(f"document {name}: 'tokens' must be a list of strings")
        tokens = list(tokens)
    elif "text" in document:
        text = document["text"]
        if not isinstance(text, str):
            raise UserError(f"document {name}: 'text' must be a string, got {type(text).__name__}")
        tokens, offsets = tokenize(text)
    else:
        raise UserError(f"document {name}: a dict needs 'text' or 'tokens'")
    if not tokens:
        raise UserError(f"document {name}: empty text")
    return Record(id=name, tokens=tokens, label=document.get("label"), text=text, offsets=offsets)
