"""The ``rationale`` command: train, predict, merge, vectors, explain, evaluate, score, report, demo.

Thin by design: commands parse options, call library functions and print with
rich. Progress and logs go to stderr, data to stdout or files. A user error
prints one line and exits with status 2.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.console import Console
from rich.table import Table
from rich.text import Text

from models.selectors import SELECTORS
from rationale_cli.runs.config import TRAIN_SPECS, TrainConfig, resolve, resume_config
from rationale_cli.runtime.atomic import writable_target
from rationale_cli.runtime.errors import UserError
from rationale_cli.cli.flags import extractor_epilog, train_parameters
from rationale_cli.annotation.engine import UNKNOWN_WARNING, WINDOW
from rationale_cli.data.readers import FORMATS


def unlabelled_help(cls):
    """A typer command class whose ``--help`` is shown as the switch it is (no ``<bool>``)."""

    class Unlabelled(cls):
        def get_help_option(self, ctx):
            option = super().get_help_option(ctx)
            if option is not None:
                option.metavar = ""
            return option

    return Unlabelled


Command = unlabelled_help(typer.core.TyperCommand)

app = typer.Typer(
    cls=unlabelled_help(typer.core.TyperGroup),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Rationale extraction: train select-then-predict models, then predict, explain and evaluate their rationales.",
)

FORMAT_HELP = ", ".join(FORMATS)
# the settings of `rationale demo`, written out in examples/demo.toml (a test keeps them equal)
DEMO_SETTINGS = dict(extractor="hardkuma", budget=0.2, transitions=0.06, embedding_dim=50, hidden_size=64,
                     batch_size=20, lr=0.002, patience=0, epochs=12)


def show_version(value: bool) -> None:
    if value:
        from rationale_cli import __version__

        typer.echo(f"rationale-cli {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=show_version, is_eager=True, metavar="",
                                 help="Print the version and exit."),
):
    """Rationale extraction: train select-then-predict models, then predict, explain and evaluate their rationales."""


def stderr() -> Console:
    """Progress and messages; no markup, so paths and texts print as they are."""
    return Console(stderr=True, soft_wrap=True, markup=False)


def stdout() -> Console:
    return Console(markup=False)


def friendly(command):
    """Turn a UserError into one red line on stderr and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserError as err:
            stderr().print(Text(f"error: {err}", style="bold red"), soft_wrap=True)
            raise typer.Exit(2) from None
        except FloatingPointError as err:  # a model whose scores left the range its extractor can use
            stderr().print(Text(f"error: non-finite or out-of-range values in the model ({err})", style="bold red"),
                           soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            stderr().print(Text("interrupted", style="bold red"))
            raise typer.Exit(130) from None

    return wrapper


def train(out: Path, config: Optional[Path], force: bool, resume: bool, verbose: bool = False, **options):
    """Train a select-then-predict model and write a run directory."""
    from rationale_cli.training.distributed import process_group, rank
    from rationale_cli.training.trainer import train_config

    cfg = resumed(out, config, force, options) if resume else resolve(config, options)
    if not cfg.data:
        raise UserError("no training data: give --data PATH (or 'demo'), or data = ... in --config")
    console = stderr()
    with process_group(cfg.device):
        trained = train_config(cfg, out, console, force=force, resume=resume, verbose=verbose)
        if rank() > 0:
            return
    console.print(f"best epoch {trained.state.best['epoch']}; run saved to {out}", highlight=False)
    valid = trained.state.best["valid"]
    stdout().print(f"validation ({valid['documents']:,} documents)", style="bold", highlight=False)
    stdout().print(metrics_table(valid))


def train_command():
    """``train`` as typer sees it: the fixed options, then every declared option (:mod:`flags`)."""
    fixed = [
        inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation=Path,
                          default=typer.Option(..., help="Run directory to create.", rich_help_panel="Run")),
        inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],
                          default=typer.Option(None, help="TOML file with any of these options as keys "
                                               "(the command line wins).", rich_help_panel="Run")),
        inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--force", metavar="", help="Replace an existing run directory.",
                                               rich_help_panel="Run")),
        inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--resume", metavar="", help="Go on training the run in --out after "
                                               "its last finished epoch, as if it had not stopped; only --epochs, "
                                               "--time-limit, --patience, --device and where the data is read "
                                               "from may change.", rich_help_panel="Run")),
        inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--verbose", "-v", metavar="", help="Show every training "
                                               "statistic of the extractor on the epoch lines.",
                                               rich_help_panel="Run")),
    ]
    command = friendly(train)
    command.__signature__ = inspect.Signature(fixed + train_parameters())
    return command


