"""``rationale train`` as a library call: the options resolved (defaults, a TOML file, the
given ones; or a stopped run's own to go on with), then :func:`trainer.train_config` inside
the process group of a distributed run, stopped by SIGINT or SIGTERM on its first process
(:func:`rationale_cli.runtime.signals.stop_on_signals`)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from rich.console import Console

from rationale_cli.runs.config import TrainConfig, located, resolve, resume_config
from rationale_cli.runtime.errors import UserError
from rationale_cli.training.trainer import Trained, train_config


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
