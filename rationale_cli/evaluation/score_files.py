"""Where ``rationale evaluate`` and ``rationale score`` write their scores: the metrics as
JSON and each document's scores as JSONL, to files or ('-') standard output."""

from __future__ import annotations

from pathlib import Path

from rationale_cli.runtime.atomic import writable_target, write_text_atomic
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.safe_json import to_json_line


def check_score_outputs(json_out: Path | None, per_document: Path | None) -> None:
    """Refuse outputs that cannot be written, before any work."""
    if str(json_out) == "-" and str(per_document) == "-":
        raise UserError("--json - and --per-document -: only one of them can go to standard output")
    for target in (json_out, per_document):
        if target is not None and str(target) != "-":
            writable_target(target)


def to_standard_output(json_out: Path | None, per_document: Path | None) -> bool:
    """Whether one of the outputs is standard output (which then holds data only)."""
    return "-" in (str(json_out), str(per_document))


def write_metrics(json_out: Path, metrics: dict) -> None:
    """The metrics as JSON (no NaN) at ``json_out``, or on standard output for '-'."""
    from rationale_cli.runs.run_directory import write_json

    write_json(json_out, metrics)


def write_document_scores(per_document: Path, rows: list[dict]) -> None:
    """One JSON line per document at ``per_document``, or on standard output for '-'."""
    write_text_atomic(per_document, "".join(to_json_line(row) for row in rows))
