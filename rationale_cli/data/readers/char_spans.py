"""What the readers of annotation tools share: gold rationales given as character spans.

Label Studio, Prodigy, doccano and spaCy mark a rationale by character offsets into the
document's text; our records hold token spans. :func:`token_spans` maps the one onto the
other: a token belongs to the rationale when a span covers any of its characters, so a span
that cuts a token takes the whole token (the record's ``widened`` says it happened, and
``rationale evaluate`` counts such documents), and a span over whitespace alone selects
nothing. :class:`SpanLabels` says which spans count (``--rationale-label``, default: any) and
refuses a label that no span of the file carries. Every check raises :class:`UserError` with
one line naming the file, the task (or line) and the field.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Sequence

from rationale_cli.data.readers.common import check_score, merge_spans
from rationale_cli.data.records import Record, Span
from rationale_cli.data.tokenize import tokenize
from rationale_cli.runtime.errors import UserError


def is_offset(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_char_span(start, end, n_chars: int, at: str) -> Span:
    """A character span ``[start, end)`` inside a text of ``n_chars`` characters; ``at`` names
    the file, the task and the field."""
    if not (is_offset(start) and is_offset(end)):
        raise UserError(f"{at}: expected start and end character offsets (integers), got {start!r} and {end!r}")
    if not 0 <= start < end <= n_chars:
        raise UserError(f"{at}: span [{start}, {end}] is outside the text, expected 0 <= start < end <= "
                        f"{n_chars} (characters)")
    return start, end


def token_spans(char_spans: Sequence[Span], offsets: Sequence[Span]) -> tuple[list[Span], bool]:
    """The token spans (merged, sorted) of checked character spans over tokens at ``offsets``,
    and whether a span cut a token (which then counts whole)."""
    starts = [start for start, _ in offsets]
    ends = [end for _, end in offsets]
    spans: list[Span] = []
    widened = False
    for start, end in char_spans:
        first = bisect_right(ends, start)  # the first token ending after the span starts
        last = bisect_left(starts, end)  # past the last token starting before it ends
        if first < last:
            widened |= offsets[first][0] < start or offsets[last - 1][1] > end
            spans.append((first, last))
    return merge_spans(spans), widened


def check_text(value, at: str, field: str = "text") -> str:
    """A document's text: a string (``field`` names it in an error)."""
    if value is None:
        raise UserError(f"{at}: no {field}, expected the document's text")
    if not isinstance(value, str):
        raise UserError(f"{at}: expected {field} to be a string (the document's text)")
    return value


def text_record(doc_id: str, text: str, spans: list[Span] | None, label: float | str | None, at: str,
                field: str = "text") -> Record:
    """A record of raw ``text`` (tokenized with offsets) with gold ``spans`` in characters
    (None: no gold); ``field`` names the text in an error."""
    tokens, offsets = tokenize(text)
    if not tokens:
        raise UserError(f"{at}: empty document in {field}, expected some text")
    rationale, widened = (None, None) if spans is None else token_spans(spans, offsets)
    return Record(id=doc_id, tokens=tokens, label=label, rationale=rationale, text=text, offsets=offsets,
                  source=at, widened=widened)


def class_or_score(obj: dict, label_field: str | None, at: str, prefix: str = "") -> float | str | None:
    """A document label from the fields of ``obj``, as in our JSON lines: ``score`` (a number in
    [0, 1]) or ``label_field`` (a class name); None when neither is there (or ``label_field`` is
    None and there is no score)."""
    if obj.get("score") is not None:
        return check_score(obj["score"], at, f"{prefix}score")
    value = obj.get(label_field) if label_field is not None else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UserError(f"{at}: expected {prefix}{label_field} to be a class name (a string or a number)")
    return str(value)


class SpanLabels:
    """Which spans of one file count as the rationale: those labelled ``wanted`` (None: every
    span); :meth:`check` at the end refuses a ``wanted`` label that no span carried."""

    def __init__(self, path: str | Path, wanted: str | None):
        self.path, self.wanted, self.seen = path, wanted, set()

    def counts(self, labels: Sequence[str]) -> bool:
        self.seen.update(labels)
        return self.wanted is None or self.wanted in labels

    def check(self) -> None:
        if self.wanted is not None and self.wanted not in self.seen:
            found = ", ".join(map(repr, sorted(self.seen))) or "none"
            raise UserError(f"{self.path}: no span is labelled {self.wanted!r} (--rationale-label); the labels "
                            f"found: {found}")



def check_label_names(labels, at: str) -> list[str]:
    """A span's labels: a list of strings (a string alone is one label)."""
    if isinstance(labels, str):
        return [labels]
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise UserError(f"{at}: expected a list of label names (strings), got {labels!r}")
    return labels


def widened_count(records: Sequence[Record]) -> dict:
    """``{"documents_widened": n}``, the documents where a gold character span cut a token, when
    any of ``records`` has its gold from character spans; else nothing."""
    read = [record.widened for record in records if record.widened is not None]
    return {"documents_widened": sum(read)} if read else {}
