"""What ``rationale predict`` writes: one JSON line per document, into a file that
is new (or replaced with ``--force``), never the input itself; JSON never holds NaN."""

from __future__ import annotations

import json
import math
import os
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rationale_cli.runtime.atomic import writable_target
from rationale_cli.runtime.errors import UserError
from rationale_cli.data.records import mask_to_spans

if TYPE_CHECKING:
    from rationale_cli.runs.inference import Output


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, infinity) as None, so JSON stays valid."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def format_prediction(value) -> str:
    """A prediction or label as shown to people: scores to 3 decimals."""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def to_json_line(data: dict) -> str:
    try:  # the common case, at full speed: every number finite
        return json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(finite(data), ensure_ascii=False, allow_nan=False) + "\n"


def check_output(out: Path, source: str | Path) -> None:
    """Refuse an output that cannot be written or is the input itself (standard output,
    devices and pipes are written to as they are)."""
    if str(out) == "-":
        return
    writable_target(out)
    if out.is_file() and Path(source).is_file() and os.path.samefile(out, source):
        raise UserError(f"{out}: is the input; choose another --out")


class ScoreText(dict):
    """JSON text of a token score: the 10,001 values in [0, 1] that rounding to 4 places gives
    are looked up (formatting floats is most of the time of writing a line), others formatted
    (a zero is written 0.0 whatever its sign)."""

    def __missing__(self, value: float) -> str:
        return json.dumps(finite(value))


SCORE_TEXT = ScoreText({k / 10_000: repr(k / 10_000) for k in range(10_001)})


def prediction_line(result: Output) -> str:
    """:func:`prediction_json` as one JSON line: what ``to_json_line`` writes for float scores
    (what inference gives), faster; a zero is written 0.0, an integer score as a float."""
    head = to_json_line(prediction_json(result, scores=False))
    return f'{head[:-2]}, "token_scores": [{", ".join(map(SCORE_TEXT.__getitem__, result.scores))}]}}\n'


def prediction_json(result: Output, scores: bool = True) -> dict:
    """id, prediction (and class probabilities), rationale token spans (end exclusive),
    character spans into the raw text when there is one, selected tokens and
    per-token selection scores (last; not with ``scores=False``); the gold label when the
    input had one."""
    record = result.record
    spans = mask_to_spans(result.selected)
    line = {"id": record.id, "prediction": result.prediction, **result.extra}
    if record.label is not None:
        line["label"] = record.label
    line["rationale"] = [list(span) for span in spans]
    if record.offsets is not None:
        line["char_spans"] = [[record.offsets[start][0], record.offsets[end - 1][1]] for start, end in spans]
    line["selected_tokens"] = list(compress(record.tokens, result.selected))
    if scores:
        line["token_scores"] = result.scores
    return line
