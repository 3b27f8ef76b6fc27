"""``rationale demo``: train, evaluate and explain on the synthetic corpus, with the settings
of examples/demo.toml."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Optional

import typer

from rationale_cli.cli._util import Command, app, friendly, stderr
from rationale_cli.cli.evaluate import evaluate
from rationale_cli.cli.explain import explain
from rationale_cli.cli.train import train
from rationale_cli.runs.flags import flag_of

# the settings of `rationale demo`, written out in examples/demo.toml (a test keeps them equal)
DEMO_SETTINGS = dict(extractor="hardkuma", budget=0.2, transitions=0.06, embedding_dim=50, hidden_size=64,
                     batch_size=20, lr=0.002, patience=0, epochs=12)


def demo_options(extractor: str, encoder: Optional[str], epochs: int, seed: int) -> dict:
    """The demo's training options for ``extractor``: the settings it takes (bernoulli's budget
    needs --lagrangian: left out), on the demo corpus."""
    from rationale_cli.models.selectors import SELECTORS, option_specs
    from rationale_cli.runs.config import TRAIN_SPECS

    own = option_specs(extractor) if extractor in SELECTORS else {}
    options = {k: v for k, v in DEMO_SETTINGS.items()
               if k in TRAIN_SPECS or (k in own and own[k].requires is None)}
    options.update(data="demo", extractor=extractor, encoder=encoder, epochs=epochs, seed=seed)
    return options


@app.command(cls=Command)
@friendly
def demo(
    out: Optional[Path] = typer.Option(None, help="Keep the demo's run directory here.",
                                       show_default="a temporary one, removed at the end"),
    extractor: str = typer.Option("hardkuma", help="Extractor to train (see train --help)."),
    encoder: Optional[str] = typer.Option(None, help="Architecture (see train --help).",
                                          show_default="the extractor's own"),
    epochs: int = typer.Option(DEMO_SETTINGS["epochs"], help="Training epochs."),
    seed: int = typer.Option(0, help="Random seed."),
):
    """Train on a synthetic review corpus, evaluate against its gold rationales, explain a few reviews.

    The settings are those of examples/demo.toml: `rationale train --data demo --config
    examples/demo.toml --out RUN` trains the same model. The run is trained in a temporary
    folder, removed at the end, unless --out keeps it.
    """
    workdir = out or Path(tempfile.mkdtemp(prefix="rationale-demo-"))
    options = demo_options(extractor, encoder, epochs, seed)
    try:
        stderr().rule("1/3  train on the synthetic beer-like corpus (aspect: appearance, select 20%)")
        given = " ".join(f"{flag_of(k)} {v}" for k, v in options.items() if v is not None)
        stderr().print(f"settings of examples/demo.toml: {given}", highlight=False, soft_wrap=True)
        train(out=workdir, config=None, force=out is None, resume=False, **options)
        stderr().rule("2/3  evaluate on the test split")
        evaluate(run=workdir, data="demo", format="auto", aspect=None, split="test", json_out=None,
                 per_document=None, faithfulness=True, rate=None, rate_over="document", coherence=None,
                 sentences=False, epoch=None, batch_size=64, device="auto")
        stderr().rule("3/3  explain three test reviews")
        explain(run=workdir, text=None, input="demo", format="auto", aspect=None, limit=3, html=None, rate=None,
                coherence=None, sentences=False, device="auto")
    finally:
        if out is None:
            remove_run(workdir)


def remove_run(workdir: Path) -> None:
    """Remove the demo's temporary run directory, saying so, or where it is left if it cannot be."""
    shutil.rmtree(workdir, ignore_errors=True)
    if workdir.exists():
        stderr().print(f"could not remove the demo's run directory {workdir}; remove it by hand", highlight=False,
                       soft_wrap=True)
    else:
        stderr().print(f"removed the demo's run directory {workdir} (--out DIR keeps it)", highlight=False,
                       soft_wrap=True)
