"""Windows of documents annotated in order: here, or by worker processes (``--workers N``,
one torch thread each, spawned with SIGINT and SIGTERM blocked so that only the main
process receives them and stops them all) with a few windows in flight."""

from __future__ import annotations

import multiprocessing
from collections import deque
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Callable, Iterator

from rationale_cli.data.records import Record
from rationale_cli.evaluation.faithfulness import scored_documents
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.runs.inference import Output, run_model
from rationale_cli.runs.run_directory import Run
from rationale_cli.runtime.allocator import keep_freed_memory
from rationale_cli.runtime.devices import flush_denormals
from rationale_cli.runtime.signals import stop_signals_blocked


def annotate_window(run: Run, window: list[Record], batch_size: int, device, eraser: bool = False,
                    decoding: Decoding = OWN) -> list[Output]:
    """The window's outputs in input order, run in batches of documents of similar length;
    with ``eraser``, each with its scored document (faithfulness included)."""
    order = sorted(range(len(window)), key=lambda i: len(window[i].tokens))
    ordered = [window[i] for i in order]
    outputs: list[Output | None] = [None] * len(window)
    for position, out in zip(order, run_model(run.model, run.vocab, run.task, ordered, batch_size=batch_size,
                                              device=device, decoding=decoding)):
        outputs[position] = out
    if eraser:
        for position, (doc, _) in zip(order, scored_documents(run.model, run.vocab, run.task, ordered,
                                                              batch_size=batch_size, device=device,
                                                              decoding=decoding)):
            outputs[position].scored = doc
    return outputs


Windows = Iterator[tuple[int, list[Record], list[Output]]]


@contextmanager
def window_annotator(run: Run, device, *, batch_size: int, workers: int = 1, eraser: bool = False,
                     decoding: Decoding = OWN) -> Iterator[Callable[..., Windows]]:
    """A function of the numbered windows (and how many were done before, the tally and the
    progress callback) giving ``(index, window, outputs)`` in order for those not done yet:
    annotated here, or by ``workers`` processes with a few windows in flight."""

    def skip_done(windows, done, tally, progress):
        for index, window in windows:
            if index < done:
                tally.resumed += len(window)
                progress(len(window))
            else:
                yield index, window

    def here(windows, done, tally, progress) -> Windows:
        for index, window in skip_done(windows, done, tally, progress):
            yield index, window, annotate_window(run, window, batch_size, device, eraser, decoding)

    if workers <= 1:
        yield here
        return
    links, processes = start_workers(workers, run, decoding)

    def pooled(windows, done, tally, progress) -> Windows:
        pending: deque[tuple[int, list[Record], Connection]] = deque()
        for turn, (index, window) in enumerate(skip_done(windows, done, tally, progress)):
            ready = receive(*pending.popleft()) if len(pending) == len(links) else None
            link = links[turn % len(links)]  # the worker whose window was just received
            try:
                link.send((window, batch_size, eraser))
            except OSError:
                raise WorkerDied from None
            pending.append((index, window, link))
            if ready is not None:
                yield ready
        while pending:
            yield receive(*pending.popleft())

    try:
        yield pooled
    finally:
        stop_workers(links, processes)


class WorkerDied(Exception):
    """A worker process ended without its window's outputs (killed, out of memory)."""


def receive(index: int, window: list[Record], link: Connection) -> tuple[int, list[Record], list[Output]]:
    """A window's outputs from the worker annotating it (re-raising its error)."""
    try:
        ok, payload = link.recv()
    except (EOFError, OSError):
        raise WorkerDied from None
    if not ok:
        raise payload
    return index, window, payload


def start_workers(count: int, run: Run, decoding: Decoding) -> tuple[list[Connection], list]:
    """``count`` spawned processes serving windows over pipes (:func:`serve_windows`). They start
    with SIGINT and SIGTERM blocked (a new process inherits the signal mask; here the signals
    wait while blocked and arrive after), so a Ctrl-C or a signal to the whole process group
    reaches this process alone, which stops them (:func:`stop_workers`)."""
    context = multiprocessing.get_context("spawn")
    links, processes = [], []
    with stop_signals_blocked():
        for _ in range(count):
            link, theirs = context.Pipe()
            process = context.Process(target=serve_windows, daemon=True, args=(
                theirs, str(run.path), decoding))
            process.start()
            theirs.close()  # theirs only: a dead worker's pipe then reads as closed here
            links.append(link)
            processes.append(process)
    return links, processes


def stop_workers(links: list[Connection], processes: list) -> None:
    """Workers told to stop; killed if busy with a window nobody will read."""
    for link in links:
        try:
            link.send(None)
        except OSError:
            pass
    for process in processes:
        process.join(timeout=1)
        if process.is_alive():
            process.kill()
            process.join()
    for link in links:
        link.close()


def serve_windows(link: Connection, path: str, decoding: Decoding) -> None:
    """A worker: the run loaded once, one torch thread; windows in, ``(True, outputs)`` or
    ``(False, error)`` out, until told to stop or this end of the pipe closes."""
    import torch

    from rationale_cli.runs.run_directory import load_run

    torch.set_num_threads(1)
    keep_freed_memory()
    flush_denormals()
    run = load_run(path, "cpu")
    while True:
        try:
            task = link.recv()
        except EOFError:  # the main process is gone
            return
        if task is None:
            return
        window, batch_size, eraser = task
        try:
            link.send((True, annotate_window(run, window, batch_size, "cpu", eraser, decoding)))
        except Exception as error:  # noqa: BLE001 - handed to the main process, which raises it
            link.send((False, error))
