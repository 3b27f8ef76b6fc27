"""What ``rationale train`` does beside training, as callbacks of :func:`rationale_cli.training.loop.fit`:
write the run directory, report progress on a console, stop at a time limit."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from rationale_cli.runs.config import TrainConfig
from rationale_cli.runs.reference import REFERENCE_SUPPORT
from rationale_cli.runs.run_directory import COMPLETE, save_weights, write_json
from rationale_cli.runtime.signals import writing
from rationale_cli.training.checkpoint import save_checkpoint
from rationale_cli.training.linear_predictor import reads_with_reference
from rationale_cli.training.loop import Callback, Epoch, Fit

# training statistics that are shares of the tokens (shown in percent), and the ones
# shown on the epoch line without --verbose (rationale supervision's loss where there is one)
SHARES = ("selected", "exact_one", "expected_l0", "transitions", "expected_transitions", "exact")
MAIN_STATS = ("selected", "supervision")


def encoders_in_words(config: TrainConfig) -> str:
    """The run's encoders for its first line: one on both sides, the selector's and the predictor's,
    the predictor's alone (``--support reference``) or the selector's reading for the reference."""
    selector, predictor = config.selector_encoder or config.encoder, config.predictor_encoder or config.encoder
    if config.support == REFERENCE_SUPPORT:
        return f"{predictor} predictor"
    if reads_with_reference(config):
        return f"{selector} selector, the full-text reference as its fixed predictor"
    return f"{selector} encoder" if selector == predictor else f"{selector} selector, {predictor} predictor"


class RunDirectory(Callback):
    """After every epoch: the best weights (``model.safetensors``) when it improved, the
    epoch's own with ``save_epochs`` (``epochs/epoch-N.safetensors``), the resume state
    (``resume.safetensors``, with the data's ``fingerprint``) and, last, ``metrics.json``, which
    marks the run complete (a run without it is refused until it is resumed), all of
    them before a stop signal takes effect (:func:`~rationale_cli.runtime.signals.writing`)."""

    def __init__(self, out: Path, fingerprint: str, save_epochs: bool = False):
        self.out, self.fingerprint, self.save_epochs = out, fingerprint, save_epochs

    def on_epoch_end(self, fit: Fit, result: Epoch) -> None:
        with writing():
            self.save(fit, result)

    def save(self, fit: Fit, result: Epoch) -> None:
        state = fit.state
        (self.out / COMPLETE).unlink(missing_ok=True)  # the run is incomplete until its metrics are written again
        if result.improved:
            save_weights(self.out, fit.model)
        if self.save_epochs:
            save_weights(self.out, fit.model, result.epoch)
        save_checkpoint(self.out, fit.model, fit.optimizer, fit.rng, fit.device, {
            "epoch": state.epoch, "stale": state.stale, "best": state.best, "history": state.history,
            "train_seconds": state.train_seconds, "fingerprint": self.fingerprint}, fit.random_states)
        write_json(self.out / COMPLETE, state.metrics())  # last: the run is complete again


def percent(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def statistic(name: str, value: float) -> str:
    return f"{name} {percent(value)}" if name in SHARES else f"{name} {value:.4g}"


def summary_line(result: Epoch, epochs: int, verbose: bool = False) -> str:
    """The epoch line: losses, the task metric, the selection rate in training and decoded
    on validation, validation precision where there is gold; every statistic with ``verbose``."""
    valid = result.valid
    metric = f"mse {valid['mse']:.4f}" if "mse" in valid else f"acc {percent(valid['accuracy'])} f1 {percent(valid['macro_f1'])}"
    shown = [name for name in result.stats if verbose or name in MAIN_STATS]
    parts = [f"epoch {result.epoch}/{epochs}", f"train loss {result.train_loss:.4f}"]
    parts += [f"train {statistic(name, result.stats[name])}" for name in shown]
    parts += [f"valid loss {valid['loss']:.4f}", f"valid {metric}", f"valid selected {percent(valid['selection_rate'])}"]
    if valid.get("precision") is not None:
        parts.append(f"valid precision {percent(valid['precision'])}")
    parts.append(f"{result.seconds:.0f}s")
    return " | ".join(parts) + (" *" if result.improved else "")


class ConsoleReport(Callback):
    """A progress bar over each epoch's batches (on a terminal), then one line per epoch
    (``*``: the best so far), and why training stopped early."""

    def __init__(self, console: Console, verbose: bool = False):
        self.console, self.verbose, self.bar = console, verbose, None

    def on_epoch_start(self, fit: Fit, epoch: int) -> None:
        if not self.console.is_terminal:
            return
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                            console=self.console, transient=True)
        self.bar.add_task(f"epoch {epoch}/{fit.epochs}", total=fit.batches, status="")
        self.bar.start()

    def on_step(self, fit: Fit, step: int, mean_loss: float) -> None:
        if self.bar is not None:
            self.bar.update(self.bar.task_ids[0], completed=step, status=f"loss {mean_loss:.4f}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def on_epoch_end(self, fit: Fit, result: Epoch) -> None:
        self.close()
        self.console.print(summary_line(result, fit.epochs, self.verbose), highlight=False, soft_wrap=True)

    def on_end(self, fit: Fit) -> None:
        self.close()
        if fit.state.stop:
            self.console.print(fit.state.stop, highlight=False)


def out_of_time(limit_minutes: float, elapsed: float, history: list[dict]) -> bool:
    """Whether one more epoch, as slow as the slowest so far, would end after the limit (0: none)."""
    return limit_minutes > 0 and elapsed + max(h["seconds"] for h in history) > 60 * limit_minutes


class TimeLimit(Callback):
    """Stop before an epoch that, as slow as the slowest so far, would end after ``minutes``
    of training in this process."""

    def __init__(self, minutes: float):
        self.minutes, self.started = minutes, None

    def on_epoch_start(self, fit: Fit, epoch: int) -> None:
        if self.started is None:
            self.started = time.perf_counter()

    def on_epoch_end(self, fit: Fit, result: Epoch) -> None:
        if fit.state.stop or result.epoch >= fit.epochs:
            return
        if out_of_time(self.minutes, time.perf_counter() - self.started, fit.state.history):
            fit.state.stop = (f"time limit: {self.minutes:g} minutes would be passed by another epoch; "
                              f"stopping after epoch {result.epoch}")

    def on_end(self, fit: Fit) -> None:
        self.started = None  # a later fit has its own limit
