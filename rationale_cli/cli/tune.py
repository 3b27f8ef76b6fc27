"""``rationale tune``: a hyperparameter search (:func:`rationale_cli.tuning.job.tune`), with the
options of ``rationale train`` (:func:`rationale_cli.cli.train.train_parameters`) fixed for every
trial where given."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from rationale_cli.cli._util import Command, app, friendly, print_whole, signal_name, stderr, stdout
from rationale_cli.cli.train import train_parameters

SEARCH_PANEL = "Search"


def leaderboard_table(board) -> Table:
    """Every trial of a leaderboard, best first (see :func:`rationale_cli.tuning.leaderboard.ranked`);
    the state of the chosen one is "best"."""
    from rationale_cli.tuning.leaderboard import percent
    from rationale_cli.tuning.objective import shown_params

    table = Table(title=f"study {board.study}: {board.chosen_by()}", title_justify="left")
    for name, justify in (("trial", "right"), ("state", "left"), ("validation loss", "right"), ("rate", "right"),
                          ("on target", "left"), ("params", "left")):
        table.add_column(name, justify=justify)
    for r in board.trials:
        table.add_row(str(r.number), board.state(r), "-" if r.loss is None else f"{r.loss:.5g}", percent(r.rate),
                      board.target_word(r), shown_params(r.params) if r.state != "failed" else (r.error or ""))
    return table


def tune(out: Path, trials: int, storage: Optional[str], search_space: Optional[Path], study: Optional[str],
         timeout: Optional[float], config: Optional[Path], verbose: bool = False, **options):
    """Search an extractor's hyperparameters: a run per trial, the best by validation loss on target.

    The search space is declared beside each extractor's options and the training options
    (from its paper where it gives one), changed by --search-space. Every option of `rationale
    train` may be given too: it is then the same for every trial, out of the search. The best
    trial has the lowest validation task loss among the trials whose decoded validation selection
    rate is within --rate-tolerance of the --budget target (extractors that hold no rate: among
    all); gold rationales never choose. A trial whose validation loss after an epoch is worse than
    the median of earlier trials' is pruned there. The study is kept in a database, so running
    the same command again after a stop goes on with it, and several processes (or machines
    sharing a --storage) can work on one study.
    """
    from rationale_cli.runtime.signals import Stopped
    from rationale_cli.tuning.job import tune as tune_study
    from rationale_cli.tuning.leaderboard import finished, is_study, percent, read_leaderboard

    console = stderr()
    say = lambda line: console.print(line, highlight=False, soft_wrap=True)  # noqa: E731
    try:
        tuned = tune_study(out, options, trials=trials, config=config, storage=storage, search_space=search_space,
                           study=study, timeout=timeout, report=say, console=console, verbose=verbose)
    except Stopped as stop:
        done = f"{finished(read_leaderboard(out).trials)} of {trials} trials finished" if is_study(out) else \
            "no trial finished"
        say(f"stopped by {signal_name(stop.signal)} ({done}); run the same command again to go on with the study")
        raise typer.Exit(128 + stop.signal) from None
    print_whole(stdout(), leaderboard_table(tuned.leaderboard))
    say(f"wrote {tuned.path}")
    best = tuned.best
    if best is None:
        why = "no trial completed" if tuned.leaderboard.target is None else \
            "no complete trial is on target (see the rates in the leaderboard)"
        console.print(f"{why}, so none is chosen", style="yellow", highlight=False)
        return
    stdout().print(f"best: trial {best.number}, validation loss {best.loss:.5g} at rate {percent(best.rate)}: "
                   f"{tuned.best_run}", highlight=False, soft_wrap=True)


def tune_command():
    """``tune`` as typer sees it: its own options, then every option of ``train``."""
    def option(name: str, annotation, default, **info) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                 default=typer.Option(default, rich_help_panel=SEARCH_PANEL, **info))

    own = [
        option("out", Path, ..., help="The study's folder: its database (without --storage), leaderboard.json and "
               "a run directory per trial (trials/NNNN)."),
        option("trials", int, ..., help="Finished trials (complete or pruned) the study holds at the end, counting "
               "those of earlier runs and of other processes on it."),
        option("storage", Optional[str], None, help="Database URL of the study (SQLAlchemy's: sqlite:///FILE, "
               "postgresql://USER:PASSWORD@HOST/NAME, ...).", show_default="sqlite:///OUT/study.db"),
        option("search_space", Optional[Path], None, help="TOML or JSON file: each option name maps to "
               "{low, high, log} (a range), {choices} or a list (one of them), or one value (fixed); it replaces "
               "the declared entry of that name.", show_default="the declared space"),
        option("study", Optional[str], None, help="Name of the study in the database.",
               show_default="the name of --out"),
        option("timeout", Optional[float], None, help="Seconds after which no new trial is started (the one "
               "running finishes).", show_default="none"),
        option("config", Optional[Path], None, help="TOML file with options of `rationale train` as keys, fixed "
               "for every trial (the command line wins)."),
        inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--verbose", "-v", metavar="", rich_help_panel=SEARCH_PANEL,
                                               help="Show each trial's values and epoch lines.")),
    ]
    command = friendly(tune)
    command.__signature__ = inspect.Signature(own + train_parameters())
    return command


app.command("tune", cls=Command)(tune_command())
