"""The JSON line ``rationale predict`` writes for each document."""

from __future__ import annotations

from rationale_cli.inference import Output
from rationale_cli.records import mask_to_spans


def prediction_json(result: Output) -> dict:
    """id, prediction (and class probabilities), rationale token spans (end exclusive),
    character spans into the raw text when there is one, selected tokens and
    per-token selection scores; the gold label when the input had one."""
    record = result.record
    spans = mask_to_spans(result.selected)
    line = {"id": record.id, "prediction": result.prediction, **result.extra}
    if record.label is not None:
        line["label"] = record.label
    line["rationale"] = [list(span) for span in spans]
    if record.offsets is not None:
        line["char_spans"] = [[record.offsets[start][0], record.offsets[end - 1][1]] for start, end in spans]
    line["selected_tokens"] = [tok for tok, z in zip(record.tokens, result.selected) if z]
    line["token_scores"] = result.scores
    return line
