"""A study's trials as records, the rule that chooses the best one, and the leaderboard file.

The best trial is the one with the lowest validation task loss among the complete trials whose
decoded validation selection rate is on target: within the tolerance of the rate the extractor
holds in training (:class:`rationale_cli.runs.keep.Keep`, the rule ``--keep best-loss-at-rate``
applies to epochs); for an extractor that holds no rate, among all complete trials. Gold
rationales never choose: a trial's validation precision, where the validation documents have
gold, is recorded and shown, never used.

``leaderboard.json`` in the study folder holds every trial, the choice and the parameters'
effect; it is plain JSON, read without Optuna (``rationale report`` reads it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rationale_cli.runs.keep import Keep
from rationale_cli.runs.run_directory import read_json, write_json
from rationale_cli.runtime.errors import UserError

LEADERBOARD = "leaderboard.json"
STATES = {"COMPLETE": "complete", "PRUNED": "pruned", "FAIL": "failed", "RUNNING": "running", "WAITING": "waiting"}
FINISHED = ("complete", "pruned")  # the trials --trials counts


@dataclass
class TrialResult:
    """One trial: its number and state, the validation task loss and decoded selection rate of
    its kept epoch, the values drawn, its run directory, the epochs it trained, its kept epoch,
    its validation precision against gold (shown only) and why it failed."""

    number: int
    state: str
    loss: float | None = None
    rate: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    run: str | None = None
    epochs: int | None = None
    best_epoch: int | None = None
    precision: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, trial) -> TrialResult:
        """The record of an Optuna ``FrozenTrial`` (the attributes the objective set)."""
        attrs = trial.user_attrs
        return cls(trial.number, STATES.get(trial.state.name, trial.state.name.lower()), attrs.get("valid_loss"),
                   attrs.get("valid_rate"), dict(trial.params), attrs.get("run"), attrs.get("epochs"),
                   attrs.get("best_epoch"), attrs.get("valid_precision"), attrs.get("error"))


def on_target(result: TrialResult, keep: Keep) -> bool | None:
    """Whether a trial's rate is on target (None without one)."""
    if result.loss is None or result.rate is None:
        return None
    return keep.key({"loss": result.loss, "selection_rate": result.rate})[0] == 0


def choose(results: Sequence[TrialResult], keep: Keep) -> TrialResult | None:
    """The best trial (see the module docstring); None when no complete trial is on target."""
    done = [r for r in results if r.state == "complete" and on_target(r, keep) is not None]
    if not done:
        return None
    best = min(done, key=lambda r: (keep.key({"loss": r.loss, "selection_rate": r.rate}), r.number))
    return best if on_target(best, keep) else None


def ranked(results: Sequence[TrialResult], keep: Keep) -> list[TrialResult]:
    """The trials in the leaderboard's order: complete on target by loss, complete off target,
    pruned, by loss, then the others by number."""
    def key(r: TrialResult):
        group = {"complete": 0 if on_target(r, keep) else 1, "pruned": 2}.get(r.state, 3)
        return group, r.loss if r.loss is not None and group < 3 else math.inf, r.number
    return sorted(results, key=key)


