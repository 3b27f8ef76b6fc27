"""``rationale evaluate``: a run's scores on labelled documents
(:func:`rationale_cli.evaluation.scoring.evaluate_model`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rationale_cli.cli._util import (
    ASPECT_HELP,
    BATCH_HELP,
    COHERENCE_HELP,
    DEVICE_HELP,
    FORCE_HELP,
    FORMAT_HELP,
    ID_HELP,
    PER_DOCUMENT_HELP,
    RATE_HELP,
    RATE_OVER_HELP,
    RATIONALE_LABEL_HELP,
    RUN_HELP,
    SENTENCES_HELP,
    SPANS_KEY_HELP,
    SPLIT_HELP,
    Command,
    app,
    friendly,
    on_stderr,
    print_line,
    print_scores,
)
from rationale_cli.runs.inference import asked_decoding, check_rate_over, parse_decoding
from rationale_cli.runs.run_directory import load_for_inference
from rationale_cli.runtime.errors import check_at_least


@app.command(cls=Command)
@friendly
def evaluate(
    run: Path = typer.Argument(..., help=RUN_HELP),
    data: str = typer.Argument(..., help="Labelled documents, with gold rationales for precision (or 'demo')."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help=ASPECT_HELP),
    split: str = typer.Option("test", help=SPLIT_HELP),
    id_field: Optional[str] = typer.Option(None, "--id-field", "--id-col", help=ID_HELP),
    rationale_label: Optional[str] = typer.Option(None, help=RATIONALE_LABEL_HELP + " The run's when it was "
                                                  "trained with one."),
    spans_key: Optional[str] = typer.Option(None, help=SPANS_KEY_HELP + " [default: the run's, rationale]"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the metrics as JSON here, with the "
                                            "run directory, data, split and aspect they were measured on."),
    per_document: Optional[Path] = typer.Option(None, help=PER_DOCUMENT_HELP),
    faithfulness: bool = typer.Option(True, "--faithfulness/--no-faithfulness", help="Rerun the model on the "
                                      "documents without their rationale, on the rationale alone and per AOPC "
                                      "bin (12 more passes)."),
    rate: Optional[str] = typer.Option(None, help=RATE_HELP),
    rate_over: str = typer.Option("document", help=RATE_OVER_HELP),
    coherence: Optional[float] = typer.Option(None, help=COHERENCE_HELP),
    sentences: bool = typer.Option(False, "--sentences", help=SENTENCES_HELP),
    epoch: Optional[int] = typer.Option(None, help="Evaluate the weights of this epoch (kept by `train "
                                        "--save-epochs`) instead of the kept epoch's."),
    leakage_probe: bool = typer.Option(False, "--leakage-probe", help="Train a small model on the run's masks of "
                                       "its training documents, their 0/1 pattern alone (no words), and report "
                                       "its score on these documents beside chance: how much the masks' shape "
                                       "alone tells about the label."),
    batch_size: int = typer.Option(64, help=BATCH_HELP),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    force: bool = typer.Option(False, "--force", metavar="", help=FORCE_HELP),
):
    """Task metric, token precision/recall/F1 against gold rationales with chance levels,
    ERASER's metrics, the faithfulness of the rationales and (asked) the leakage probe."""
    from rationale_cli.data import sources
    from rationale_cli.evaluation.scoring import check_score_outputs, evaluate_model, evaluated_on

    check_at_least("--batch-size", batch_size, 1)
    check_score_outputs(json_out, per_document, force, [data])
    check_rate_over(rate, rate_over)
    loaded, dev = load_for_inference(run, device, epoch)
    asked_decoding(loaded, coherence=coherence, sentences=sentences)
    records = list(sources.run_documents(data, loaded.config, fmt=format, aspect=aspect, split=split,
                                         id_field=id_field, rationale_label=rationale_label, spans_key=spans_key))
    decoding, asked = parse_decoding(loaded, rate, rate_over, coherence, sentences=sentences, records=records,
                                     total=len(records), batch_size=batch_size, device=dev, progress=on_stderr,
                                     report=print_line)
    metrics, rows = evaluate_model(loaded, records, batch_size=batch_size, device=dev, faithfulness=faithfulness,
                                   decoding=decoding, progress=on_stderr)
    if leakage_probe:
        from rationale_cli.evaluation.leakage import leakage_probe as probe

        train = list(sources.run_documents(loaded.config.data, loaded.config, split="train"))
        metrics.update(probe(loaded, train, records, batch_size=batch_size, device=dev, decoding=decoding))
    metrics = {**evaluated_on(run, data, loaded.config, fmt=format, aspect=aspect, split=split), **metrics, **asked}
    print_scores(metrics, f"{run.name} on {data}", json_out, per_document, rows)
