"""``rationale merge``: the outputs of a sharded ``predict`` back in input order."""

from __future__ import annotations

from pathlib import Path

import typer

from rationale_cli.annotation.engine import WINDOW
from rationale_cli.cli._util import Command, app, check_at_least, friendly, stderr


@app.command(cls=Command)
@friendly
def merge(
    parts: list[Path] = typer.Argument(..., help="The outputs of `predict --shard 0/N` ... `--shard N-1/N`, "
                                       "in that order (JSONL or CSV)."),
    out: Path = typer.Option(..., "--out", "-o", help="The merged output, in input order."),
    window: int = typer.Option(WINDOW, help="The --window the shards were annotated with."),
    force: bool = typer.Option(False, "--force", metavar="", help="Replace an existing output."),
):
    """Merge the outputs of a sharded `predict` back into input order."""
    from rationale_cli.annotation.predict_job import merge_outputs

    check_at_least("--window", window, 1)
    count = merge_outputs(parts, out, window, force)
    stderr().print(f"wrote {count:,} predictions to {out}", highlight=False)
