"""``rationale merge``: the outputs of a sharded ``predict`` back in input order."""

from __future__ import annotations

from pathlib import Path

import typer

from rationale_cli.cli._util import Command, app, friendly, stderr
from rationale_cli.runtime.errors import plural


@app.command(cls=Command)
@friendly
def merge(
    parts: list[Path] = typer.Argument(..., help="The outputs of `predict --shard 0/N` ... `--shard N-1/N` "
                                       "(JSONL or CSV), in any order, each with the PART.shard.json predict wrote "
                                       "beside it."),
    out: Path = typer.Option(..., "--out", "-o", help="The merged output, in input order."),
    force: bool = typer.Option(False, "--force", metavar="", help="Replace an existing output."),
):
    """Merge the outputs of a sharded `predict` back into input order.

    The record `predict --shard I/N` writes beside each part (PART.shard.json) says which
    shard it is: the parts are put in shard order, and they must be every shard of one input
    and one model, each unchanged since."""
    from rationale_cli.annotation.predict_job import merge_outputs

    count = merge_outputs(parts, out, force)
    stderr().print(f"wrote {plural(count, 'prediction')} to {out}", highlight=False)
