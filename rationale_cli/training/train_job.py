"""``rationale train`` as a library call: the options resolved (defaults, a TOML file, the
given ones; or a stopped run's own to go on with), then :func:`trainer.train_config` inside
the process group of a distributed run, stopped by SIGINT or SIGTERM on its first process
(:func:`rationale_cli.runtime.signals.stop_on_signals`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from rationale_cli.models.options import OptionError
from rationale_cli.runs.config import PATH_OPTIONS, TRAIN_SPECS, TrainConfig, from_saved, is_path, located, resolve
from rationale_cli.runs.flags import flag_of, option_line
from rationale_cli.runtime.errors import UserError
from rationale_cli.training.trainer import Trained, train_config

RESUMABLE = ("data", "format", "aspect", "valid", "valid_fraction", "text_col", "label_col", "id_col",
             "rationale_label", "spans_key", "epochs", "time_limit", "patience", "device")


def unchanged(saved: dict[str, Any], name: str, value: Any) -> bool:
    """Whether the command line's ``value`` of option ``name`` is the saved run's own."""
    kept = saved.get(name)
    if name in PATH_OPTIONS and is_path(value, name) and is_path(kept, name):
        return os.path.abspath(value) == os.path.abspath(kept)
    return kept == value or str(kept) == str(value)


def resume_config(saved: dict[str, Any], cli: dict[str, Any], source: str) -> TrainConfig:
    """A run's saved options, with the few that may change when it goes on (``RESUMABLE``:
    where the data is read from, how long to train, the device) taken from the command line;
    another option is refused unless it is given as the run has it (the original command
    with ``--resume`` added goes on)."""
    given = {k: v for k, v in cli.items() if v is not None}
    fixed = sorted(k for k in set(given) - set(RESUMABLE) if not unchanged(saved, k, given[k]))
    given = {k: v for k, v in given.items() if k in RESUMABLE}  # the others are the run's own
    if fixed:
        names = ", ".join(map(flag_of, fixed))
        raise UserError(f"--resume goes on with the run's own options; it cannot change {names}")
    config = from_saved(saved, source)
    try:
        return dataclasses.replace(config, **{k: TRAIN_SPECS[k].check(v) for k, v in given.items()})
    except OptionError as err:
        raise UserError(option_line(err)) from None


def resumed(out: Path, config: Path | None, force: bool, options: dict) -> TrainConfig:
    """The options of the run in ``out`` to go on with (``train --resume``)."""
    from rationale_cli.runs.run_directory import read_json, require_run_files
    from rationale_cli.training.checkpoint import RESUME

    if config is not None or force:
        raise UserError("--resume goes on with the run's own options and files; it takes no --config or --force")
    if not (out / RESUME).is_file():
        raise UserError(f"{out}: nothing to resume (no {RESUME}; runs save it after each epoch)")
    require_run_files(out, complete=False)
    return resume_config(located(read_json(out / "config.json"), out), options, str(out / "config.json"))


def train_options(out: Path, config: Path | None, options: dict, *, force: bool = False, resume: bool = False,
                  verbose: bool = False, console: Console | None = None) -> Trained | None:
    """Train as ``rationale train`` does into the run directory ``out`` with ``options`` (None for
    those not given) over the TOML file ``config``; with ``resume``, go on with the stopped run
    there. The trained run, or None on the ranks after the first of a distributed run.
    :class:`~rationale_cli.runtime.signals.Stopped` when a signal stops it (see
    :func:`rationale_cli.training.endings.stopped_state`)."""
    from rationale_cli.runtime.signals import stop_on_signals
    from rationale_cli.training.distributed import process_group, rank

    cfg = resumed(out, config, force, options) if resume else resolve(config, options)
    if not cfg.data:
        raise UserError("no training data: give --data PATH (or 'demo'), or data = ... in --config")
    with process_group(cfg.device):
        with stop_on_signals() if rank() == 0 else contextlib.nullcontext():  # the others keep their default
            trained = train_config(cfg, out, console, force=force, resume=resume, verbose=verbose)
        if rank() > 0:
            return None
    return trained
