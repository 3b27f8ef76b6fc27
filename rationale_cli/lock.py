"""An exclusive lock on a run directory, so that two trainings never write into one.

The lock is a file beside the run directory, ``.NAME.lock``, created exclusively and
holding the holder's process id and host name; it is removed when training ends,
however it ends. A lock left by a process that no longer runs on this host (killed
with SIGKILL, a machine restart) is stale and taken over; one held by a live
process, or by another host, is refused with one line saying who holds it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Iterator

from rationale_cli.errors import UserError


def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.lock"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user
        return True
    return True


def holder(path: Path) -> tuple[int, str] | None:
    """The (pid, host) written in a lock file, or None when it cannot be read."""
    try:
        pid, host = path.read_text(encoding="utf-8").split(maxsplit=1)
        return int(pid), host.strip()
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold the lock on run directory ``out`` for the duration of the block."""
    path = lock_path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"{out}: cannot create the run directory here ({err.strerror})") from None
    me = f"{os.getpid()} {socket.gethostname()}\n"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            found = holder(path)
            if found is not None and found[1] == socket.gethostname() and not alive(found[0]):
                path.unlink(missing_ok=True)  # stale: its process is gone
                continue
            who = f"process {found[0]} on {found[1]}" if found else "another process"
            raise UserError(f"{out}: another training is writing this run ({who}); if it is not running, "
                            f"remove {path}") from None
        except OSError as err:
            raise UserError(f"{out}: cannot create the run directory here ({err.strerror})") from None
    else:  # pragma: no cover - a stale lock retaken by someone else in between
        raise UserError(f"{out}: another training is writing this run")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(me)
    try:
        yield
    finally:
        if holder(path) == (os.getpid(), socket.gethostname()):
            path.unlink(missing_ok=True)