app.command("train", cls=Command, epilog=extractor_epilog())(train_command())


def resumed(out: Path, config: Optional[Path], force: bool, options: dict) -> TrainConfig:
    """The options of the run in ``out`` to go on with (``train --resume``)."""
    from rationale_cli.training.checkpoint import RESUME
    from rationale_cli.runs.run_directory import read_json, require_run_files

    if config is not None or force:
        raise UserError("--resume goes on with the run's own options and files; it takes no --config or --force")
    if not (out / RESUME).is_file():
        raise UserError(f"{out}: nothing to resume (no {RESUME}; runs save it after each epoch)")
    require_run_files(out)
    return resume_config(read_json(out / "config.json"), options, str(out / "config.json"))


CHANCE = {"precision": "gold_share", "mse": "mse_of_mean", "accuracy": "majority_accuracy"}


def shown_value(key: str, value) -> str:
    if value is None:
        return "-"
    if key in ("mse", "mae", "mse_of_mean"):
        return f"{value:.5f}"
    if key in ("documents", "documents_with_gold"):
        return f"{value:,}"
    if key == "test_rate":
        return f"k={value}" if isinstance(value, int) else f"{100 * value:.1f}%"
    if key == "test_rate_over":
        return value
    if key == "test_threshold":
        return f"{value:.4g}"
    if key in ("transitions",):
        return f"{value:.2f}"
    return f"{100 * value:.1f}%"


def metrics_table(metrics: dict) -> Table:
    """The toolkit's scores, with the chance level beside those that have one."""
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("chance", justify="right", style="dim")
    order = ["mse", "mae", "accuracy", "macro_f1", "test_rate", "test_rate_over", "test_threshold", "test_coherence",
             "selection_rate", "precision", "recall", "f1",
             "precision_macro", "recall_macro", "f1_macro", "transitions", "documents", "documents_with_gold"]
    for key in order:
        if key in metrics:
            chance = CHANCE.get(key)
            table.add_row(key, shown_value(key, metrics[key]),
                          shown_value(chance, metrics.get(chance)) if chance in metrics else "")
    return table


def eraser_table(metrics: dict) -> Table | None:
    """ERASER's headline scores and the faithfulness of the rationales."""
    eraser = metrics.get("eraser", {})
    # a model's reruns, else the faithfulness scores a results file supplied
    faith = metrics.get("faithfulness") or eraser.get("classification_scores", {})
    rows = []
    if "token_prf" in eraser:
        rows += [("token F1 (macro, ERASER)", eraser["token_prf"]["instance_macro"]["f1"]),
                 (f"IOU F1 @{eraser['iou_scores'][0]['threshold']:g} (macro)", eraser["iou_scores"][0]["macro"]["f1"]),
                 ("span match F1 (micro)", eraser["rationale_prf"]["instance_micro"]["f1"])]
    soft = eraser.get("token_soft_metrics", {})
    rows += [(name, soft[key]) for name, key in (("AUPRC", "auprc"), ("average precision", "average_precision"),
                                                 ("ROC-AUC", "roc_auc_score")) if key in soft]
    for key in ("comprehensiveness", "sufficiency", "comprehensiveness_aopc", "sufficiency_aopc",
                "predictor_on_rationale", "predictor_on_complement"):
        if faith.get(key) is not None:
            rows.append((key.replace("_", " "), faith[key]))
    if not rows:
        return None
    table = Table()
    table.add_column("ERASER / faithfulness")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, "-" if value is None else f"{value:.3f}")
    return table


def check_score_outputs(json_out: Optional[Path], per_document: Optional[Path]) -> None:
    """Refuse outputs that cannot be written, before any work."""
    if str(json_out) == "-" and str(per_document) == "-":
        raise UserError("--json - and --per-document -: only one of them can go to standard output")
    for target in (json_out, per_document):
        if target is not None and str(target) != "-":
            writable_target(target)


