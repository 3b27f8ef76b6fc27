"""Span annotations as JSON lines: Prodigy's and doccano's exports, one document a line.

```
{"text": "Great head, weak body.", "spans": [{"start": 0, "end": 10, "label": "rationale"}], "score": 0.8}
{"id": 7, "text": "Great head, weak body.", "label": [[0, 10, "rationale"]], "sentiment": "pos"}
```

Prodigy (``prodigy db-out``): ``spans`` with character ``start``/``end`` and a ``label``; a line
whose ``answer`` is ``reject`` or ``ignore`` is skipped, as Prodigy's own training does.
doccano (sequence labelling export): ``label`` (or ``labels``) holds ``[start, end, name]``.
Spans map onto our tokens (:mod:`rationale_cli.data.readers.char_spans`); those labelled
``--rationale-label`` (default: any) are the gold rationale. The document label is a ``score``
(a number in [0, 1]) or the field ``--label-col`` names (a class name; in doccano's files
``label`` holds the spans, so a class needs another field). ``id`` (``--id-field``) defaults
to the line number; blank lines are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from rationale_cli.data.readers.char_spans import (
    SpanLabels,
    check_char_span,
    check_label_names,
    check_text,
    class_or_score,
    text_record,
)
from rationale_cli.data.readers.common import iter_lines, parse_json_object
from rationale_cli.data.records import Record, Span
from rationale_cli.runtime.errors import UserError, where

SKIPPED_ANSWERS = ("reject", "ignore")


def json_lines(path: str | Path) -> Iterator[tuple[int, str, dict]]:
    """``(line_no, where, object)`` for each non-blank line."""
    for line_no, line in iter_lines(path):
        if line.strip():
            at = where(path, line_no)
            yield line_no, at, parse_json_object(line, at)


def doc_id(obj: dict, id_field: str, line_no: int) -> str:
    return str(obj[id_field]) if obj.get(id_field) is not None else str(line_no)


def prodigy_spans(obj: dict, at: str, labels: SpanLabels) -> list[Span] | None:
    """The character spans of a Prodigy example that count (None: it has no ``spans``)."""
    spans = obj.get("spans")
    if spans is None:
        return None
    if not isinstance(spans, list):
        raise UserError(f"{at}, spans: expected a list of {{start, end, label}} objects")
    n_chars = len(obj["text"])
    out = []
    for i, span in enumerate(spans):
        field = f"{at}, spans[{i}]"
        if not isinstance(span, dict):
            raise UserError(f"{field}: expected an object with start, end and label")
        names = check_label_names(span.get("label", []), f"{field}.label")
        start_end = check_char_span(span.get("start"), span.get("end"), n_chars, field)
        if labels.counts(names):
            out.append(start_end)
    return out


def iter_prodigy(path: str | Path, label_col: str | None = "label", id_field: str = "id",
                 rationale_label: str | None = None) -> Iterator[Record]:
    """Documents of a Prodigy span JSONL file (accepted and unanswered examples)."""
    labels = SpanLabels(path, rationale_label)
    for line_no, at, obj in json_lines(path):
        if obj.get("answer") in SKIPPED_ANSWERS:
            continue
        text = check_text(obj.get("text"), at)
        yield text_record(doc_id(obj, id_field, line_no), text, prodigy_spans(obj, at, labels),
                          class_or_score(obj, label_col, at), at)
    labels.check()


def doccano_spans(obj: dict, at: str, labels: SpanLabels) -> tuple[str | None, list[Span] | None]:
    """The field holding a doccano example's spans and those that count (None, None: none)."""
    field = next((name for name in ("label", "labels") if isinstance(obj.get(name), list)), None)
    if field is None:
        return None, None
    n_chars = len(obj["text"])
    out = []
    for i, span in enumerate(obj[field]):
        place = f"{at}, {field}[{i}]"
        if not isinstance(span, list) or len(span) != 3:
            raise UserError(f"{place}: expected [start, end, label], got {span!r}")
        start, end, name = span
        names = check_label_names(name, place)
        start_end = check_char_span(start, end, n_chars, place)
        if labels.counts(names):
            out.append(start_end)
    return field, out


def iter_doccano(path: str | Path, label_col: str | None = "label", id_field: str = "id",
                 rationale_label: str | None = None) -> Iterator[Record]:
    """Documents of a doccano sequence-labelling JSONL export."""
    labels = SpanLabels(path, rationale_label)
    for line_no, at, obj in json_lines(path):
        text = check_text(obj.get("text"), at)
        field, spans = doccano_spans(obj, at, labels)
        label = class_or_score(obj, None if label_col == field else label_col, at)
        yield text_record(doc_id(obj, id_field, line_no), text, spans, label, at)
    labels.check()


def is_prodigy(obj) -> bool:
    """A Prodigy example: ``text`` and a list of ``spans`` objects."""
    return (isinstance(obj, dict) and isinstance(obj.get("text"), str) and isinstance(obj.get("spans"), list)
            and all(isinstance(span, dict) and "start" in span for span in obj["spans"]))


def is_doccano(obj) -> bool:
    """A doccano example: ``text`` and ``label`` (or ``labels``) as ``[start, end, name]`` lists."""
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        return False
    spans = obj.get("label", obj.get("labels"))
    return isinstance(spans, list) and all(isinstance(span, list) and len(span) == 3 for span in spans)