def finished(results: Sequence[TrialResult]) -> int:
    return sum(r.state in FINISHED for r in results)


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation, None when either side is constant."""
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx, sy = math.sqrt(sum((a - mx) ** 2 for a in rx)), math.sqrt(sum((b - my) ** 2 for b in ry))
    return sxy / (sx * sy) if sx > 0 and sy > 0 else None


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def effects(results: Sequence[TrialResult]) -> dict[str, dict]:
    """Each searched parameter's effect on validation loss over the complete trials: Spearman's
    rank correlation for numbers (above 0: larger values, higher loss), the mean loss per
    choice for the others."""
    done = [r for r in results if r.state == "complete" and r.loss is not None]
    out: dict[str, dict] = {}
    for name in sorted({name for r in done for name in r.params}):
        pairs = [(r.params[name], r.loss) for r in done if name in r.params]
        if all(is_number(v) for v, _ in pairs):
            rho = spearman([v for v, _ in pairs], [loss for _, loss in pairs]) if len(pairs) >= 3 else None
            if rho is not None:
                out[name] = {"spearman": rho, "trials": len(pairs)}
            continue
        by_choice: dict[str, list[float]] = {}
        for value, loss in pairs:
            by_choice.setdefault("none" if value is None else str(value).lower(), []).append(loss)
        if len(by_choice) > 1:
            out[name] = {"mean_loss": {k: sum(v) / len(v) for k, v in by_choice.items()}, "trials": len(pairs)}
    return out


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def trial_line(result: TrialResult, done: int, total: int, best: TrialResult | None, keep: Keep) -> str:
    """The progress line of a finished trial."""
    head = f"trial {result.number} {result.state}"
    if result.state == "pruned" and result.epochs is not None:
        head += f" after epoch {result.epochs}"
    parts = [f"{head} ({done} of {total} finished)"]
    if result.state == "failed":
        parts.append(result.error or "failed")
    elif result.loss is not None:
        target = {True: " (on target)", False: " (off target)", None: ""}[on_target(result, keep)] \
            if keep.target is not None else ""
        parts.append(f"validation loss {result.loss:.5g} at rate {percent(result.rate)}{target}")
    parts.append(f"best so far: trial {best.number}, {best.loss:.5g}" if best else "best so far: none")
    return " | ".join(parts)


@dataclass
class Leaderboard:
    """What ``leaderboard.json`` holds."""

    study: str
    storage: str
    extractor: str
    target: float | None
    tolerance: float
    trials_asked: int
    trials: list[TrialResult]
    best: TrialResult | None
    space: dict[str, dict]
    notes: list[str] = field(default_factory=list)
    effects: dict[str, dict] = field(default_factory=dict)
    importance: dict[str, float] | None = None

    @property
    def keep(self) -> Keep:
        return Keep(self.target, self.tolerance)

    def state(self, result: TrialResult) -> str:
        """A trial's state as the leaderboard shows it: "best" for the chosen one."""
        return "best" if self.best is not None and result.number == self.best.number else result.state

    def target_word(self, result: TrialResult) -> str:
        """Whether a trial is on target: yes, no, or - (no target, or no rate)."""
        return {True: "yes", False: "no", None: "-"}[on_target(result, self.keep)] if self.target is not None else "-"

    def chosen_by(self) -> str:
        rule = "the lowest validation task loss among complete trials"
        if self.target is None:
            return rule
        return f"{rule} whose decoded validation selection rate is within {self.tolerance:g} of {self.target:g}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(trials=[r.to_dict() for r in self.trials], best=self.best.to_dict() if self.best else None,
                    chosen_by=self.chosen_by(), finished=finished(self.trials))
        return data


def write_leaderboard(folder: Path, board: Leaderboard) -> Path:
    path = folder / LEADERBOARD
    write_json(path, board.to_dict())
    return path


def is_study(folder: Path) -> bool:
    """Whether ``folder`` is a study folder of ``rationale tune`` (it holds a leaderboard)."""
    return (folder / LEADERBOARD).is_file()


def read_leaderboard(folder: Path) -> Leaderboard:
    """The leaderboard of the study folder ``folder``; one error line if it is not one."""
    path = folder / LEADERBOARD
    data = read_json(path)
    try:
        trials = [TrialResult(**row) for row in data["trials"]]
        best = TrialResult(**data["best"]) if data.get("best") else None
        return Leaderboard(data["study"], data["storage"], data["extractor"], data["target"], data["tolerance"],
                           data["trials_asked"], trials, best, data["space"], data.get("notes", []),
                           data.get("effects", {}), data.get("importance"))
    except (KeyError, TypeError) as err:
        raise UserError(f"{path}: not a leaderboard as `rationale tune` writes it ({err})") from None
