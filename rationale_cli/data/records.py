"""The in-memory record every reader produces."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence

Span = tuple[int, int]


@dataclass
class Record:
    """One document.

    ``tokens`` are what the model reads. ``label`` is a float in [0, 1] for
    regression or a string class name for classification (None when unknown, as
    in plain text to predict). ``rationale`` holds gold token spans
    ``(start, end)``, end exclusive, or None when the source has no gold. ``text``
    and ``offsets`` (character ``(start, end)`` per token) are present when the
    tokens came from raw text, so highlights map back onto it. ``source`` is where
    the document was read (``file:line``), for error messages. ERASER documents
    also carry their ``docid``, their ``query`` (tokens the model reads before the
    document, never part of a rationale) and ``evidence``: the gold spans as
    annotated (they may overlap or be empty), which span-level scores count one by
    one; ``rationale`` is their union. ``sentences`` are the document's sentences as token
    spans where the source marks them (ERASER: one a line); :meth:`sentence_spans` falls back
    on sentence-final punctuation. ``widened`` is set where the gold came as character spans
    (annotation tools, :mod:`rationale_cli.data.readers.char_spans`): True when one of them cut
    a token and was widened to the whole token, False when none did (None: not read so).
    """

    id: str
    tokens: list[str]
    label: float | str | None = None
    rationale: list[Span] | None = None
    text: str | None = None
    offsets: list[Span] | None = None
    source: str | None = None
    docid: str | None = None
    query: list[str] | None = None
    evidence: list[Span] | None = None
    sentences: list[Span] | None = None
    widened: bool | None = None

    @property
    def where(self) -> str:
        return self.source or f"document {self.id!r}"

    def gold_spans(self) -> list[Span] | None:
        """The gold spans as annotated (``evidence``), else the rationale's."""
        return self.evidence if self.evidence is not None else self.rationale

    def sentence_spans(self) -> list[Span]:
        """The document's sentences: ``sentences`` where the source gave them, else
        :func:`punctuated_sentences` of the tokens."""
        return self.sentences if self.sentences is not None else punctuated_sentences(self.tokens)

    def text_offsets(self) -> tuple[str, list[Span]]:
        """The text and each token's character span in it: the raw text where the tokens came
        from one, else the tokens joined by single spaces."""
        if self.text is not None and self.offsets is not None:
            return self.text, self.offsets
        starts = list(accumulate((len(token) + 1 for token in self.tokens[:-1]), initial=0))
        return " ".join(self.tokens), [(start, start + len(token)) for start, token in zip(starts, self.tokens)]

    def gold_mask(self) -> list[int] | None:
        """0/1 per token from the gold spans, or None without gold."""
        return None if self.rationale is None else spans_to_mask(self.rationale, len(self.tokens))


SENTENCE_ENDS = frozenset({".", "!", "?", "...", "..", "?!", "!?"})
CLOSERS = frozenset({'"', "'", "''", ")", "]", "\u201d", "\u2019"})  # belong to the sentence they close


def punctuated_sentences(tokens: list[str]) -> list[Span]:
    """Sentences as token spans, each ending after a run of sentence-final punctuation and
    the closing quotes or brackets that follow it; the last one at the end of the tokens."""
    spans, start, i = [], 0, 0
    while i < len(tokens):
        if tokens[i] in SENTENCE_ENDS:
            while i + 1 < len(tokens) and (tokens[i + 1] in SENTENCE_ENDS or tokens[i + 1] in CLOSERS):
                i += 1
            spans.append((start, i + 1))
            start = i + 1
        i += 1
    if start < len(tokens):
        spans.append((start, len(tokens)))
    return spans


def spans_to_mask(spans, length: int) -> list[int]:
    """0/1 per position from ``(start, end)`` spans (end exclusive; clipped to the length)."""
    mask = [0] * length
    for start, end in spans:
        for i in range(max(start, 0), min(end, length)):
            mask[i] = 1
    return mask


def mask_to_spans(mask, sentences: Sequence[Span] | None = None) -> list[Span]:
    """Maximal runs of nonzero entries as ``(start, end)`` spans, end exclusive; with
    ``sentences``, runs are also cut where a sentence starts, so a rationale decoded in whole
    sentences is one span per sentence (as ERASER gives sentence-level rationales: adjacent
    sentences stay two spans for its IOU match)."""
    try:  # a list of small non-negative ints (what inference gives) as bytes at once
        flags = bytes(mask) if isinstance(mask, (list, tuple)) else None
    except (TypeError, ValueError):
        flags = None
    if flags is None:
        flags = bytes(1 if value else 0 for value in mask)
    runs = [run.span() for run in NONZERO_RUNS.finditer(flags)]
    if not sentences:
        return runs
    starts = sorted({start for start, _ in sentences})
    cut = []
    for start, end in runs:
        for inside in starts[bisect_right(starts, start):bisect_left(starts, end)]:
            cut.append((start, inside))
            start = inside
        cut.append((start, end))
    return cut


NONZERO_RUNS = re.compile(rb"[^\x00]+")
