"""How library calls report progress without printing: a :data:`Progress` opens a context per
pass over documents that yields ``advance(n)``; the command line gives one that draws a bar
on a terminal and prints plain lines elsewhere, the library's default reports nothing."""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Iterable, Iterator, TypeVar

T = TypeVar("T")
# a progress reporter: ``progress(total, doing=...)`` opens a context that yields ``advance(n)``
Progress = Callable[..., ContextManager[Callable[[int], None]]]


def no_progress(total: int | None, doing: str = "") -> ContextManager[Callable[[int], None]]:
    """A :data:`Progress` that reports nothing."""
    return contextlib.nullcontext(lambda n: None)


def counted(items: Iterable[T], advance: Callable[[int], None]) -> Iterator[T]:
    """``items``, each counted by ``advance(1)`` as it is taken."""
    for item in items:
        advance(1)
        yield item
