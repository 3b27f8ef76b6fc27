"""``rationale explain``: documents with their rationale highlighted (:mod:`rationale_cli.output.explain`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rationale_cli.cli._util import (
    ASPECT_HELP,
    COHERENCE_HELP,
    DEVICE_HELP,
    FORCE_HELP,
    FORMAT_HELP,
    ID_HELP,
    RATE_HELP,
    RUN_HELP,
    SENTENCES_HELP,
    Command,
    app,
    friendly,
    stderr,
    stdout,
)
from rationale_cli.runs.inference import asked_decoding
from rationale_cli.runs.run_directory import load_for_inference
from rationale_cli.runtime.errors import check_at_least, plural
from rationale_cli.runtime.outputs import new_output


@app.command(cls=Command)
@friendly
def explain(
    run: Path = typer.Argument(..., help=RUN_HELP),
    text: Optional[str] = typer.Argument(None, help="A text to explain, as written (a file's documents: --input FILE)."),
    input: Optional[str] = typer.Option(None, "--input", "-i", help="Documents to explain (a file, folder or 'demo')."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help=ASPECT_HELP),
    id_field: Optional[str] = typer.Option(None, "--id-field", "--id-col", help=ID_HELP),
    limit: int = typer.Option(5, help="Explain at most this many documents from --input, 0 = all."),
    html: Optional[Path] = typer.Option(None, help="Also write a self-contained HTML page here."),
    rate: Optional[str] = typer.Option(None, help=RATE_HELP),
    coherence: Optional[float] = typer.Option(None, help=COHERENCE_HELP),
    sentences: bool = typer.Option(False, "--sentences", help=SENTENCES_HELP),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    force: bool = typer.Option(False, "--force", metavar="", help=FORCE_HELP),
):
    """Show documents with their rationale highlighted (against gold where present)."""
    from rationale_cli.output.explain import check_request, explain_documents
    from rationale_cli.output.render import print_documents, render_html
    from rationale_cli.runtime.atomic import write_text_atomic

    check_request(text, input)
    check_at_least("--limit", limit, 0)
    if html is not None:
        new_output(html, force, [input], "--html")
    loaded, dev = load_for_inference(run, device)
    decoding = asked_decoding(loaded, rate=rate, coherence=coherence, sentences=sentences)
    results, more = explain_documents(loaded, dev, text=text, input=input, format=format, aspect=aspect,
                                      id_field=id_field, limit=limit, decoding=decoding)
    console = stderr() if str(html) == "-" else stdout()  # standard output holds the page then
    items = print_documents(console, results)
    if more:
        stderr().print(f"the first {plural(limit, 'document')} of {input} shown; it has more (--limit N, or --limit 0 for all)",
                       highlight=False)
    if html is not None:
        write_text_atomic(html, render_html(items, title=f"Rationales of {run.name}"))
        stderr().print(f"wrote {html}", highlight=False)
