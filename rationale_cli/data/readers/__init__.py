"""Readers: every supported input format as a stream of :class:`Record`.

``iter_records`` streams (one line or one chunk at a time, ``.gz`` opened
transparently); ``read_records`` collects the stream into a list. Labels come
out as ``float`` for regression scores and ``str`` for class names, so the task
can be inferred from their types. Any problem with the input raises
:class:`~rationale_cli.runtime.errors.UserError` with one line naming file and line.

| format | source | module |
|---|---|---|
| beer | Lei et al. (2016) ``reviews.aspectN.*.txt.gz`` | beer |
| beer-annotations | Lei et al. gold rationales ``annotations.json`` | beer |
| eraser | ERASER dataset directory or split file | eraser |
| jsonl | native JSON lines (``text``/``tokens``, ``label``/``score``, ``rationale``) | jsonl |
| csv, tsv | tables with a text and a label column | table |
| text | one document a line, no labels | text |
| label-studio | Label Studio's JSON and JSON-MIN exports, gold spans in characters | label_studio |
| prodigy, doccano | their span JSON lines, gold spans in characters | span_jsonl |
| spacy | a spaCy ``DocBin`` (``.spacy``), gold spans in a span group | spacy_docbin |

The annotation tools' readers share :mod:`~rationale_cli.data.readers.char_spans`: character
spans onto our tokens, and ``rationale_label`` (which spans count, default any); ``spans_key``
names the span group of a ``DocBin``.

:data:`FORMATS` maps each name (``auto`` first) to a :class:`Format`: its one-line
help and the function that opens its stream; adding a format is its module, one
entry there and, to be detected, a check in :func:`detect_format`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from rationale_cli.data.readers.beer import iter_beer, iter_beer_annotations
from rationale_cli.data.readers.common import first_line
from rationale_cli.data.readers.eraser import iter_eraser
from rationale_cli.data.readers.jsonl import iter_jsonl
from rationale_cli.data.readers.label_studio import iter_label_studio, looks_like_label_studio
from rationale_cli.data.readers.spacy_docbin import SPANS_KEY, iter_spacy
from rationale_cli.data.readers.span_jsonl import is_doccano, is_prodigy, iter_doccano, iter_prodigy
from rationale_cli.data.readers.table import iter_table
from rationale_cli.data.readers.text import iter_text
from rationale_cli.data.records import Record
from rationale_cli.runtime.errors import UserError

__all__ = ["FORMATS", "Format", "detect_format", "iter_records", "read_records"]

BEER_NAME = re.compile(r"reviews\.aspect\d+.*\.txt(\.gz)?$")


def is_beer_line(line: str) -> bool:
    """True for ``s0 s1 s2 s3 s4<TAB>tokens``."""
    head, tab, _ = line.partition("\t")
    scores = head.split()
    if not tab or len(scores) != 5:
        return False
    try:
        [float(s) for s in scores]
    except ValueError:
        return False
    return True


def is_beer_annotation(line: str) -> bool:
    """True for a JSON object with keys ``x`` and ``y``."""
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return False
    return isinstance(obj, dict) and "x" in obj and "y" in obj


def span_jsonl_format(line: str) -> str | None:
    """prodigy or doccano for a first line of their span exports, else None."""
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return None
    return "prodigy" if is_prodigy(obj) else "doccano" if is_doccano(obj) else None


def has_eraser_docs(folder: Path) -> bool:
    """An ERASER dataset folder holds its documents in ``docs/`` or ``docs.jsonl``."""
    return (folder / "docs").is_dir() or (folder / "docs.jsonl").is_file()


def detect_format(path: str | Path) -> str:
    """The format of ``path`` from its name, its place and its first line."""
    path = Path(path)
    if path.is_dir():
        if has_eraser_docs(path):
            return "eraser"
        raise UserError(f"{path}: a directory without docs/ or docs.jsonl, expected an ERASER dataset or a file")
    if not path.exists():
        raise UserError(f"{path}: no such file")
    name = path.name.lower()
    suffix = Path(name.removesuffix(".gz")).suffix
    if suffix == ".jsonl" and path.name != "docs.jsonl" and has_eraser_docs(path.parent):
        return "eraser"
    if suffix == ".spacy":
        return "spacy"
    line = first_line(path)
    if BEER_NAME.match(name) or is_beer_line(line):
        return "beer"
    if suffix == ".json" and looks_like_label_studio(path):
        return "label-studio"
    if suffix in (".json", ".jsonl"):
        return "beer-annotations" if is_beer_annotation(line) else span_jsonl_format(line) or "jsonl"
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    return "text"


@dataclass(frozen=True)
class Format:
    """A registry entry: ``help`` (one line) and ``open(path, *, aspect, split, text_col, label_col)``,
    the stream of records (each reader takes the options it needs)."""

    help: str
    open: Callable[..., Iterator[Record]]


def _auto(path: str | Path, **options) -> Iterator[Record]:
    """The stream of the detected format; detects at once, not when iterating."""
    return FORMATS[detect_format(path)].open(path, **options)


FORMATS: dict[str, Format] = {
    "auto": Format("detect from the file name, its place and its first line", _auto),
    "beer": Format("Lei et al.'s reviews.aspectN.*.txt[.gz]: five scores, TAB, tokens; --aspect defaults to N",
                   lambda path, aspect, **_: iter_beer(path, aspect)),
    "beer-annotations": Format("Lei et al.'s annotations.json, gold rationale spans per aspect; needs --aspect",
                               lambda path, aspect, **_: iter_beer_annotations(path, aspect)),
    "eraser": Format("an ERASER folder (train/val/test.jsonl + docs/ or docs.jsonl) or one of its split files",
                     lambda path, split, **_: iter_eraser(path, split)),
    "jsonl": Format("one object a line: text or tokens, label or score, optional rationale token spans",
                    lambda path, id_field="id", **_: iter_jsonl(path, id_field)),
    "csv": Format("a comma-separated table with --text-col, --label-col and --id-col",
                  lambda path, text_col, label_col, id_field="id", label_required=True, **_:
                  iter_table(path, ",", text_col, label_col, id_col=id_field, label_required=label_required)),
    "tsv": Format("a tab-separated table with --text-col, --label-col and --id-col",
                  lambda path, text_col, label_col, id_field="id", label_required=True, **_:
                  iter_table(path, "\t", text_col, label_col, id_col=id_field, label_required=label_required)),
    "text": Format("one document a line, no labels (for predict and explain)", lambda path, **_: iter_text(path)),
    "label-studio": Format("Label Studio's JSON or JSON-MIN export: data.text, labels spans in characters "
                           "(--rationale-label)",
                           lambda path, text_col, label_col, id_field="id", rationale_label=None, **_:
                           iter_label_studio(path, text_col, label_col, id_field, rationale_label)),
    "prodigy": Format("Prodigy's span JSON lines: text, spans with start, end, label (--rationale-label)",
                      lambda path, label_col, id_field="id", rationale_label=None, **_:
                      iter_prodigy(path, label_col, id_field, rationale_label)),
    "doccano": Format("doccano's span JSON lines: text, label as [start, end, name] (--rationale-label)",
                      lambda path, label_col, id_field="id", rationale_label=None, **_:
                      iter_doccano(path, label_col, id_field, rationale_label)),
    "spacy": Format("a spaCy DocBin (.spacy): gold rationale in the span group --spans-key, label in "
                    "doc.cats or user_data",
                    lambda path, spans_key=SPANS_KEY, rationale_label=None, **_:
                    iter_spacy(path, spans_key, rationale_label)),
}


def iter_records(
    path: str | Path,
    fmt: str = "auto",
    *,
    aspect: int | None = None,
    split: str | None = None,
    text_col: str = "text",
    label_col: str | None = "label",
    id_field: str = "id",
    rationale_label: str | None = None,
    spans_key: str = SPANS_KEY,
    label_required: bool = True,
) -> Iterator[Record]:
    """Stream the documents of ``path``.

    ``aspect`` (0-4) picks the beer score (default: N of ``reviews.aspectN``;
    required for beer annotations). ``split`` picks the ERASER file of a dataset
    directory (default ``train``). ``text_col``/``label_col`` name CSV/TSV
    columns (``label_col=None``: no labels; ``label_required`` False: a table without that
    column has none); ``id_field`` the JSONL field or CSV/TSV column holding document ids.
    For the annotation tools' formats, ``rationale_label`` is the label of the spans that are
    the gold rationale (None: any) and ``spans_key`` the span group of a ``DocBin`` that
    holds them. The format is checked and detected
    at once; reading errors surface while iterating, and a source without any
    document raises ``UserError("PATH: no documents found")`` at its end.
    """
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    stream = FORMATS[fmt].open(path, aspect=aspect, split=split, text_col=text_col, label_col=label_col,
                               id_field=id_field, rationale_label=rationale_label, spans_key=spans_key,
                               label_required=label_required)
    return _nonempty(stream, path)


def _nonempty(stream: Iterator[Record], path: str | Path) -> Iterator[Record]:
    found = False
    for record in stream:
        found = True
        yield record
    if not found:
        raise UserError(f"{path}: no documents found")


def read_records(path: str | Path, fmt: str = "auto", **options) -> list[Record]:
    """All documents of ``path`` as a list; same arguments as :func:`iter_records`."""
    return list(iter_records(path, fmt, **options))
