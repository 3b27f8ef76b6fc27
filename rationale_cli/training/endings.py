"""How a training ended: what a run stopped by a signal holds and how to go on with it, and
the warnings of a finished run whose kept model looks wrong.

A model is worse than chance when its validation task loss is above that of a constant
predictor made from the training labels (their mean for regression, their class shares for
classification), or its accuracy below that of always predicting the training majority
class. A decoded validation selection rate is off its target (the rate an extractor holds
in training, :meth:`~rationale_cli.runs.config.TrainConfig.rate_target`) when it is more
than :data:`RATE_SLACK` from it or more than :data:`RATE_FACTOR` times above or below it. The
rate an extractor samples in training drifts over its target when the kept epoch's share is
more than :data:`HELD_SLACK` above it: its multipliers did not hold the task's pull (under it is
the start, where the first epochs sample a little under the target).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from rationale_cli.data.records import Record
from rationale_cli.models.budget import Budget
from rationale_cli.runs.config import TrainConfig
from rationale_cli.runs.flags import flag_of
from rationale_cli.runs.run_directory import read_json
from rationale_cli.runs.task import Classification, Task
from rationale_cli.training.checkpoint import RESUME

RATE_SLACK = 0.1  # a share of the tokens: 10 points
RATE_FACTOR = 2.0
HELD_SLACK = 0.03  # a share of the training tokens: 3 points


def stopped_state(out: Path) -> str:
    """Where the run in ``out`` stands after a stop signal, and how to go on with it; the
    words that follow "stopped by SIGTERM"."""
    if not (out / RESUME).is_file():
        if (out / "config.json").is_file():
            return (f"before any epoch finished, so no model was saved (only the run's settings are in {out}); "
                    "run the same command again to start over")
        return "before training started; nothing was written"
    metrics, config = read_json(out / "metrics.json"), read_json(out / "config.json")
    done, kept, epochs = len(metrics["history"]), metrics["best_epoch"], config["epochs"]
    if done >= epochs:
        return f"after its last epoch: {out} is complete (epoch {kept} kept)"
    processes = config.get("processes", 1)
    launch = f", under torchrun on {processes} processes as before" if processes > 1 else ""
    return (f"after epoch {done} of {epochs}: {out} keeps epoch {kept}, the best so far, ready to use; "
            f"to go on: rationale train --out {shlex.quote(str(out))} --resume{launch}")


@dataclass(frozen=True)
class Chance:
    """A constant predictor made from the training labels, scored on the validation documents."""

    loss: float
    accuracy: float | None  # of the training majority class; None for regression
    predicts: str  # what it predicts, in words

    def columns(self) -> dict[str, float]:
        """The chance columns of the validation scores (``mse_of_mean``, ``majority_accuracy``)
        as this predictor's, so that the table and the warning name one level."""
        return {"mse_of_mean": self.loss} if self.accuracy is None else {"majority_accuracy": self.accuracy}


def chance(task: Task, train: Sequence[Record], valid: Sequence[Record]) -> Chance:
    """The training labels' mean (regression) or class shares (classification) predicted for
    every validation document."""
    labels, truth = task.targets(train), task.targets(valid)
    if isinstance(task, Classification):
        shares = torch.bincount(labels, minlength=task.outputs) / len(labels)
        majority = int(shares.argmax())
        accuracy = float((truth == majority).float().mean())
        outputs, predicts = shares.log(), f"the training class shares, majority {task.labels[majority]!r}"
    else:
        mean = labels.mean()
        outputs, predicts, accuracy = torch.logit(mean, eps=1e-6).view(1), f"the training mean {float(mean):.3g}", None
    loss = float(task.loss(outputs.expand(len(truth), -1), truth).mean())
    return Chance(loss, accuracy, predicts)


