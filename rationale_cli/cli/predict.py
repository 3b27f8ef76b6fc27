"""``rationale predict``: annotate a corpus (:mod:`rationale_cli.annotation.predict_job`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from rationale_cli.annotation.engine import UNKNOWN_WARNING, WINDOW
from rationale_cli.cli._util import (ASPECT_HELP, BATCH_HELP, COHERENCE_HELP, DEVICE_HELP, FORMAT_HELP, RATE_HELP,
                                     RATE_OVER_HELP, RUN_HELP, SENTENCES_HELP, SPLIT_HELP, Command, app,
                                     check_at_least, check_rate_over, friendly, load_for_inference, parse_decoding,
                                     progress_reporter, signal_name, stderr)
from rationale_cli.runs.inference import asked_decoding
from rationale_cli.runtime.errors import UserError


@app.command(cls=Command)
@friendly
def predict(
    run: Path = typer.Argument(..., help=RUN_HELP),
    input: str = typer.Argument(..., help="Documents: text (one per line), JSONL, CSV/TSV, beer or ERASER."),
    out: Path = typer.Option(..., "--out", "-o", help="Output file: .jsonl, .csv or .parquet, or ERASER results "
                             "with --output-format eraser ('-': JSONL on standard output)."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help=ASPECT_HELP),
    split: str = typer.Option("test", help=SPLIT_HELP),
    text_col: Optional[str] = typer.Option(None, help="CSV/TSV text column (default: the run's)."),
    id_field: str = typer.Option("id", "--id-field", "--id-col", help="JSONL field or CSV/TSV column holding "
                                 "each document's id (missing: its line or row number)."),
    output_format: str = typer.Option("auto", help="jsonl, csv, parquet or eraser (ERASER's results format, "
                                      "with faithfulness scores; auto: from --out's extension)."),
    batch_size: int = typer.Option(64, help=BATCH_HELP),
    window: int = typer.Option(WINDOW, help="Documents read, sorted by length and written at a time (at "
                               "least 1); a rerun continues after the last whole window."),
    shard: str = typer.Option("0/1", help="I/N: annotate windows I, I+N, I+2N, ... of the input, for N "
                              "processes or machines (see `rationale merge`)."),
    threads: int = typer.Option(0, help="CPU threads for torch (0: torch's default)."),
    workers: int = typer.Option(1, help="Processes annotating windows on the CPU, one thread each (at least "
                                "1); e.g. the number of cores, for recurrent models. Same output as one "
                                "process with --threads 1."),
    rate: Optional[str] = typer.Option(None, help=RATE_HELP),
    rate_over: str = typer.Option("document", help=RATE_OVER_HELP + " Corpus reads the input twice."),
    coherence: Optional[float] = typer.Option(None, help=COHERENCE_HELP),
    sentences: bool = typer.Option(False, "--sentences", help=SENTENCES_HELP),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    force: bool = typer.Option(False, "--force", metavar="", help="Replace an existing output (or an "
                               "interrupted run's) instead of refusing or continuing it."),
    engine: str = typer.Option("local", help="local, or dask: partitions on a Dask cluster (Parquet out; "
                               "needs the scale extra)."),
    scheduler: Optional[str] = typer.Option(None, help="Dask scheduler address for --engine dask "
                                            "(default: a local cluster)."),
):
    """Write one record per document: prediction, rationale spans, selected tokens, token scores.

    Interrupted (Ctrl-C, SIGTERM, a lost machine), the same command continues where it
    stopped. INPUT '-' reads standard input, --out - writes standard output:
    rationale predict RUN - --out - | jq
    """
    from rationale_cli.annotation.predict_job import (annotate_on_dask, annotate_prediction, check_model_output,
                                                      plan_prediction, refuse_finished_output)
    from rationale_cli.runtime.devices import flush_denormals

    flush_denormals()  # this process's own: the API leaves the caller's floats as they are

    check_at_least("--batch-size", batch_size, 1)
    check_at_least("--window", window, 1)
    check_at_least("--threads", threads, 0)
    check_at_least("--workers", workers, 1)
    check_rate_over(rate, rate_over)
    job = plan_prediction(run, input, out, format=format, aspect=aspect, split=split, text_col=text_col,
                          id_field=id_field, output_format=output_format, batch_size=batch_size, window=window,
                          shard=shard, threads=threads, workers=workers, device=device, engine=engine,
                          whole_input=rate_over == "corpus")
    if job.engine == "dask":
        asked = [name for name, given in (("rate", rate is not None), ("coherence", coherence is not None),
                                          ("sentences", sentences)) if given]
        if asked:
            raise UserError(f"--{asked[0]} is not available with --engine dask")
        count = annotate_on_dask(job, scheduler)
        stderr().print(f"wrote {count:,} predictions to {out}", highlight=False)
        return
    loaded, dev = load_for_inference(run, job.device)
    asked_decoding(loaded, coherence=coherence, sentences=sentences)
    check_model_output(job, loaded)
    total = job.total()
    scored = None
    if rate_over == "corpus":
        refuse_finished_output(job, force)  # before the scoring pass, not after it
        scored = job.records(loaded.config)
    decoding, _ = parse_decoding(loaded, rate, rate_over, coherence, sentences=sentences, records=scored,
                                 batch_size=batch_size, device=dev,
                                 scoring=lambda: progress_reporter(stderr(), total, doing="scoring"))
    with progress_reporter(stderr(), total) as advance:
        tally, stopped = annotate_prediction(job, loaded, dev, force=force, progress=advance, decoding=decoding)
    speed = tally.documents / tally.seconds if tally.seconds else 0.0
    where = "standard output" if str(out) == "-" else str(out)
    if stopped is not None:  # only the partial output is there: OUT is written when the run completes
        before = f" ({tally.documents + tally.resumed:,} in all)" if tally.resumed else ""
        stderr().print(f"stopped by {signal_name(stopped)} after {tally.documents:,} more documents{before}; "
                       f"{where} is not written yet: run the same command again to continue", highlight=False)
    else:
        if tally.resumed:
            where += f" after the {tally.resumed:,} of the interrupted run"
        stderr().print(f"wrote {tally.documents:,} predictions to {where}: {tally.tokens:,} tokens, "
                       f"{100 * tally.unknown_share:.1f}% unknown to the model's vocabulary, {speed:,.0f} "
                       "documents/s", highlight=False)
    if tally.unknown_share > UNKNOWN_WARNING:
        stderr().print(Text(f"warning: {100 * tally.unknown_share:.0f}% of the tokens are unknown to the model's "
                            "vocabulary, so its predictions say little about these documents (was it trained on "
                            "text like them?)", style="yellow"))
    if stopped is not None:
        raise typer.Exit(128 + stopped)
