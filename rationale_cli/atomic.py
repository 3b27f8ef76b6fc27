"""Atomic file writes: an interrupted write never leaves a broken or half-written file.

Output goes to a temporary file in the target's own directory (so the final
``os.replace`` is a rename on one file system, atomic on POSIX and Windows) and
replaces the target only once it is complete. On an exception the temporary
file is deleted and an existing target is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_path", "write_text_atomic"]


def _create_temp(target: Path) -> Path:
    """Create an empty, unique temporary file next to ``target``.

    Created with mode 0o666 minus the umask (as ``open`` would), not the 0o600
    of ``tempfile.mkstemp``, so the final file gets ordinary permissions.
    """
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``.

    Write the whole output to the yielded path (it exists, empty). When the
    block ends normally the file is flushed to disk and ``os.replace``-d onto
    ``path`` with the permissions of a newly created file, whatever the writer
    did to them; when it raises (KeyboardInterrupt included), the temporary file
    is deleted and ``path`` is untouched. The directory of ``path`` must exist.

        with atomic_path(run_dir / "model.safetensors") as tmp:
            save_file(tensors, tmp)
    """
    target = Path(path)
    tmp = _create_temp(target)
    mode = tmp.stat().st_mode & 0o777
    try:
        yield tmp
        if tmp.stat().st_mode & 0o777 != mode:  # a writer that replaced the file (safetensors does)
            os.chmod(tmp, mode)
        _fsync(tmp)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text_atomic(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding=encoding) as handle:
            handle.write(text)
