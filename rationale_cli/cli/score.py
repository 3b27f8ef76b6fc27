"""``rationale score``: a predictions file against gold, without a model
(:func:`rationale_cli.evaluation.scoring.score_file`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rationale_cli.cli._util import (
    FORCE_HELP,
    FORMAT_HELP,
    PER_DOCUMENT_HELP,
    RATIONALE_LABEL_HELP,
    SPANS_KEY_HELP,
    SPLIT_HELP,
    Command,
    app,
    friendly,
    print_scores,
)
from rationale_cli.data.readers import SPANS_KEY


@app.command(cls=Command)
@friendly
def score(
    predictions: Path = typer.Argument(..., help="Predictions: `rationale predict` JSONL or an ERASER results "
                                       "file (from any tool)."),
    gold: str = typer.Argument(..., help="Gold documents: an ERASER folder, beer annotations, JSONL with "
                               "rationale spans, an annotation tool's export (Label Studio, Prodigy, doccano, "
                               ".spacy), or 'demo'."),
    format: str = typer.Option("auto", help=f"Gold format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect of the gold annotations."),
    split: str = typer.Option("test", help=SPLIT_HELP),
    rationale_label: Optional[str] = typer.Option(None, help=RATIONALE_LABEL_HELP),
    spans_key: str = typer.Option(SPANS_KEY, help=SPANS_KEY_HELP),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the scores as JSON here."),
    per_document: Optional[Path] = typer.Option(None, help=PER_DOCUMENT_HELP),
    leakage_probe: bool = typer.Option(False, "--leakage-probe", help="Train a small model on the file's "
                                       "rationale masks, their 0/1 pattern alone (no words), to predict the gold "
                                       "labels, each fifth of the documents by a model trained on the other four, "
                                       "and report its score beside chance: how much the masks' shape tells."),
    force: bool = typer.Option(False, "--force", metavar="", help=FORCE_HELP),
):
    """Score an existing predictions file against gold, without a model: token and span
    agreement, soft-score metrics and, from the scores the file holds, faithfulness."""
    from rationale_cli.data import sources
    from rationale_cli.evaluation.scoring import check_score_outputs, score_file

    check_score_outputs(json_out, per_document, force, [predictions, gold])
    records = list(sources.stream(gold, split, fmt=format, aspect=aspect, rationale_label=rationale_label,
                                  spans_key=spans_key))
    metrics, rows = score_file(predictions, records, leakage=leakage_probe)
    print_scores(metrics, f"{predictions} against {gold}", json_out, per_document, rows)
