"""The one exception a user can cause.

Anything a user can get wrong (a missing file, a malformed line, a wrong column,
a checkpoint from another version) raises :class:`UserError` with one line that
names the file, the line and what was expected. The CLI prints that line and
exits with status 2; no traceback.
"""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """An error in the user's input, reported as one line."""


def where(path: str | Path, line: int | None = None) -> str:
    """``file`` or ``file:line`` for error messages (lines count from 1)."""
    return f"{path}:{line}" if line is not None else str(path)


def check_at_least(flag: str, value: int, low: int) -> None:
    """One error line unless the integer option ``flag`` is at least ``low``."""
    if value < low:
        raise UserError(f"{flag} {value}: expected an integer >= {low}")
