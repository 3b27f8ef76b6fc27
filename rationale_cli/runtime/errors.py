"""The one exception a user can cause.

Anything a user can get wrong (a missing file, a malformed line, a wrong column,
a checkpoint from another version) raises :class:`UserError` with one line that
names the file, the line and what was expected. The CLI prints that line and
exits with status 2; no traceback. What such a line quotes of a file (a name, a CSV header)
is shown through :func:`terminal_text`, so it cannot drive the terminal.
"""

from __future__ import annotations

import re
from pathlib import Path

# C0 and C1 controls (ESC starts an escape sequence) and the bidirectional controls
# (U+202E, the right-to-left override, reverses what follows); tab and line feed are kept
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


class UserError(Exception):
    """An error in the user's input, reported as one line."""


def terminal_text(text: str, one_line: bool = False) -> str:
    """``text`` safe to print: CR and CRLF become LF, every other control or bidirectional
    character U+FFFD; with ``one_line`` a line feed too."""
    text = _CONTROL.sub("\ufffd", text.replace("\r\n", "\n").replace("\r", "\n"))
    return text.replace("\n", "\ufffd") if one_line else text


def plural(count: int, noun: str) -> str:
    """``1 document``, ``2,000 documents``: a count and its noun, for messages."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def where(path: str | Path, line: int | None = None) -> str:
    """``file`` or ``file:line`` for error messages (lines count from 1)."""
    return f"{path}:{line}" if line is not None else str(path)


def check_at_least(flag: str, value: int, low: int) -> None:
    """One error line unless the integer option ``flag`` is at least ``low``."""
    if value < low:
        raise UserError(f"{flag} {value}: expected an integer >= {low}")
