"""``rationale predict``: annotate a corpus, one library call
(:func:`rationale_cli.annotation.predict_job.predict` of a
:class:`~rationale_cli.annotation.predict_job.PredictRequest`), which the Python API makes too."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.text import Text

from rationale_cli.annotation.engine import WINDOW
from rationale_cli.cli._util import (
    ASPECT_HELP,
    BATCH_HELP,
    COHERENCE_HELP,
    DEVICE_HELP,
    FORMAT_HELP,
    ID_HELP,
    RATE_HELP,
    RATE_OVER_HELP,
    RUN_HELP,
    SENTENCES_HELP,
    SPLIT_HELP,
    Command,
    app,
    friendly,
    on_stderr,
    print_line,
    signal_name,
    stderr,
)
from rationale_cli.runtime.errors import plural

if TYPE_CHECKING:
    from rationale_cli.annotation.predict_job import Predicted


@app.command(cls=Command)
@friendly
def predict(
    run: Path = typer.Argument(..., help=RUN_HELP),
    input: str = typer.Argument(..., help="Documents: text (one per line), JSONL, CSV/TSV, beer or ERASER."),
    out: Path = typer.Option(..., "--out", "-o", help="Output file: .jsonl, .csv, .parquet or .spacy (spaCy "
                             "documents), or ERASER results or Label Studio tasks with --output-format ('-': JSONL "
                             "on standard output)."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help=ASPECT_HELP),
    split: str = typer.Option("test", help=SPLIT_HELP),
    text_col: Optional[str] = typer.Option(None, help="CSV/TSV text column (default: the run's)."),
    id_field: Optional[str] = typer.Option(None, "--id-field", "--id-col", help=ID_HELP),
    output_format: str = typer.Option("auto", help="jsonl, csv, parquet, eraser (ERASER's results format, "
                                      "with faithfulness scores), label-studio (tasks with the rationale as "
                                      "pre-annotations) or spacy (a DocBin; auto: from --out's extension)."),
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
    from rationale_cli.annotation.predict_job import PredictRequest
    from rationale_cli.annotation.predict_job import predict as annotate_corpus
    from rationale_cli.runtime.devices import flush_denormals

    flush_denormals()  # this process's own: the API leaves the caller's floats as they are
    request = PredictRequest(run, input, out, format=format, aspect=aspect, split=split, text_col=text_col,
                             id_field=id_field, output_format=output_format, batch_size=batch_size, window=window,
                             shard=shard, threads=threads, workers=workers, rate=rate, rate_over=rate_over,
                             coherence=coherence, sentences=sentences, device=device, force=force, engine=engine,
                             scheduler=scheduler)
    done = annotate_corpus(request, progress=on_stderr, report=print_line)
    print_outcome(done)
    if done.stopped is not None:
        raise typer.Exit(128 + done.stopped)


def print_outcome(done: Predicted) -> None:
    """What predict says at the end, on standard error: what it wrote (or where it stopped and
    how to continue), and a warning when most tokens were unknown to the model."""
    if done.engine == "dask":
        print_line(f"wrote {plural(done.documents, 'prediction')} to {done.out}")
        return
    where = done.where
    if done.stopped is not None:  # only the partial output is there: OUT is written when the run completes
        before = f" ({done.documents + done.resumed:,} in all)" if done.resumed else ""
        print_line(f"stopped by {signal_name(done.stopped)} after {done.documents:,} more documents{before}; "
                   f"{where} is not written yet: run the same command again to continue")
    else:
        if done.resumed:
            where += f" after the {done.resumed:,} of the interrupted run"
        print_line(f"wrote {plural(done.documents, 'prediction')} to {where}: {done.tokens:,} tokens, "
                   f"{100 * done.unknown_share:.1f}% unknown to the model's vocabulary, {done.speed:,.0f} "
                   "documents/s")
    if done.mostly_unknown:
        stderr().print(Text(f"warning: {100 * done.unknown_share:.0f}% of the tokens are unknown to the model's "
                            "vocabulary, so its predictions say little about these documents (was it trained on "
                            "text like them?)", style="yellow"))
