"""The one rule for every file a command writes, and the one lock on it.

* ``-`` is standard output, and a device, a pipe or an open descriptor is written through:
  nothing there can be lost, so they are always allowed;
* a command's own inputs (a file, or a file in an input folder) and the files of a run
  directory (a folder whose ``versions.json`` names this toolkit, and its sub-folders) are
  refused, even with ``--force``;
* any other existing file is replaced only with ``--force``;
* the write itself goes to a temporary file renamed at the end
  (:mod:`rationale_cli.runtime.atomic`), and a write the file system refuses (a full disk, a
  read-only one) is one line naming the file (:func:`~rationale_cli.runtime.atomic.write_failure`).

:func:`protected_output` applies the first two, :func:`new_output` all of them (``predict``
decides about an existing output itself: it may be an interrupted run's, to be continued).
:func:`output_lock` keeps a second process from writing an output another one is writing.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from rationale_cli.runtime.atomic import writable_target
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.lock import held

__all__ = ["exists_error", "is_run_directory", "new_output", "output_lock", "protected_output"]


def is_run_directory(path: Path) -> bool:
    """Whether ``path`` holds a run this toolkit wrote (its ``versions.json`` names it)."""
    try:
        return "rationale_cli" in json.loads((path / "versions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


def holding_run(target: Path) -> Path | None:
    """The run directory that the file ``target`` (a resolved path) is in, if any."""
    return next((folder for folder in target.parents if is_run_directory(folder)), None)


def as_input(target: Path, source: str | os.PathLike) -> str | None:
    """What the existing file ``target`` (a resolved path) is of the input ``source``: "one of the
    command's inputs", a file "in the input folder ...", or None (not an input; 'demo', '-' and
    hub names are no files)."""
    if not target.exists() or not os.path.exists(source):
        return None
    if os.path.isdir(source):
        return f"in the input folder {source}" if Path(os.path.realpath(source)) in target.parents else None
    return "one of the command's inputs" if os.path.samefile(target, source) else None


def protected_output(path: str | os.PathLike, inputs: Iterable[str | os.PathLike | None] = (),
                     flag: str = "--out") -> Path | None:
    """The regular file that writing ``path`` creates or replaces (None: standard output, a
    device or a pipe), refused where it cannot be written, is one of ``inputs``, or is an
    existing file of a run directory, whatever ``--force`` says."""
    if str(path) == "-":
        return None
    target = writable_target(path)
    if target is None:
        return None
    for source in inputs:
        found = None if source is None else as_input(target, source)
        if found is not None:
            raise UserError(f"{path}: is {found}; choose another {flag}")
    run = holding_run(target) if target.exists() else None
    if run is not None:
        raise UserError(f"{path}: is a file of the run directory {run}; choose another {flag}, outside the run's files")
    return target


def exists_error(path: str | os.PathLike, flag: str = "--out") -> UserError:
    """The line that refuses to replace the existing ``path`` without ``--force``."""
    return UserError(f"{path}: already exists; choose another {flag} or pass --force to replace it")


def new_output(path: str | os.PathLike, force: bool = False, inputs: Iterable[str | os.PathLike | None] = (),
               flag: str = "--out") -> Path | None:
    """:func:`protected_output`, and an existing file refused unless ``force``: what a command
    checks of each output before its work."""
    target = protected_output(path, inputs, flag)
    if target is not None and target.exists() and not force:
        raise exists_error(path, flag)
    return target


@contextlib.contextmanager
def output_lock(target: Path, flag: str = "--out") -> Iterator[None]:
    """Hold the lock on the output file ``target`` (a resolved path) for the block: a second
    process writing it gets one line naming the first (:mod:`rationale_cli.runtime.lock`)."""
    with held(target, lambda who: f"{target}: another process is writing this output ({who}); wait for it "
                                  f"to end, or choose another {flag}"):
        yield
