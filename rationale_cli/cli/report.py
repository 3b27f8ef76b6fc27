"""``rationale report``: one HTML page on training runs and studies (:func:`rationale_cli.output.run_report.write_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rationale_cli.cli._util import (
    ASPECT_HELP,
    BATCH_HELP,
    DEVICE_HELP,
    FORCE_HELP,
    FORMAT_HELP,
    Command,
    app,
    friendly,
    on_stderr,
    stderr,
)
from rationale_cli.runtime.errors import check_at_least


@app.command(cls=Command)
@friendly
def report(
    runs: list[Path] = typer.Argument(..., help="Run directories from `rationale train`, or study folders from "
                                      "`rationale tune`."),
    out: Path = typer.Option(..., "--out", "-o", help="The HTML page to write."),
    png: Optional[Path] = typer.Option(None, help="Also write the plots as PNG files into this folder."),
    data: Optional[str] = typer.Option(None, help="Documents with gold rationales for the precision curve and "
                                       "the examples (or 'demo').", show_default="each run's own data"),
    format: Optional[str] = typer.Option(None, help=f"Input format of --data: {FORMAT_HELP}.",
                                         show_default="auto; the run's own for its own data"),
    aspect: Optional[int] = typer.Option(None, help=ASPECT_HELP),
    examples: int = typer.Option(3, help="Example documents shown per run (0 = none)."),
    batch_size: int = typer.Option(64, help=BATCH_HELP),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    force: bool = typer.Option(False, "--force", metavar="", help=FORCE_HELP),
):
    """Write one HTML page on training runs: training curves, precision by rationale size, metrics, examples.

    Every run's documents are the test split of its own data unless --data is given. A study
    folder of `rationale tune` shows the study (validation loss and rate per trial, the
    parameters' effect) and its best trial as a run.
    """
    from rationale_cli.output.run_report import write_report

    check_at_least("--examples", examples, 0)
    check_at_least("--batch-size", batch_size, 1)
    plots = write_report(runs, out, png=png, data=data, format=format, aspect=aspect, examples=examples,
                         batch_size=batch_size, device=device, force=force, progress=on_stderr)
    if png is not None:
        stderr().print(f"wrote {plots} PNG files to {png}", highlight=False)
    stderr().print(f"wrote {out}", highlight=False)
