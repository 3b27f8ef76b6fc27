"""One document's prediction as a record (:class:`Rationale`) and its JSON line, written into a
file that is new (or replaced with ``--force``), never the input itself; JSON never holds NaN."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rationale_cli.data.records import mask_to_spans
from rationale_cli.runtime.outputs import protected_output
from rationale_cli.runtime.safe_json import finite, to_json_line

if TYPE_CHECKING:
    from rationale_cli.runs.inference import Output


def format_prediction(value) -> str:
    """A prediction or label as shown to people: scores to 3 decimals."""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def check_output(out: Path, source: str | Path) -> None:
    """Refuse an output that cannot be written, is the input itself or a run directory's file
    (:func:`~rationale_cli.runtime.outputs.protected_output`; standard output, devices and pipes
    are written to as they are); an existing one is the engine's to continue or refuse."""
    protected_output(out, [source])


class ScoreText(dict):
    """JSON text of a token score: the 10,001 values in [0, 1] that rounding to 4 places gives
    are looked up (formatting floats is most of the time of writing a line), others formatted
    (a zero is written 0.0 whatever its sign)."""

    def __missing__(self, value: float) -> str:
        return json.dumps(finite(value))


SCORE_TEXT = ScoreText({k / 10_000: repr(k / 10_000) for k in range(10_001)})


@dataclass
class Rationale:
    """One document's prediction and rationale, the one record every output is made from
    (the JSON line, the CSV and Parquet rows, the Python API's result): ``spans`` are token
    spans (end exclusive), ``char_spans`` character spans into ``text`` (None without raw
    text), ``selected`` 0/1 per token and ``scores`` the per-token selection scores."""

    id: str
    tokens: list[str]
    text: str | None
    prediction: float | str
    probabilities: dict[str, float] | None
    spans: list[tuple[int, int]]
    char_spans: list[tuple[int, int]] | None
    selected: list[int]
    scores: list[float]
    label: float | str | None = None

    @classmethod
    def of(cls, output: Output) -> Rationale:
        """The record of one decoded document."""
        record = output.record
        spans = mask_to_spans(output.selected, record.sentence_spans() if output.in_sentences else None)
        char_spans = None if record.offsets is None else [
            (record.offsets[start][0], record.offsets[end - 1][1]) for start, end in spans]
        return cls(id=record.id, tokens=record.tokens, text=record.text, prediction=output.prediction,
                   probabilities=output.extra.get("probabilities"), spans=spans, char_spans=char_spans,
                   selected=output.selected, scores=output.scores, label=record.label)

    @property
    def selected_tokens(self) -> list[str]:
        return list(compress(self.tokens, self.selected))

    @property
    def pieces(self) -> list[str]:
        """The rationale as text: each span's words, from the raw text where there is one."""
        if self.char_spans is not None:
            return [self.text[start:end] for start, end in self.char_spans]
        return [" ".join(self.tokens[start:end]) for start, end in self.spans]

    @property
    def rationale_text(self) -> str:
        """The pieces joined with " … " (the ``rationale_text`` column of tables)."""
        return " … ".join(self.pieces)

    def to_dict(self, scores: bool = True) -> dict[str, Any]:
        """The line ``rationale predict`` writes: id, prediction (and class probabilities), the
        gold label when the input had one, rationale token spans (end exclusive), character
        spans into the raw text when there is one, selected tokens and per-token selection
        scores (last; not with ``scores=False``)."""
        line = {"id": self.id, "prediction": self.prediction}
        if self.probabilities is not None:
            line["probabilities"] = self.probabilities
        if self.label is not None:
            line["label"] = self.label
        line["rationale"] = [list(span) for span in self.spans]
        if self.char_spans is not None:
            line["char_spans"] = [list(span) for span in self.char_spans]
        line["selected_tokens"] = self.selected_tokens
        if scores:
            line["token_scores"] = self.scores
        return line

    def json_line(self) -> str:
        """:meth:`to_dict` as one JSON line: what ``to_json_line`` writes for float scores (what
        inference gives), faster; a zero is written 0.0, an integer score as a float."""
        head = to_json_line(self.to_dict(scores=False))
        return f'{head[:-2]}, "token_scores": [{", ".join(map(SCORE_TEXT.__getitem__, self.scores))}]}}\n'


def prediction_line(output: Output) -> str:
    """The JSON line of one decoded document (:meth:`Rationale.json_line`)."""
    return Rationale.of(output).json_line()