def chance_warning(config: TrainConfig, valid: dict, level: Chance) -> str | None:
    """A warning when the validation loss or accuracy is worse than ``level``'s."""
    worse = []
    if valid["loss"] > level.loss:
        worse.append(f"loss {valid['loss']:.4g} against {level.loss:.4g}")
    if level.accuracy is not None and valid["accuracy"] < level.accuracy:
        worse.append(f"accuracy {100 * valid['accuracy']:.1f}% against {100 * level.accuracy:.1f}%")
    if not worse:
        return None
    return (f"the kept model is worse than chance on validation ({', '.join(worse)} by always predicting "
            f"{level.predicts}): try a lower --lr (this run: {config.lr:g}) or more --epochs")


def off_target(rate: float, target: float) -> bool:
    return abs(rate - target) > RATE_SLACK or not target / RATE_FACTOR <= rate <= target * RATE_FACTOR


def rate_warning(config: TrainConfig, valid: dict, target: float | None) -> str | None:
    """A warning when the decoded validation selection rate is off ``target`` (None: no target)."""
    rate = valid.get("selection_rate")
    if target is None or rate is None or not off_target(rate, target):
        return None
    keep = ", or --keep best-loss-at-rate to keep an epoch near it" if config.keep == "best-loss" else ""
    step = getattr(config.options, "lagrange_lr", None)
    if rate < target or step is None:
        advice = "try more --epochs or a larger --lagrange-lr"
    else:  # over: a multiplier too weak for the task's pull, or one that swung past the target
        advice = (f"if the epoch lines' train selected drifts up, try a larger --lagrange-rho (this run: "
                  f"{config.options.lagrange_rho:g}); if it swings across the target, a smaller --lagrange-lr "
                  f"(this run: {step:g})")
    return (f"the kept model selects {100 * rate:.1f}% of the validation tokens against a --budget target of "
            f"{100 * target:.1f}% (more than {100 * RATE_SLACK:g} points or a factor {RATE_FACTOR:g} off): "
            f"{advice}{keep}")


def held_warning(config: TrainConfig, sampled: float | None, target: float | None) -> str | None:
    """A warning when the kept epoch sampled a share ``sampled`` of the training tokens more than
    :data:`HELD_SLACK` over the ``target`` its multipliers hold (None: no target, or nothing held)."""
    rho = getattr(config.options, "lagrange_rho", None)
    if target is None or sampled is None or rho is None or sampled - target <= HELD_SLACK:
        return None
    evidence = "; 20 held beer's binary task within a point where 1 let it drift 12 points over" if rho < 20 else ""
    return (f"the kept epoch sampled {100 * sampled:.1f}% of the training tokens against a --budget target of "
            f"{100 * target:.1f}%: the multipliers did not hold the rate; try a larger --lagrange-rho (this run: "
            f"{rho:g}{evidence})")


def ending_warnings(config: TrainConfig, valid: dict, level: Chance, target: float | None,
                    sampled: float | None = None) -> list[str]:
    """The warnings of a run whose kept epoch scored ``valid`` and sampled a share ``sampled`` of
    the training tokens: worse than chance ``level``, or a selection rate off ``target``."""
    warnings = (chance_warning(config, valid, level), rate_warning(config, valid, target),
                held_warning(config, sampled, target))
    return [w for w in warnings if w]


def budget_warning(config: TrainConfig, train: Sequence[Record]) -> str | None:
    """A warning, before training, for a budget that holds every token: a count at least the
    longest training document's length, or a share of 1."""
    longest = max((len(r.tokens) for r in train), default=0)
    for name, value in vars(config.options).items():
        if isinstance(value, Budget) and (value.share == 1.0 or (value.count or 0) >= longest):
            size = f"{value.count:,} tokens, at least the longest training document's {longest:,}" if value.count \
                else "a share of 1"
            return (f"{flag_of(name)} {value}: {size}: every token is selected, the rationale is the whole text; "
                    "give a share (0.2) or a count below the documents' lengths")
    return None