def print_scores(metrics: dict, title: str, json_out: Optional[Path], per_document: Optional[Path],
                 rows: list[dict]) -> None:
    """The tables (on standard error when the JSON goes to standard output), then the files."""
    from rationale_cli.output.prediction import to_json_line
    from rationale_cli.runs.run_directory import write_json
    from rationale_cli.runtime.atomic import write_text_atomic

    shown = stderr() if "-" in (str(json_out), str(per_document)) else stdout()  # standard output holds data then
    shown.print(title, soft_wrap=True, highlight=False, style="bold")
    shown.print(metrics_table(metrics))
    extra = eraser_table(metrics)
    if extra is not None:
        shown.print(extra)
    if json_out is not None:
        write_json(json_out, metrics)
        stderr().print(f"wrote {json_out}", highlight=False)
    if per_document is not None:
        write_text_atomic(per_document, "".join(to_json_line(row) for row in rows))
        stderr().print(f"wrote {len(rows):,} document scores to {per_document}", highlight=False)


def check_at_least(flag: str, value: int, low: int) -> None:
    if value < low:
        raise UserError(f"{flag} {value}: expected an integer >= {low}")


RATE_HELP = ("Hold each document's rationale at this size: a share of its tokens (0.13) or a count (10), its "
             "best-scored tokens (default: the extractor's own decoding).")


RATE_OVER_HELP = ("With --rate: document (each document at that size) or corpus (one score threshold for all "
                  "the documents, keeping that share of all their tokens: each document keeps those it "
                  "scores above it).")


def check_rate_over(rate: Optional[str], rate_over: str) -> None:
    """``--rate-over``: one of its two scopes, and corpus only with a share to hold."""
    if rate_over not in ("document", "corpus"):
        raise UserError(f"--rate-over {rate_over}: expected document or corpus")
    if rate_over == "corpus" and rate is None:
        raise UserError("--rate-over corpus: give the share to hold with --rate")


def test_budget(loaded, rate: str):
    """``rate`` as a :class:`models.budget.Budget` for the loaded run, or one error line."""
    from models.budget import Budget

    if loaded.config.extractor == "full":
        raise UserError("--rate: the full extractor scores every token alike, so it has no best tokens to keep")
    try:
        return Budget.parse(rate)
    except ValueError as err:
        raise UserError(f"--rate {err}") from None


COHERENCE_HELP = ("Decode with this cost per 0/1 transition between adjacent tokens, subtracted from every "
                  "mask's score: fewer, longer spans (sparsemap and topk-sparsemax; default: the run's own "
                  "--coherence).")


def set_test_coherence(loaded, coherence: Optional[float]) -> dict:
    """Decode a mask-set run with ``coherence`` as its transition cost (the trained weights
    unchanged); what to report of it."""
    from models.selectors.mask_set import MaskSetSelector

    if coherence is None:
        return {}
    selector = loaded.model.selector
    if not isinstance(selector, MaskSetSelector):
        raise UserError(f"--coherence {coherence}: decoding with a transition cost applies to sparsemap and "
                        f"topk-sparsemax runs, not --extractor {loaded.config.extractor}")
    if coherence < 0:
        raise UserError(f"--coherence {coherence}: expected a number >= 0")
    selector.test_coherence = coherence
    return {"test_coherence": coherence}


def set_test_rate(loaded, rate: Optional[str]) -> None:
    """Decode at ``rate`` (a budget: share or count) instead of the extractor's own decision."""
    if rate is not None:
        loaded.model.test_rate = test_budget(loaded, rate)


def set_corpus_threshold(loaded, rate: str, records, batch_size: int, device) -> dict:
    """Decode every document at one score threshold that keeps the share ``rate`` of all the
    ``records``' tokens (:func:`rationale_cli.runs.inference.corpus_threshold`); what to report of it."""
    from rationale_cli.runs.inference import corpus_threshold

    budget = test_budget(loaded, rate)
    if budget.share is None:
        raise UserError(f"--rate {rate} --rate-over corpus: expected a share of the corpus's tokens, not a count")
    try:
        loaded.model.test_threshold = corpus_threshold(loaded.model, loaded.vocab, records, budget.share,
                                                       batch_size=batch_size, device=device)
    except ValueError as err:
        raise UserError(f"--rate-over corpus: {err}") from None
    return {"test_rate": budget.share, "test_rate_over": "corpus", "test_threshold": loaded.model.test_threshold}


