"""A hyperparameter search as one library call, :func:`tune`: ``rationale tune`` and
:func:`rationale_cli.api.tune` both come here.

Everything a user can get wrong is checked before the first trial: the options every trial
shares (as ``rationale train`` reads them), the search space and its file, the data (read once
for every trial), the storage URL and, for a study that exists, that it was made with the same
settings. Then trials run until the study holds ``trials`` finished ones (complete or pruned,
counting those of earlier runs and of other processes on the same study; a failed trial, e.g.
one whose training diverged or that a signal stopped, does not count, and one call starts at
most ``trials`` minus those already finished). The leaderboard file is rewritten after every
trial.
"""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.console import Console

from rationale_cli.models.architectures import LINEAR
from rationale_cli.runs.config import PATH_OPTIONS, TrainConfig, load_toml, resolve, with_aliases
from rationale_cli.runs.keep import Keep
from rationale_cli.runs.reference import REFERENCE_SUPPORT
from rationale_cli.runs.run_directory import load_config, require_run_files
from rationale_cli.runs.task import infer_task
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.lock import resolved
from rationale_cli.runtime.outputs import is_run_directory
from rationale_cli.training.checkpoint import data_fingerprint
from rationale_cli.training.loop import Callback
from rationale_cli.training.supervision import require_gold
from rationale_cli.training.trainer import training_data
from rationale_cli.tuning.leaderboard import (
    Leaderboard,
    TrialResult,
    choose,
    effects,
    finished,
    is_study,
    ranked,
    read_leaderboard,
    trial_line,
    write_leaderboard,
)
from rationale_cli.tuning.objective import TRIALS, Objective, TrialFailed, off_target
from rationale_cli.tuning.space import Space, for_fitted_predictor, for_fixed_selector, search_space, without_conflicts
from rationale_cli.tuning.storage import (
    WARMUP_EPOCHS,
    database_errors,
    default_storage,
    need_optuna,
    open_storage,
    open_study,
    quiet_optuna,
    redacted,
    same_json,
)

# options that may differ between the processes of one study (another machine's paths, device)
LOCAL = (*PATH_OPTIONS, "device", "time_limit", "save_epochs")
IMPORTANCE_TRIALS = 5  # complete trials before Optuna's importances mean anything


@dataclass
class Plan:
    """A study's settings, checked: the options every trial shares (``config``, and as values
    ``base``; ``given``: those the user gave), what it searches, its documents, and the
    extractor that selects in its trials (a support run's own)."""

    config: TrainConfig
    base: dict[str, Any]
    given: set[str]
    space: Space
    data: tuple[list, list]
    extractor: str

    @property
    def keep(self) -> Keep:
        """The rule on target: the rate the extractor holds in training, the tolerance."""
        return Keep(self.config.rate_target(), self.config.rate_tolerance)

    def settings(self) -> dict[str, Any]:
        """What a study must share to be continued: its extractor, options, space and data."""
        options = {k: v for k, v in self.base.items() if k not in LOCAL}
        return {"extractor": self.config.extractor, "options": options, "space": self.space.to_dict(),
                "data": data_fingerprint(*self.data)}


def without_defaults(settings: dict[str, Any]) -> dict[str, Any]:
    """A study's ``settings`` without the training options at their defaults, so that a study
    stays the same when a later release adds an option (at its default) or lists fewer."""
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig) if f.default is not dataclasses.MISSING}
    options = {k: v for k, v in settings.get("options", {}).items()
               if not (k in defaults and same_json(v) == same_json(defaults[k]))}
    return {**settings, "options": options}


@dataclass
class Tuned:
    """A finished search: its study folder, its leaderboard (and the file), and the number of
    trials this call finished."""

    out: Path
    leaderboard: Leaderboard
    path: Path
    added: int

    @property
    def best(self) -> TrialResult | None:
        return self.leaderboard.best

    @property
    def best_run(self) -> Path | None:
        """The best trial's run directory, a normal run (``rationale predict``, ``evaluate``, ``report``)."""
        return Path(self.best.run) if self.best and self.best.run else None


