"""One trial of a study: the values drawn, a normal run directory trained with them
(``OUT/trials/NNNN``, by :func:`rationale_cli.training.trainer.train_config`), the validation
task loss reported to the study after every epoch, and training stopped cleanly after the epoch
at which the study prunes the trial (the run directory then holds that epoch's state, as a run
stopped early does).

A trial stores as user attributes its run directory (``run``), the validation task loss
(``valid_loss``) and decoded selection rate (``valid_rate``) of its kept epoch, the epochs it
trained, its kept epoch, its validation precision where the documents have gold (shown, never
used to choose) and, if it failed, why (``error``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from rationale_cli.data.records import Record
from rationale_cli.models.options import shown
from rationale_cli.runs.flags import option_line
from rationale_cli.runs.keep import Keep
from rationale_cli.runtime.errors import UserError
from rationale_cli.training.loop import Callback, Epoch, Fit
from rationale_cli.training.trainer import train_config
from rationale_cli.tuning.space import Space, configured, suggest

TRIALS = "trials"  # the folder of the trials' run directories in the study folder


class TrialFailed(Exception):
    """A trial whose training failed (it diverged, its values clash): the study goes on."""


def trial_folder(out: Path, number: int) -> Path:
    return out / TRIALS / f"{number:04d}"


class ReportToTrial(Callback):
    """After each epoch: its validation task loss reported to the Optuna ``trial`` (the epoch is
    the step), and, where the study prunes the trial, training stopped after this epoch."""

    def __init__(self, trial):
        self.trial = trial
        self.pruned_after: int | None = None

    def on_epoch_end(self, fit: Fit, result: Epoch) -> None:
        self.trial.report(result.valid["loss"], result.epoch)
        if self.trial.should_prune():
            self.pruned_after = result.epoch
            fit.state.stop = f"pruned by the study after epoch {result.epoch}"


@dataclass
class Objective:
    """What Optuna calls for each trial: train the run for the values it draws, return the
    validation task loss of the kept epoch. ``base``: the options every trial shares, ``given``:
    those the user gave, ``data``: the training and validation documents, read once; ``keep``:
    the rate target, a constraint of the trial for the sampler."""

    out: Path
    space: Space
    base: dict[str, Any]
    given: set[str]
    data: tuple[list[Record], list[Record]]
    keep: Keep = Keep()
    callbacks: Sequence[Callback] = ()
    console: Console | None = None
    verbose: bool = False
    pruned: type[Exception] = field(default=Exception)  # optuna.TrialPruned

    def __call__(self, trial) -> float:
        run = trial_folder(self.out, trial.number)
        trial.set_user_attr("run", str(run.resolve()))
        params = {**self.space.fixed, **suggest(trial, self.space.entries)}
        watch = ReportToTrial(trial)
        try:
            config = configured(self.base, self.given, params)
            if self.console is not None:
                self.console.print(f"trial {trial.number}: {shown_params(params)}", highlight=False)
            trained = train_config(config, run, self.console, data=self.data, verbose=self.verbose,
                                   callbacks=[watch, *self.callbacks])
        except KeyboardInterrupt:  # a stop signal: the trial fails, the study stops
            trial.set_user_attr("error", "stopped by a signal")
            raise
        except (UserError, FloatingPointError, ValueError) as err:
            message = shortened(option_line(err) if hasattr(err, "describe") else str(err))
            trial.set_user_attr("error", message)
            raise TrialFailed(message) from None
        best, state = trained.state.best, trained.state
        trial.set_user_attr("valid_loss", best["valid"]["loss"])
        trial.set_user_attr("valid_rate", best["valid"].get("selection_rate"))
        if hasattr(trial, "set_constraint"):  # Optuna 5 on: TPE draws from the trials on target
            trial.set_constraint("rate", off_target(self.keep, best["valid"].get("selection_rate")))
        trial.set_user_attr("valid_precision", best["valid"].get("precision"))
        trial.set_user_attr("best_epoch", best["epoch"])
        trial.set_user_attr("epochs", state.epoch)
        if watch.pruned_after is not None:
            raise self.pruned(state.stop)
        return best["valid"]["loss"]


def off_target(keep: Keep, rate: float | None) -> float:
    """How far a trial's rate lies past the tolerance of the target (<= 0: on target, or no target)."""
    return 0.0 if keep.target is None or rate is None else abs(rate - keep.target) - keep.tolerance


def shortened(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[:limit - 3] + "..."


def shown_params(params: dict[str, Any]) -> str:
    """Drawn values in one line: ``lr=0.00123 dropout=0.2``."""
    return " ".join(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={shown(value)}"
                    for name, value in params.items())
