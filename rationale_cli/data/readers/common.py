"""Helpers shared by the readers: opening files, streaming lines, checking values.

Every check raises :class:`UserError` with one line ``file:line: what was
expected``; callers pass the ``where`` string of the line at hand.
"""

from __future__ import annotations

import gzip
import json
from itertools import repeat
from pathlib import Path
from typing import IO, Iterator

from rationale_cli.data.records import Span
from rationale_cli.runtime.errors import UserError, where


def open_binary(path: str | Path) -> IO[bytes]:
    """Open a file for reading bytes, gunzipping ``*.gz`` transparently."""
    path = Path(path)
    try:
        if path.name.endswith(".gz"):
            return gzip.open(path, "rb")
        return open(path, "rb")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line_no, line)`` pairs, numbered from 1, without the line ending.

    Lines are decoded one at a time (UTF-8, a leading byte-order mark dropped), so
    memory stays constant and a decoding error names its own line.
    """
    line_no = 0
    try:
        with open_binary(path) as handle:
            for line_no, raw in enumerate(handle, 1):
                try:
                    line = raw.rstrip(b"\r\n").decode("utf-8-sig" if line_no == 1 else "utf-8")
                except UnicodeDecodeError:
                    raise UserError(f"{where(path, line_no)}: expected UTF-8 text") from None
                yield line_no, line
    except (EOFError, OSError) as err:
        raise UserError(f"{where(path, line_no + 1)}: cannot read ({err})") from None


def first_line(path: str | Path) -> str:
    """The first line of a file (empty when the file is empty or unreadable text)."""
    try:
        for _, line in iter_lines(path):
            return line
    except UserError:
        pass
    return ""


def parse_json_object(line: str, at: str) -> dict:
    """One JSON object from one line."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as err:
        raise UserError(f"{at}: expected one JSON object per line ({err.msg}, column {err.colno})") from None
    except RecursionError:
        raise UserError(f"{at}: expected one JSON object per line (nested too deeply to read)") from None
    if not isinstance(obj, dict):
        raise UserError(f"{at}: expected a JSON object, got {type(obj).__name__}")
    return obj


def check_score(value, at: str, name: str = "score") -> float:
    """A regression label: a finite number in [0, 1], returned as float."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise UserError(f"{at}: expected {name} to be a number in [0, 1], got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{at}: expected {name} to be a number in [0, 1], got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        hint = ("; scores are read in [0, 1]: rescale ratings first, e.g. (stars - 1) / 4 for 1-5 stars, or give "
                "them as class names for a classifier" if 1.0 < float(value) <= 100.0 else "")
        raise UserError(f"{at}: expected {name} to be a number in [0, 1], got {value!r}{hint}")
    return float(value)


def check_tokens(tokens, at: str, name: str = "tokens") -> list[str]:
    """A non-empty list of strings."""
    if not isinstance(tokens, list) or not all(map(isinstance, tokens, repeat(str))):
        raise UserError(f"{at}: expected '{name}' to be a list of strings")
    if not tokens:
        raise UserError(f"{at}: empty document, expected at least one token")
    return tokens


def check_spans(spans, n_tokens: int, at: str, name: str = "rationale") -> list[Span]:
    """Token spans ``[[start, end], ...]`` with ``0 <= start < end <= n_tokens``."""
    if not isinstance(spans, list):
        raise UserError(f"{at}: expected {name} to be a list of [start, end] token spans")
    out: list[Span] = []
    for span in spans:
        if (
            not isinstance(span, (list, tuple))
            or len(span) != 2
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in span)
        ):
            raise UserError(f"{at}: expected {name} to be a list of [start, end] token spans, got {span!r}")
        start, end = span
        if not 0 <= start < end <= n_tokens:
            raise UserError(
                f"{at}: {name} span [{start}, {end}] out of range, expected 0 <= start < end <= {n_tokens} (tokens)"
            )
        out.append((start, end))
    return out


def merge_spans(spans: list[Span]) -> list[Span]:
    """Sorted union of spans; overlapping and touching spans become one."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