def given_names(config: Path | None, options: dict[str, Any]) -> set[str]:
    """The options a user gave: on the command line (not None) or in the ``--config`` file."""
    named = with_aliases({k: v for k, v in options.items() if v is not None})
    return set(named) | (set(with_aliases(load_toml(config))) if config is not None else set())


def plan_study(options: dict[str, Any], *, config: Path | None = None, space_file: Path | None = None,
               note: Callable[[str], None] | None = None) -> Plan:
    """The study's settings from ``options`` (as ``rationale train`` takes them, None where not
    given), the TOML ``config`` and the search-space file, all checked, and its data read.
    Without a ``--keep`` given, an extractor that holds a rate keeps its best epoch at the rate;
    with a support run, whose selector is fixed with its own options, only the training options
    are searched."""
    cli = {k: v for k, v in options.items() if v is not None}
    cfg = resolve(config, cli)
    space = search_space(cfg.extractor, space_file)
    if space.fixed:  # under the command line and the config file
        cfg = resolve(config, {**space.fixed, **with_aliases(cli)})
    given = given_names(config, options) | set(space.fixed)
    if "keep" not in given and cfg.rate_target() is not None:
        cfg = dataclasses.replace(cfg, keep="best-loss-at-rate")
    if not cfg.data:
        raise UserError("no training data: give --data PATH (or 'demo'), or data = ... in --config")
    base = cfg.to_dict()
    extractor = cfg.extractor
    if cfg.support and cfg.support != REFERENCE_SUPPORT:
        require_run_files(Path(cfg.support))
        extractor = load_config(Path(cfg.support)).extractor
        space = for_fixed_selector(space, note)
    space = without_conflicts(space, base, given, note)
    if cfg.predictor_encoder == LINEAR and cfg.support:
        space = for_fitted_predictor(space, note)
    train, valid = training_data(cfg)
    task = infer_task([record.label for record in train], cfg.task)
    task.targets(train)  # every label checked once, before any trial
    task.targets(valid)
    if cfg.supervise or "supervise" in space.names():  # rationale supervision needs gold to learn from
        require_gold(train)
    return Plan(cfg, base, given, space, (train, valid), extractor)


def check_folder(out: Path, name: str) -> None:
    """``out`` may hold this study: not a file, not a run, not another study's folder."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is a file; --out names the study's folder")
    if is_run_directory(out):
        raise UserError(f"{out}: is a run directory of `rationale train`; give a new folder for the study")
    other = read_leaderboard(out).study if is_study(out) else name
    if other != name:
        raise UserError(f"{out}: holds the trials of study {other}; give another --out for this one")


def board_of(study, plan: Plan, asked: int, url: str, importance: dict | None = None) -> Leaderboard:
    """The leaderboard of the study as it stands."""
    results = [TrialResult.of(trial) for trial in study.get_trials(deepcopy=False)]
    keep = plan.keep
    return Leaderboard(study.study_name, redacted(url), plan.extractor, keep.target, keep.tolerance, asked,
                       ranked(results, keep), choose(results, keep), plan.space.to_dict(), list(plan.space.notes),
                       effects(results), importance)


def importances(study) -> dict[str, float] | None:
    """Optuna's parameter importances, where it computes them with what is installed."""
    optuna = need_optuna()
    if len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))) < IMPORTANCE_TRIALS:
        return None
    try:
        with quiet_optuna(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(study)
        return {name: float(value) for name, value in found.items()}
    except Exception:  # an evaluator that needs a package not installed (Optuna 3's needs scikit-learn)
        return None


def on_target_constraint(keep: Keep) -> Callable | None:
    """For Optuna before 5 (whose trials take no constraint, :class:`Objective`), the TPE
    sampler's constraint of a trial: how far its rate lies past the tolerance of the target."""
    optuna = need_optuna()
    if hasattr(optuna.trial.Trial, "set_constraint"):
        return None
    return lambda trial: (off_target(keep, trial.user_attrs.get("valid_rate")),)


def describe(space: Space) -> str:
    return "; ".join(f"{entry.name} {entry.describe()}" for entry in space.entries) or "nothing (every option fixed)"


def tune(out: Path, options: dict[str, Any], *, trials: int, config: Path | None = None, storage: str | None = None,
         search_space: Path | None = None, study: str | None = None, timeout: float | None = None, pruner=None,
         callbacks: Sequence[Callback] = (), report: Callable[[str], None] | None = None,
         console: Console | None = None, verbose: bool = False) -> Tuned:
    """Search the hyperparameters of ``options``'s extractor into the study folder ``out`` (see
    the module docstring): ``trials`` finished trials in all; ``storage``, a database URL (default:
    SQLite in ``out``); ``search_space``, a file that changes the declared space; ``study``, its
    name (default: the folder's); ``timeout``, seconds after which no trial is started;
    ``pruner``, an Optuna pruner instead of the median rule; ``callbacks``, training callbacks of
    every trial; ``report``, called with a line per finished trial (and a few more); ``console``
    with ``verbose``, where each trial's epochs are printed. Raises
    :class:`~rationale_cli.runtime.signals.Stopped` at a stop signal, after the leaderboard is written."""
    need_optuna()
    say = report or (lambda line: None)
    if trials < 1:
        raise UserError(f"--trials {trials}: expected an integer >= 1")
    if timeout is not None and timeout <= 0:
        raise UserError(f"--timeout {timeout:g}: expected a number of seconds > 0")
    plan = plan_study(options, config=config, space_file=search_space, note=say)
    name = study or resolved(out).name
    check_folder(out, name)
    url = storage or default_storage(out)
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"{out}: cannot write here ({err.strerror})") from None
    with database_errors(url):
        return search(out, name, url, trials, plan, made, timeout=timeout, pruner=pruner, callbacks=callbacks,
                      say=say, console=console, verbose=verbose)


