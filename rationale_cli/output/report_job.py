"""``rationale report`` as a library call: each run loaded and summarized
(:mod:`rationale_cli.output.run_report`), the page written, the plots also as PNG files."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rationale_cli.output import run_report as reports
from rationale_cli.runtime.atomic import writable_target, write_text_atomic
from rationale_cli.runtime.errors import UserError


def write_report(runs: Sequence[Path], out: Path, *, png: Path | None = None, data: str | None = None,
                 format: str | None = None, aspect: int | None = None, examples: int = 3, batch_size: int = 64,
                 device: str = "auto") -> int:
    """The HTML page on ``runs`` at ``out`` (their documents: each one's own held-out data
    unless ``data``) and, with ``png``, the plots as PNG files in that folder (created);
    returns the number of plots."""
    from rationale_cli.runs.run_directory import load_run
    from rationale_cli.runtime.devices import resolve_device

    writable_target(out)
    if png is not None:
        try:
            png.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"{png}: cannot create the PNG folder ({err.strerror})") from None
    names = reports.labels(runs)
    summaries = []
    for run, name, slug in zip(runs, names, reports.slugs(names)):
        dev = resolve_device(device)
        loaded = load_run(run, dev, None)
        summaries.append(reports.summarize(loaded, name, slug, data=data, fmt=format, aspect=aspect,
                                           examples=examples, batch_size=batch_size, device=dev))
    found = reports.plots(summaries)
    write_text_atomic(out, reports.page(summaries, found))
    if png is not None:
        reports.write_pngs(found, png)
    return len(found)
