"""The writers' common shape (:class:`Writer`) and their text files (:class:`TextWriter`): a new
file, one continued from a size it had, or standard output; JSON on one line (:func:`json_text`).
The formats are in :mod:`rationale_cli.output.writers`."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rationale_cli.runtime.atomic import writable_target
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.safe_json import to_json_line

if TYPE_CHECKING:
    from rationale_cli.runs.inference import Output


def json_text(value) -> str:
    """``value`` as JSON on one line (non-finite numbers as null)."""
    return to_json_line(value)[:-1]


class Writer:
    """Writes batches of outputs; a context manager that closes it at the end."""

    def write(self, outputs: list[Output]) -> None:
        raise NotImplementedError

    def flush(self) -> int:
        """Make what was written durable; the output's size in bytes (0 for standard output)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *error) -> None:
        self.close()


def open_text(path: str | Path, resume_at: int | None) -> TextIO:
    """``path`` for writing UTF-8 text: new, or cut to ``resume_at`` bytes and appended to."""
    if str(path) == "-":
        if resume_at is not None:
            raise UserError("standard output (-) cannot be continued; write to a file to resume")
        return sys.stdout
    through = writable_target(path) is None  # a device or pipe: never cut what the shell set up (>>)
    try:
        if resume_at is None:
            return open(path, "a" if through else "w", encoding="utf-8", newline="")
        size = os.path.getsize(path)
        if not 0 <= resume_at <= size:
            raise UserError(f"{path}: cannot continue at byte {resume_at:,}; the file has {size:,} bytes")
        os.truncate(path, resume_at)
        return open(path, "a", encoding="utf-8", newline="")
    except FileNotFoundError as err:
        if resume_at is None:  # a folder that takes no new file (/proc), or one removed meanwhile
            raise UserError(f"{path}: cannot write here ({err.strerror or err})") from None
        raise UserError(f"{path}: no such file to continue") from None
    except OSError as err:
        raise UserError(f"{path}: cannot write here ({err.strerror or err})") from None


class TextWriter(Writer):
    """A UTF-8 text file or standard output."""

    def __init__(self, path: str | Path, resume_at: int | None):
        self.to_stdout = str(path) == "-"
        self.handle = open_text(path, resume_at)

    def flush(self) -> int:
        self.handle.flush()
        if self.to_stdout:
            return 0
        with contextlib.suppress(OSError):  # a pipe or a device cannot be synced
            os.fsync(self.handle.fileno())
        return os.fstat(self.handle.fileno()).st_size

    def close(self) -> None:
        if self.to_stdout:
            self.handle.flush()
        else:
            self.handle.close()