def search(out: Path, name: str, url: str, trials: int, plan: Plan, made: bool, *, timeout, pruner,
           callbacks, say, console, verbose) -> Tuned:
    """:func:`tune`'s trials in the study ``name`` at ``url``, once its options are checked."""
    from rationale_cli.runtime.signals import stop_on_signals

    optuna = need_optuna()
    try:
        with database_errors(url):
            store = open_storage(url)
            found = open_study(store, name, plan.settings(), pruner=pruner, constraints=on_target_constraint(plan.keep),
                               comparable=without_defaults, warmup=max(WARMUP_EPOCHS, plan.config.epochs // 4))
    except UserError:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise
    before = finished([TrialResult.of(t) for t in found.get_trials(deepcopy=False)])
    if not found.get_trials(deepcopy=False) and (out / TRIALS).is_dir() and any((out / TRIALS).iterdir()):
        raise UserError(f"{out / TRIALS}: holds the trials of a study that is not in {redacted(url)}; give a "
                        "new --out, or the --storage that holds their study")
    say(f"study {name} in {redacted(url)}: {before} of {trials} trials finished; searching {describe(plan.space)}")
    objective = Objective(out, plan.space, plan.base, plan.given, plan.data, plan.keep, callbacks,
                          console if verbose else None, verbose, optuna.TrialPruned)

    def after(study, trial) -> None:
        board = board_of(study, plan, trials, url)
        write_leaderboard(out, board)
        result = next(r for r in board.trials if r.number == trial.number)
        say(trial_line(result, finished(board.trials), trials, board.best, plan.keep))

    if before < trials:
        done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        stop = optuna.study.MaxTrialsCallback(trials, states=done)
        try:
            with quiet_optuna(), stop_on_signals():
                found.optimize(objective, n_trials=trials - before, timeout=timeout, catch=(TrialFailed,),
                               callbacks=[stop, after])
        finally:
            write_leaderboard(out, board_of(found, plan, trials, url))
    else:
        say(f"the study holds {before} finished trials already: give --trials above {before} to add more")
    board = board_of(found, plan, trials, url, importances(found))
    path = write_leaderboard(out, board)
    return Tuned(out, board, path, finished(board.trials) - before)
