"""An exclusive lock on a run directory or an output file, so that two trainings never write
into one run and two ``predict`` runs never into one output.

The lock is an advisory ``flock`` on a file beside the run directory or output file,
``.NAME.lock`` (NAME of the resolved path, so a symbolic link and its target share
it), holding the holder's process id and host for the message a second process
gets. The operating system releases the lock when its process ends however it ends
(SIGKILL, a crash), so a lock left behind is never stale; the file is removed when
the work ends, normally or not.

The lock is taken and removed inside :func:`~rationale_cli.runtime.signals.writing`, so a
stop signal never leaves the lock file behind. ``flock`` where the platform has it (POSIX),
else ``msvcrt.locking`` on the file's first byte (Windows); a platform with neither trains
without the lock, and says so once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from pathlib import Path
from typing import IO, Callable, Iterator

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None
try:
    import msvcrt
except ImportError:  # not Windows
    msvcrt = None

from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.signals import writing


def resolved(out: Path) -> Path:
    """``out`` as an absolute path without symbolic links; a loop of them is one error line."""
    try:
        return out.resolve()
    except (RuntimeError, OSError):  # a loop of symbolic links (an OSError from Python 3.13)
        raise UserError(f"{out}: cannot write here (a loop of symbolic links)") from None


def lock_path(out: Path) -> Path:
    out = resolved(out)
    return out.parent / f".{out.name}.lock"


def holder(path: Path) -> str:
    """Who holds the lock, as its file says."""
    try:
        pid, host = path.read_text(encoding="utf-8").split(maxsplit=1)
        return f"process {int(pid)} on {host.strip()}"
    except (OSError, ValueError):
        return "another process"


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold the lock on run directory ``out`` for the duration of the block."""
    path = lock_path(out)
    created = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]  # deepest first
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"{out}: cannot create the run directory here ({err.strerror})") from None
        with held(out, lambda who: f"{out}: another training is writing this run ({who})"):
            yield
    except BaseException:
        with writing():
            remove_empty(created)  # a training that failed leaves no folder it made for the run
        raise


@contextlib.contextmanager
def held(out: Path, busy: Callable[[str], str]) -> Iterator[None]:
    """Hold the lock on ``out`` (a run directory, an output file) for the block; where another
    process holds it, a :class:`UserError` of ``busy(who)``. The lock file is taken and removed
    inside :func:`writing`, so a stop signal meanwhile waits for it, then removes it."""
    path = lock_path(out)
    with writing():
        handle = taken(out, path, busy)
    try:
        yield
    finally:
        with writing():
            path.unlink(missing_ok=True)  # while still held, so no one locks a file about to vanish
            handle.close()


def taken(out: Path, path: Path, busy: Callable[[str], str]):
    """The lock file ``path`` of ``out``, locked and naming this process."""
    handle = locked(out, path, busy)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()} {socket.gethostname()}\n")
    handle.flush()
    return handle


def remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) that are empty, as :func:`run_lock` found them missing."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (another process wrote there meanwhile), or gone
            return


def locked(out: Path, path: Path, busy: Callable[[str], str]):
    """The lock file ``path`` of ``out``, open and locked."""
    while True:
        try:
            handle = open(path, "a+", encoding="utf-8")
        except OSError as err:
            raise UserError(f"{out}: cannot write here ({err.strerror})") from None
        if not lock_now(handle):
            handle.close()
            raise UserError(busy(holder(path))) from None
        try:  # the file may have been removed by the holder that just let go: lock the one now there
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    return handle


_unlocked_noted = False


def lock_now(handle: IO[str]) -> bool:
    """Lock the open file ``handle`` for this process without waiting: False where another
    process holds it. Without a lock call on the platform, True, with a note once."""
    global _unlocked_noted
    if fcntl is not None:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    if msvcrt is not None:
        try:
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    if not _unlocked_noted:
        _unlocked_noted = True
        sys.stderr.write("note: this platform has no file locks, so two trainings into one run directory "
                         "(or two predict runs into one output) are not kept apart\n")
    return True
