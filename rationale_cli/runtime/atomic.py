"""Atomic file writes: an interrupted write never leaves a broken or half-written file.

Output goes to a temporary file in the target's own directory (so the final
``os.replace`` is a rename on one file system, atomic on POSIX and Windows) and
replaces the target only once it is complete. On an exception the temporary
file is deleted and an existing target is left as it was. Only regular files are
replaced: a symbolic link is followed to its target (which is then replaced), and
a character device, a named pipe or a process's open file (``/dev/stdout``, a fifo,
``/dev/fd/3``) is written through, appended to (so ``>> file`` keeps what it had).
A path that cannot be written (a missing or read-only folder, a folder given as
the file) is a :class:`~rationale_cli.runtime.errors.UserError` before anything is written, and
a write the file system refuses on the way (a full disk or quota, a file system turned
read-only) is one too, naming the file (:func:`write_failure`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import sys
from pathlib import Path
from typing import Iterator, TextIO

from rationale_cli.runtime.errors import UserError

__all__ = ["atomic_path", "text_output", "writable_target", "write_failure", "write_text_atomic"]

# what a file system answers to a write it cannot take: full, over quota, too large, read-only
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def write_failure(path: str | os.PathLike, err: BaseException) -> UserError | None:
    """The one line for ``err``, raised while writing ``path``, where it is the file system
    refusing the write (:data:`WRITE_ERRNOS`): an ``OSError``, or the error of a writer in native
    code (safetensors) whose message ends in Rust's "(os error N)"; None for any other error."""
    code = err.errno if isinstance(err, OSError) else None
    if code is None and (found := re.search(r"\(os error (\d+)\)", str(err))):
        code = int(found.group(1))
    if code not in WRITE_ERRNOS:
        return None
    return UserError(f"{path}: cannot write it ({os.strerror(code)})")


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


def not_created(target: Path, err: OSError) -> str:
    """Why no file could be created beside ``target``, in words."""
    reason = "" if err.errno == errno.ENOENT else f": {err.strerror or err}"  # ENOENT: a folder like /proc
    return f"no file can be created in {target.parent}{reason}"


def open_descriptor(path: str | os.PathLike) -> bool:
    """Whether ``path`` names an open file of a process (``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N``), through symbolic links: whatever file it is, the process holds it
    open, so it is written through rather than replaced."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's limit on a chain of links
        if re.fullmatch(r"/(dev|proc/[^/]+)/fd/\d+", current):
            return True
        try:
            link = os.readlink(current)
        except OSError:
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
    return False


def writable_target(path: str | os.PathLike, probe: bool = True) -> Path | None:
    """The regular file that writing ``path`` creates or replaces (a link's target), or
    None for a device, a pipe or an open descriptor (:func:`open_descriptor`), which are
    written through; a
    :class:`~rationale_cli.runtime.errors.UserError` where nothing can be written. Commands call
    it before their work, so that a bad output path costs nothing. With ``probe`` a file is
    created beside the target and removed at once, which proves that one can be (the
    temporary file of an atomic write, or a partial output, will be written there)."""
    try:
        found = os.stat(path)  # through symbolic links
    except FileNotFoundError:
        found = None
    except OSError as err:
        raise UserError(f"{path}: cannot write here ({err.strerror})") from None
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise UserError(f"{path}: is a folder; expected a file name to write")
    if found is not None and (not stat.S_ISREG(found.st_mode) or open_descriptor(path)):
        return None
    target = Path(os.path.realpath(path))
    if not target.parent.is_dir():
        raise UserError(f"{path}: cannot write here (no such folder: {target.parent})")
    if not os.access(target.parent, os.W_OK):
        raise UserError(f"{path}: cannot write here (no permission to write in {target.parent})")
    if probe:  # os.access says yes to root, and to folders (/proc, a read-only mount) that take no new file
        try:
            _create_temp(target).unlink()
        except OSError as err:
            raise UserError(f"{path}: cannot write here ({not_created(target, err)})") from None
    return target


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``.

    Write the whole output to the yielded path (it exists, empty). When the
    block ends normally the file is flushed to disk and ``os.replace``-d onto
    ``path`` with the permissions of a newly created file, whatever the writer
    did to them; when it raises (KeyboardInterrupt included), the temporary file
    is deleted and ``path`` is untouched (a write the file system refused becomes the
    :class:`UserError` of :func:`write_failure`). The directory of ``path`` must exist.

        with atomic_path(run_dir / "model.safetensors") as tmp:
            save_file(tensors, tmp)
    """
    target = writable_target(path, probe=False)  # creating the temporary file is the probe
    if target is None:
        yield Path(path)  # a device or a pipe: written through, nothing to replace
        return
    try:
        tmp = _create_temp(target)
    except OSError as err:
        raise UserError(f"{path}: cannot write here ({not_created(target, err)})") from None
    mode = tmp.stat().st_mode & 0o777
    try:
        yield tmp
        if tmp.stat().st_mode & 0o777 != mode:  # a writer that replaced the file (safetensors does)
            os.chmod(tmp, mode)
        _fsync(tmp)
        os.replace(tmp, target)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        failure = write_failure(path, err)
        if failure is not None:
            raise failure from None
        raise


@contextlib.contextmanager
def text_output(path: str | os.PathLike) -> Iterator[TextIO]:
    """A text handle on ``path``, written atomically (:func:`atomic_path`); ``-`` is
    standard output."""
    if str(path) == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_path(path) as tmp, open(tmp, "a", encoding="utf-8") as handle:  # a new file, or written through
        yield handle


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_path`), or to standard output for ``-``."""
    with text_output(path) as handle:
        handle.write(text)
