"""What the commands share: the Typer ``app`` they register on, the consoles, the
:func:`friendly` error wrapper, help texts used by several commands (among them those of the
test-time decoding, ``--rate``, ``--rate-over``, ``--coherence`` and ``--sentences``), the
progress reporter and the tables of scores. What the commands check and parse of those
options is the library's (:func:`rationale_cli.runtime.errors.check_at_least`,
:func:`rationale_cli.runs.inference.parse_decoding`,
:func:`rationale_cli.runs.run_directory.load_for_inference`), which the Python API calls too."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rationale_cli.data.readers import FORMATS
from rationale_cli.runtime.errors import UserError, plural, terminal_text


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
RUN_HELP = "Run directory from `rationale train`."
ASPECT_HELP = "Beer aspect (default: the run's)."
ID_HELP = ("JSONL field or CSV/TSV column holding each document's id (default: the run's, from train --id-col; "
           "id where the input has one, else the line or row number; '' numbers them).")
SPLIT_HELP = "Split of an ERASER folder or of the demo corpus: train, val or test."
BATCH_HELP = "Documents per batch (at least 1)."
DEVICE_HELP = "auto, cpu or cuda."
PER_DOCUMENT_HELP = "Also write each document's scores here (JSONL)."
FORCE_HELP = "Replace existing output files (never an input of the command, nor a run directory's files)."
RATIONALE_LABEL_HELP = ("Label Studio, Prodigy, doccano, spaCy: the label of the spans that are the gold "
                        "rationale (default: any label).")
SPANS_KEY_HELP = "A .spacy file's span group holding the gold rationale."


def show_version(value: bool) -> None:
    if value:
        from rationale_cli.runtime.version import VERSION

        typer.echo(f"rationale-cli {VERSION}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=show_version, is_eager=True, metavar="",
                                 help="Print the version and exit."),
):
    """Rationale extraction: train select-then-predict models, then predict, explain and evaluate their rationales."""


class SafeConsole(Console):
    """A console whose printed strings and texts go through
    :func:`~rationale_cli.runtime.errors.terminal_text`: a file's name or content quoted in a
    message cannot drive the terminal."""

    def print(self, *objects, **kwargs) -> None:
        super().print(*(safe(item) for item in objects), **kwargs)


def safe(item):
    """A string or rich Text with its control and bidirectional characters shown as U+FFFD."""
    if isinstance(item, str):
        return terminal_text(item)
    if isinstance(item, Text):
        shown = item.copy()
        shown.plain = terminal_text(item.plain)  # one for one unless a CR is dropped
        return shown
    return item


def stderr() -> Console:
    """Progress and messages; no markup, so paths and texts print as they are."""
    return SafeConsole(stderr=True, soft_wrap=True, markup=False)


def print_line(line: str) -> None:
    """A message of the library (its ``report`` argument) on standard error, as it is."""
    stderr().print(line, highlight=False)


def print_whole(console: Console, table: Table) -> None:
    """``table`` on ``console``; off a terminal at its full width, no cell wrapped or cut (a file
    or a pipe has no width to fit)."""
    if console.is_terminal:
        console.print(table)
        return
    fitted = console.width
    console.width = max(fitted, console.measure(table, options=console.options.update_width(10_000)).maximum)
    try:
        console.print(table)
    finally:
        console.width = fitted


def stdout() -> Console:
    return SafeConsole(markup=False)


def friendly(command):
    """Turn a UserError into one red line on stderr and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserError as err:
            stderr().print(Text(f"error: {terminal_text(str(err), one_line=True)}", style="bold red"), soft_wrap=True)
            raise typer.Exit(2) from None
        except FloatingPointError as err:  # a model whose scores left the range its extractor can use
            stderr().print(Text(f"error: non-finite or out-of-range values in the model ({err})", style="bold red"),
                           soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            stderr().print(Text("interrupted", style="bold red"))
            raise typer.Exit(130) from None

    return wrapper


def signal_name(number: int) -> str:
    import signal

    return signal.Signals(number).name


# seconds between two progress lines off a terminal
PLAIN_EVERY = 10.0


def progress_line(doing: str, done: int, total: int | None, unit: str, elapsed: float) -> str:
    """A progress line off a terminal: what is done (of the total), time elapsed, speed, time left."""
    rate = done / elapsed if elapsed > 0 else 0.0
    share = f" of {total:,} ({100 * done / total:.0f}%)" if total else ""
    eta = f", {max(total - done, 0) / rate:,.0f}s left" if total and rate else ""
    speed = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
    return f"{doing}: {done:,}{share} {unit}, {elapsed:,.0f}s elapsed, {speed}/s{eta}"


@contextlib.contextmanager
def progress_reporter(console: Console, total: int | None, doing: str = "predicting", unit: str = "documents"):
    """``advance(n)`` for the units done: a bar with percentage and ETA on a terminal
    (a spinner without ``total``), else a plain :func:`progress_line` every :data:`PLAIN_EVERY`
    seconds. Every long command reports its progress through this."""
    import time

    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if not console.is_terminal:
        state = {"done": 0, "last": time.monotonic(), "start": time.monotonic()}

        def advance(n: int) -> None:
            state["done"] += n
            now = time.monotonic()
            if now - state["last"] >= PLAIN_EVERY:
                state["last"] = now
                console.print(progress_line(doing, state["done"], total, unit, now - state["start"]),
                              highlight=False)

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


CHANCE = {"precision": "gold_share", "mse": "mse_of_mean", "accuracy": "majority_accuracy",
          "leakage_accuracy": "leakage_majority_accuracy", "leakage_mse": "leakage_mse_of_mean"}


def on_stderr(total: int | None, doing: str = "predicting", unit: str = "documents"):
    """:func:`progress_reporter` on standard error: the library's ``progress`` argument
    (:data:`rationale_cli.runtime.progress.Progress`) as the commands give it."""
    return progress_reporter(stderr(), total, doing, unit)


def shown_value(key: str, value) -> str:
    if value is None:
        return "-"
    if key in ("mse", "mae", "mse_of_mean", "leakage_mse", "leakage_mse_of_mean"):
        return f"{value:.5f}"
    if key in ("documents", "documents_with_gold", "documents_widened"):
        return f"{value:,}"
    if key == "test_rate":
        return f"k={value}" if isinstance(value, int) else f"{100 * value:.1f}%"
    if key == "test_rate_over":
        return value
    if key == "test_threshold":
        return f"{value:.4g}"
    if key in ("transitions", "spans"):
        return f"{value:.2f}"
    return f"{100 * value:.1f}%"


def metrics_table(metrics: dict) -> Table:
    """The toolkit's scores, with the chance level beside those that have one."""
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("chance", justify="right", style="dim")
    order = ["mse", "mae", "accuracy", "macro_f1", "test_rate", "test_rate_over", "test_threshold", "test_coherence",
             "test_sentences", "selection_rate", "precision", "recall", "f1",
             "precision_macro", "recall_macro", "f1_macro", "transitions", "spans", "leakage_accuracy", "leakage_mse", "documents",
             "documents_with_gold", "documents_widened"]
    for key in order:
        if key in metrics:
            chance = CHANCE.get(key)
            table.add_row(key, shown_value(key, metrics[key]),
                          shown_value(chance, metrics.get(chance)) if chance in metrics else "")
    return table


def reference_line(reference: dict) -> str:
    """The full-text reference's score beside the model's, in one line (evaluate's
    ``full_text_reference``, :meth:`rationale_cli.runs.reference.Reference.beside`)."""
    metric, value, model, difference = (reference[k] for k in ("metric", "value", "model", "difference"))
    line = f"full-text reference ({reference['setting']}): {metric} {shown_value(metric, value)}"
    if difference is None:
        return line
    if metric == "accuracy":
        cost = (f"{100 * abs(difference):.1f} points {'below' if difference < 0 else 'above'} it" if difference
                else "the same")
    else:
        cost = f"{difference:+.5f}, {'worse' if difference > 0 else 'better' if difference < 0 else 'the same'}"
    return f"{line}; this model {shown_value(metric, model)} ({cost})"


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


def print_scores(metrics: dict, title: str, json_out: Optional[Path], per_document: Optional[Path],
                 rows: list[dict]) -> None:
    """The tables (on standard error when the JSON goes to standard output), then the files."""
    from rationale_cli.evaluation.scoring import to_standard_output, write_document_scores, write_metrics

    shown = stderr() if to_standard_output(json_out, per_document) else stdout()  # standard output holds data then
    shown.print(title, soft_wrap=True, highlight=False, style="bold")
    shown.print(metrics_table(metrics))
    extra = eraser_table(metrics)
    if extra is not None:
        shown.print(extra)
    if "full_text_reference" in metrics:
        shown.print(reference_line(metrics["full_text_reference"]), highlight=False, soft_wrap=True)
    if json_out is not None:
        write_metrics(json_out, metrics)
        stderr().print(f"wrote {json_out}", highlight=False)
    if per_document is not None:
        write_document_scores(per_document, rows)
        stderr().print(f"wrote {plural(len(rows), 'document score')} to {per_document}", highlight=False)


# --------------------------------------------------------------------------- #
# test-time decoding: --rate, --rate-over, --coherence, --sentences

RATE_HELP = ("Hold each document's rationale at this size: a share of its tokens (0.13) or a count (10), its "
             "best-scored tokens (default: the extractor's own decoding).")


RATE_OVER_HELP = ("With --rate: document (each document at that size) or corpus (one score threshold for all "
                  "the documents, keeping that share of all their tokens: each document keeps those it "
                  "scores above it).")


COHERENCE_HELP = ("Decode with this cost per 0/1 transition between adjacent tokens: fewer, longer spans. "
                  "sparsemap and topk-sparsemax subtract it from every mask's score (default: the run's own "
                  "--coherence); every other extractor keeps as many tokens per document as it chose and "
                  "places them where their scores minus the cost are highest (scores are in [0, 1]; try 0.1-1).")


SENTENCES_HELP = ("Select whole sentences: each document keeps as many tokens as its decoding chose, in the "
                  "sentences whose tokens score highest on average (the fewest that hold that many). Sentences are "
                  "ERASER's lines, else split after sentence-final punctuation.")
