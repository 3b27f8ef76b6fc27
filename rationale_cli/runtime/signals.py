"""Stopping at a signal without leaving anything half-done.

Under :func:`stop_on_signals`, SIGINT and SIGTERM raise :class:`Stopped` at once, wherever
the work is (a long batch, a slow read), except inside :func:`writing`, whose block (files
that belong together, a lock's removal, an output and the state that says how far it got)
finishes before the stop goes on. ``train`` and ``predict`` run under it, so either stops
within moments of a signal with its files consistent.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


class Stopped(KeyboardInterrupt):
    """Work stopped by SIGINT or SIGTERM, whose number is ``signal``; a
    KeyboardInterrupt, so what handles Ctrl-C handles it too."""

    def __init__(self, number: int):
        super().__init__(number)
        self.signal = number


class StopSignals:
    """The first stop signal received, raised as :class:`Stopped` once no :func:`writing`
    block is under way; once at most, and never after :func:`stop_on_signals` ends."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.writing = 0
        self.spent = False

    def receive(self, number: int, _frame) -> None:
        self.received = self.received or number
        self.stop_now()

    def stop_now(self) -> None:
        if self.received and not self.writing and not self.spent:
            self.spent = True
            raise Stopped(self.received)


ACTIVE: list[StopSignals] = []  # the one in effect while stop_on_signals runs


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Stopped` in the block (see :func:`writing`). Only in
    the main thread, where signals are handled; elsewhere it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = StopSignals()
    before = {number: signal.signal(number, stops.receive) for number in (signal.SIGINT, signal.SIGTERM)}
    ACTIVE.append(stops)
    try:
        yield
    finally:
        stops.spent = True  # the block is over: a signal now has nothing left to stop
        for number, handler in before.items():
            signal.signal(number, handler)
        ACTIVE.remove(stops)


@contextlib.contextmanager
def writing() -> Iterator[None]:
    """A block that a stop signal does not cut: :class:`Stopped` comes when it ends."""
    if not ACTIVE:
        yield
        return
    stops = ACTIVE[-1]
    stops.writing += 1
    try:
        yield
    finally:
        stops.writing -= 1
    stops.stop_now()


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM held back in this thread for the block (a process started meanwhile
    inherits the mask, so a stop signal reaches its parent alone), where the platform can
    block signals; elsewhere (Windows) the block runs as it is."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