def load_for_inference(run: Path, device: str, epoch: int | None = None):
    from rationale_cli.runtime.devices import resolve_device
    from rationale_cli.runs.run_directory import load_run

    dev = resolve_device(device)
    return load_run(run, dev, epoch), dev


@app.command(cls=Command)
@friendly
def predict(
    run: Path = typer.Argument(..., help="Run directory from `rationale train`."),
    input: str = typer.Argument(..., help="Documents: text (one per line), JSONL, CSV/TSV, beer or ERASER."),
    out: Path = typer.Option(..., "--out", "-o", help="Output file: .jsonl, .csv or .parquet, or ERASER results "
                             "with --output-format eraser ('-': JSONL on standard output)."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect (default: the run's)."),
    split: str = typer.Option("test", help="Split of an ERASER folder or of the demo corpus: train, val or test."),
    text_col: Optional[str] = typer.Option(None, help="CSV/TSV text column (default: the run's)."),
    id_field: str = typer.Option("id", "--id-field", "--id-col", help="JSONL field or CSV/TSV column holding "
                                 "each document's id (missing: its line or row number)."),
    output_format: str = typer.Option("auto", help="jsonl, csv, parquet or eraser (ERASER's results format, "
                                      "with faithfulness scores; auto: from --out's extension)."),
    batch_size: int = typer.Option(64, help="Documents per batch (at least 1)."),
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
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
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
    import torch

    from rationale_cli.data import sources
    from rationale_cli.annotation.engine import Job, Shard, annotate, count_documents, refuse_finished
    from rationale_cli.output.prediction import check_output
    from rationale_cli.output.writers import output_format as choose_format

    check_at_least("--batch-size", batch_size, 1)
    check_at_least("--window", window, 1)
    check_at_least("--threads", threads, 0)
    check_at_least("--workers", workers, 1)
    check_rate_over(rate, rate_over)
    parts = Shard.parse(shard)
    if rate_over == "corpus" and parts.count > 1:
        raise UserError("--rate-over corpus holds the share over the whole input, which a shard does not see")
    fmt_out = choose_format(out, output_format)
    if str(out) == "-" and fmt_out == "parquet":
        raise UserError("--out -: standard output takes jsonl or csv, not parquet")
    if engine not in ("local", "dask"):
        raise UserError(f"--engine {engine}: expected local or dask")
    if workers > 1 and (engine == "dask" or device.startswith("cuda")):
        raise UserError("--workers: processes on this machine's CPU, not with --engine dask or --device cuda")
    if workers > 1:
        device = "cpu"  # what the workers run on, whatever auto would choose
    if threads:
        torch.set_num_threads(threads)
    input = sources.from_stdin() if input == "-" else input
    check_output(out, input)
    if engine == "dask":
        from rationale_cli.annotation import dask_engine

        if rate is not None or coherence is not None:
            raise UserError(f"--{'rate' if rate is not None else 'coherence'} is not available with --engine dask")
        count = dask_engine.annotate(input, str(run), out, scheduler=scheduler, text_col=text_col or "text",
                                     id_col=None if id_field == "id" else id_field, batch_size=batch_size,
                                     device="cpu" if device == "auto" else device)
        stderr().print(f"wrote {count:,} predictions to {out}", highlight=False)
        return
    loaded, dev = load_for_inference(run, device)
    set_test_coherence(loaded, coherence)
    if fmt_out == "eraser" and loaded.task.name != "classification":
        raise UserError("--output-format eraser: ERASER results hold class scores; this model predicts a score "
                        "(a regression run)")
    reader = dict(fmt=format, aspect=aspect, text_col=text_col, id_field=id_field, split=split)
    total = count_documents(input) if parts.count == 1 else None  # a shard's share is not known in advance
    if total and (format in ("csv", "tsv") or (format == "auto" and Path(input).suffix.lower() in (".csv", ".tsv"))):
        total -= 1  # the header
    if rate_over == "corpus":
        target = None if force or str(out) == "-" else writable_target(out)
        if target is not None:  # refused before the scoring pass, not after it
            refuse_finished(target)
        with progress_reporter(stderr(), total, doing="scoring") as advance:
            counted = (advance(1) or record for record in
                       sources.run_documents(input, loaded.config, labelled=False, **reader))
            share = set_corpus_threshold(loaded, rate, counted, batch_size, dev)["test_rate"]
        stderr().print(f"decoding at threshold {loaded.model.test_threshold:.6g}, which keeps {100 * share:g}% of "
                       "the input's tokens", highlight=False)
    else:
        set_test_rate(loaded, rate)
    job = Job(input, out, fmt_out, reader, batch_size, window, parts, workers)
    records = sources.run_documents(input, loaded.config, labelled=False, **reader)
    with progress_reporter(stderr(), total) as advance:
        tally, stopped = annotate(job, loaded, records, dev, force=force, progress=advance)
    rate = tally.documents / tally.seconds if tally.seconds else 0.0
    where = "standard output" if str(out) == "-" else str(out)
    if tally.resumed:
        where += f" after the {tally.resumed:,} of the interrupted run"
    stderr().print(f"wrote {tally.documents:,} predictions to {where}: {tally.tokens:,} tokens, "
                   f"{100 * tally.unknown_share:.1f}% unknown to the model's vocabulary, {rate:,.0f} documents/s",
                   highlight=False)
    if tally.unknown_share > UNKNOWN_WARNING:
        stderr().print(Text(f"warning: {100 * tally.unknown_share:.0f}% of the tokens are unknown to the model's "
                            "vocabulary, so its predictions say little about these documents (was it trained on "
                            "text like them?)", style="yellow"))
    if stopped is not None:
        stderr().print(f"stopped by {signal_name(stopped)} after {tally.documents:,} more documents; run the same "
                       "command again to continue", highlight=False)
        raise typer.Exit(128 + stopped)


def signal_name(number: int) -> str:
    import signal

    return signal.Signals(number).name


@contextlib.contextmanager
def progress_reporter(console: Console, total: int | None, every: float = 10.0, doing: str = "predicting",
                      unit: str = "documents"):
    """``advance(n)`` for the units done: a bar with percentage and ETA on a terminal
    (a spinner without ``total``), else a plain line every ``every`` seconds."""
    import time

    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if not console.is_terminal:
        state = {"done": 0, "last": time.monotonic(), "start": time.monotonic()}

        def advance(n: int) -> None:
            state["done"] += n
            now = time.monotonic()
            if now - state["last"] >= every:
                state["last"] = now
                rate = state["done"] / (now - state["start"])
                share = f" of {total:,} ({100 * state['done'] / total:.0f}%)" if total else ""
                eta = f", {max(total - state['done'], 0) / rate:,.0f}s left" if total and rate else ""
                speed = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
                console.print(f"{doing}: {state['done']:,}{share} {unit}, {speed}/s{eta}", highlight=False)

        yield advance
        return
    columns = [SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed:,} " + unit),
               TimeElapsedColumn()]
    if total:
        columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                   TextColumn("{task.completed:,}/{task.total:,}"), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=True) as bar:
        job = bar.add_task(doing, total=total)
        yield lambda n: bar.update(job, advance=n)


@app.command(cls=Command)
@friendly
def merge(
    parts: list[Path] = typer.Argument(..., help="The outputs of `predict --shard 0/N` ... `--shard N-1/N`, "
                                       "in that order (JSONL or CSV)."),
    out: Path = typer.Option(..., "--out", "-o", help="The merged output, in input order."),
    window: int = typer.Option(WINDOW, help="The --window the shards were annotated with."),
):
    """Merge the outputs of a sharded `predict` back into input order."""
    from rationale_cli.annotation.engine import merge as merge_parts

    check_at_least("--window", window, 1)
    for part in parts:
        if not part.is_file():
            raise UserError(f"{part}: no such file")
    if len({part.suffix.lower() for part in parts}) > 1:
        raise UserError("the parts have different formats; merge JSONL parts or CSV parts")
    writable_target(out)
    count = merge_parts(parts, out, window)
    stderr().print(f"wrote {count:,} predictions to {out}", highlight=False)


@app.command(cls=Command)
@friendly
def vectors(
    corpus: list[str] = typer.Argument(..., help="Unlabeled text in any input format (several files: one corpus)."),
    out: Path = typer.Option(..., "--out", "-o", help="Vectors file to write, word2vec text (.gz: compressed)."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    text_col: str = typer.Option("text", help="CSV/TSV text column."),
    dim: int = typer.Option(200, help="Vector size."),
    window: int = typer.Option(5, help="Context words on each side."),
    min_count: int = typer.Option(2, help="Leave out words seen fewer times."),
    epochs: int = typer.Option(10, help="Passes over the corpus."),
    seed: int = typer.Option(0, help="Random seed (one worker thread: the same vectors every run)."),
    force: bool = typer.Option(False, "--force", metavar="", help="Replace an existing --out."),
):
    """Train domain word vectors (word2vec skip-gram) on unlabeled text, for `train --embeddings`.

    Needs gensim: pip install "rationale-cli\\[vectors]". Repeated documents count once.
    """
    from rationale_cli.data import sources
    from rationale_cli.data.word2vec import VectorOptions, distinct_texts, import_gensim, train_vectors, write_vectors

    for flag, value in (("--dim", dim), ("--window", window), ("--min-count", min_count), ("--epochs", epochs)):
        check_at_least(flag, value, 1)
    import_gensim()
    if str(out) == "-":
        raise UserError("--out -: word vectors go to a file, not to standard output")
    writable_target(out)
    if out.exists() and not force:
        raise UserError(f"{out}: exists; use --force to replace it")
    texts = distinct_texts(record for path in corpus
                           for record in sources.stream(path, "train", fmt=format, text_col=text_col, label_col=None))
    stderr().print(f"{len(texts):,} distinct documents, {sum(map(len, texts)):,} tokens", highlight=False)
    with progress_reporter(stderr(), epochs, doing="training word vectors", unit="epochs") as advance:
        trained = train_vectors(texts, VectorOptions(dim, window, min_count, epochs, seed=seed),
                                on_epoch=lambda _: advance(1))
    write_vectors(trained, out)
    stderr().print(f"wrote {len(trained):,} words x {dim} to {out}", highlight=False)


@app.command(cls=Command)
@friendly
def explain(
    run: Path = typer.Argument(..., help="Run directory from `rationale train`."),
    text: Optional[str] = typer.Argument(None, help="A text to explain."),
    input: Optional[str] = typer.Option(None, "--input", "-i", help="Documents to explain (a file, folder or 'demo')."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect (default: the run's)."),
    limit: int = typer.Option(5, help="Explain at most this many documents from --input, 0 = all."),
    html: Optional[Path] = typer.Option(None, help="Also write a self-contained HTML page here."),
    coherence: Optional[float] = typer.Option(None, help=COHERENCE_HELP),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
):
    """Show documents with their rationale highlighted (against gold where present)."""
    from itertools import islice

    from rationale_cli.data import sources
    from rationale_cli.runtime.atomic import write_text_atomic
    from rationale_cli.runs.inference import run_model
    from rationale_cli.data.records import Record
    from rationale_cli.output.render import print_documents, render_html
    from rationale_cli.data.tokenize import tokenize

    if text is None and input is None:
        raise UserError("nothing to explain: give a TEXT or --input FILE")
    if text is not None and input is not None:
        raise UserError("give a TEXT to explain or --input FILE, not both")
    check_at_least("--limit", limit, 0)
    if html is not None and str(html) != "-":
        writable_target(html)
    loaded, dev = load_for_inference(run, device)
    set_test_coherence(loaded, coherence)
    cfg = loaded.config
    if text is not None:
        tokens, offsets = tokenize(text)
        if not tokens:
            raise UserError("the text to explain is empty")
        records = iter([Record(id="text", tokens=tokens, text=text, offsets=offsets)])
    else:
        records = sources.run_documents(input, cfg, fmt=format, aspect=aspect, labelled=False)
        if limit > 0:
            records = islice(records, limit + 1)
    results = list(run_model(loaded.model, loaded.vocab, loaded.task, records, device=dev))
    more = text is None and limit > 0 and len(results) > limit
    results = results[:limit] if more else results
    console = stderr() if str(html) == "-" else stdout()  # standard output holds the page then
    items = print_documents(console, results)
    if more:
        stderr().print(f"the first {limit} documents of {input} shown; it has more (--limit N, or --limit 0 for all)",
                       highlight=False)
    if html is not None:
        write_text_atomic(html, render_html(items, title=f"Rationales of {run.name}"))
        stderr().print(f"wrote {html}", highlight=False)


@app.command(cls=Command)
@friendly
def evaluate(
    run: Path = typer.Argument(..., help="Run directory from `rationale train`."),
    data: str = typer.Argument(..., help="Labelled documents, with gold rationales for precision (or 'demo')."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect (default: the run's)."),
    split: str = typer.Option("test", help="Split of an ERASER folder or of the demo corpus: train, val or test."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the metrics as JSON here."),
    per_document: Optional[Path] = typer.Option(None, help="Also write each document's scores here (JSONL)."),
    faithfulness: bool = typer.Option(True, "--faithfulness/--no-faithfulness", help="Rerun the model on the "
                                      "documents without their rationale, on the rationale alone and per AOPC "
                                      "bin (12 more passes)."),
    rate: Optional[str] = typer.Option(None, help=RATE_HELP),
    rate_over: str = typer.Option("document", help=RATE_OVER_HELP),
    coherence: Optional[float] = typer.Option(None, help=COHERENCE_HELP),
    epoch: Optional[int] = typer.Option(None, help="Evaluate the weights of this epoch (kept by `train "
                                        "--save-epochs`) instead of the kept epoch's."),
    batch_size: int = typer.Option(64, help="Documents per batch (at least 1)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
):
    """Task metric, token precision/recall/F1 against gold rationales with chance levels,
    ERASER's metrics and the faithfulness of the rationales."""
    from rationale_cli.data import sources
    from rationale_cli.evaluation.scoring import evaluate_model

    check_at_least("--batch-size", batch_size, 1)
    check_score_outputs(json_out, per_document)
    check_rate_over(rate, rate_over)
    loaded, dev = load_for_inference(run, device, epoch)
    asked = set_test_coherence(loaded, coherence)
    records = list(sources.run_documents(data, loaded.config, fmt=format, aspect=aspect, split=split))
    if rate_over == "corpus":
        asked.update(set_corpus_threshold(loaded, rate, records, batch_size, dev))
    else:
        set_test_rate(loaded, rate)
    metrics, rows = evaluate_model(loaded, records, batch_size=batch_size, device=dev, faithfulness=faithfulness)
    metrics.update(asked)
    print_scores(metrics, f"{run.name} on {data}", json_out, per_document, rows)


@app.command(cls=Command)
@friendly
def score(
    predictions: Path = typer.Argument(..., help="Predictions: `rationale predict` JSONL or an ERASER results "
                                       "file (from any tool)."),
    gold: str = typer.Argument(..., help="Gold documents: an ERASER folder, beer annotations, JSONL with "
                               "rationale spans, or 'demo'."),
    format: str = typer.Option("auto", help=f"Gold format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect of the gold annotations."),
    split: str = typer.Option("test", help="Split of an ERASER folder or of the demo corpus: train, val or test."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the scores as JSON here."),
    per_document: Optional[Path] = typer.Option(None, help="Also write each document's scores here (JSONL)."),
):
    """Score an existing predictions file against gold, without a model: token and span
    agreement, soft-score metrics and, from the scores the file holds, faithfulness."""
    from rationale_cli.data import sources
    from rationale_cli.evaluation.scoring import score_file

    check_score_outputs(json_out, per_document)
    records = list(sources.stream(gold, split, fmt=format, aspect=aspect))
    metrics, rows = score_file(predictions, records)
    print_scores(metrics, f"{predictions} against {gold}", json_out, per_document, rows)


@app.command(cls=Command)
@friendly
def demo(
    out: Optional[Path] = typer.Option(None, help="Keep the demo's run directory here.",
                                       show_default="a temporary one"),
    extractor: str = typer.Option("hardkuma", help="Extractor to train (see train --help)."),
    encoder: Optional[str] = typer.Option(None, help="Architecture (see train --help).",
                                          show_default="the extractor's own"),
    epochs: int = typer.Option(DEMO_SETTINGS["epochs"], help="Training epochs."),
    seed: int = typer.Option(0, help="Random seed."),
):
    """Train on a synthetic review corpus, evaluate against its gold rationales, explain a few reviews.

    The settings are those of examples/demo.toml: `rationale train --data demo --config
    examples/demo.toml --out RUN` trains the same model.
    """
    from models.selectors import option_specs

    workdir = out or Path(tempfile.mkdtemp(prefix="rationale-demo-"))
    own = option_specs(extractor) if extractor in SELECTORS else {}
    # the demo's settings that the extractor takes (bernoulli's budget needs --lagrangian: left out)
    options = {k: v for k, v in DEMO_SETTINGS.items()
               if k in TRAIN_SPECS or (k in own and own[k].requires is None)}
    options.update(data="demo", extractor=extractor, encoder=encoder, epochs=epochs, seed=seed)
    try:
        stderr().rule("1/3  train on the synthetic beer-like corpus (aspect: appearance, select 20%)")
        stderr().print(f"settings of examples/demo.toml: {' '.join(f'--{k.replace(chr(95), chr(45))} {v}' for k, v in options.items() if v is not None)}",
                       highlight=False, soft_wrap=True)
        train(out=workdir, config=None, force=out is None, resume=False, **options)
        stderr().rule("2/3  evaluate on the test split")
        evaluate(run=workdir, data="demo", format="auto", aspect=None, split="test", json_out=None,
                 per_document=None, faithfulness=True, rate=None, rate_over="document", coherence=None, epoch=None,
                 batch_size=64, device="auto")
        stderr().rule("3/3  explain three test reviews")
        explain(run=workdir, text=None, input="demo", format="auto", aspect=None, limit=3, html=None, coherence=None,
                device="auto")
    finally:
        if out is None:
            shutil.rmtree(workdir, ignore_errors=True)


@app.command(cls=Command)
@friendly
def report(
    runs: list[Path] = typer.Argument(..., help="Run directories from `rationale train`."),
    out: Path = typer.Option(..., "--out", "-o", help="The HTML page to write."),
    png: Optional[Path] = typer.Option(None, help="Also write the plots as PNG files into this folder."),
    data: Optional[str] = typer.Option(None, help="Documents with gold rationales for the precision curve and "
                                       "the examples (or 'demo').", show_default="each run's own data"),
    format: Optional[str] = typer.Option(None, help=f"Input format of --data: {FORMAT_HELP}.",
                                         show_default="auto; the run's own for its own data"),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect (default: the run's)."),
    examples: int = typer.Option(3, help="Example documents shown per run (0 = none)."),
    batch_size: int = typer.Option(64, help="Documents per batch (at least 1)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
):
    """Write one HTML page on training runs: training curves, precision by rationale size, metrics, examples.

    Every run's documents are the test split of its own data unless --data is given.
    """
    from rationale_cli.output import run_report as reports
    from rationale_cli.runtime.atomic import write_text_atomic

    check_at_least("--examples", examples, 0)
    check_at_least("--batch-size", batch_size, 1)
    writable_target(out)
    if png is not None:
        try:
            png.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"{png}: cannot create the PNG folder ({err.strerror})") from None
    names = reports.labels(runs)
    summaries = []
    for run, name, slug in zip(runs, names, reports.slugs(names)):
        loaded, dev = load_for_inference(run, device)
        summaries.append(reports.summarize(loaded, name, slug, data=data, fmt=format, aspect=aspect,
                                           examples=examples, batch_size=batch_size, device=dev))
    found = reports.plots(summaries)
    write_text_atomic(out, reports.page(summaries, found))
    if png is not None:
        reports.write_pngs(found, png)
        stderr().print(f"wrote {len(found)} PNG files to {png}", highlight=False)
    stderr().print(f"wrote {out}", highlight=False)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
