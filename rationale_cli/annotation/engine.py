"""Annotating a corpus (``rationale predict``): fast, resumable and sharded.

The input is read in windows of ``window`` documents. Each window is sorted by length,
run in batches (less padding) and written back in input order, appended to a partial
output beside ``OUT`` (``.OUT.partial``, renamed to ``OUT`` when complete, so an earlier
``OUT`` is kept until then), which is flushed; a small state file (``.OUT.predict.json``)
records how many windows are done, the partial output's size at that point, and the
identity of the input, the model and the options. Rerunning the same command continues after the last complete window
(anything written past it is cut off) and ends with the bytes an uninterrupted run
writes; a different input, model or option is refused unless ``--force``. SIGINT and
SIGTERM stop at once, dropping the windows in progress (:mod:`rationale_cli.runtime.signals`;
a window's output and its state are written whole); after SIGKILL those windows are redone
(one, or with ``--workers N`` up to N + 1). An error (bad input) removes the partial
output and the state; a worker process that dies (killed, out of memory) leaves them, to
be continued.

One process writes an output at a time: it holds the output's lock
(:func:`rationale_cli.runtime.outputs.output_lock`), and a second one is refused with a line
naming the first.

``--shard I/N`` annotates windows I, I+N, I+2N, ... of the input, so N processes or
machines split a corpus with no coordination; :func:`merge` interleaves their outputs
back into input order. ``--workers N`` runs the windows of one command in N processes of
one thread each on the CPU (the model's loops are mostly single-threaded work, so
processes use the cores better than threads); this process reads, orders and writes, and
alone receives SIGINT and SIGTERM (the workers start with both blocked).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import time
from contextlib import ExitStack, nullcontext
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from rationale_cli.annotation.windows import WorkerDied, window_annotator
from rationale_cli.data.records import Record
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.runs.inference import Output
from rationale_cli.runs.run_directory import WEIGHTS, Run
from rationale_cli.runtime.allocator import keep_freed_memory
from rationale_cli.runtime.atomic import text_output, writable_target, write_failure, write_text_atomic
from rationale_cli.runtime.errors import UserError, plural
from rationale_cli.runtime.outputs import exists_error, output_lock
from rationale_cli.runtime.signals import Stopped, stop_on_signals, writing

WINDOW = 4096
UNKNOWN_WARNING = 0.5  # warn when more than this share of the tokens is unknown to the model


def windows_of(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    """The input read in windows of ``size`` documents (the last one shorter)."""
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass(frozen=True)
class Shard:
    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """``I/N`` with 0 <= I < N."""
        try:
            index, count = (int(part) for part in text.split("/"))
        except ValueError:
            raise UserError(f"--shard {text}: expected I/N, e.g. 0/4") from None
        if not 0 <= index < count:
            raise UserError(f"--shard {text}: expected 0 <= I < N")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class Tally:
    """What was annotated: documents, tokens, tokens unknown to the model's vocabulary, seconds,
    and the documents an interrupted run had done before (``resumed``)."""

    documents: int = 0
    resumed: int = 0
    tokens: int = 0
    unknown: int = 0
    seconds: float = 0.0

    def add(self, outputs: Sequence[Output]) -> None:
        for out in outputs:
            self.documents += 1
            self.tokens += len(out.record.tokens)
            self.unknown += out.unknown

    @property
    def unknown_share(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0


def file_identity(path: Path) -> dict:
    stat = path.stat()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def model_identity(run: Run) -> str:
    digest = hashlib.sha256()
    for name in (WEIGHTS, "config.json", "vocab.json", "task.json"):
        digest.update((run.path / name).read_bytes())
    return digest.hexdigest()


def state_path(out: Path) -> Path:
    return out.with_name(f".{out.name}.predict.json")


def shard_record_path(out: Path) -> Path:
    """Where a finished ``--shard I/N`` output records which shard of which run it is (for
    :func:`shard_set`), beside the output, to be copied with it."""
    return out.with_name(f"{out.name}.shard.json")


def partial_path(out: Path) -> Path:
    """Where a run's output grows until it is complete (then renamed to ``out``)."""
    return out.with_name(f".{out.name}.partial")


@dataclass
class Resume:
    """Where an interrupted run stopped: windows done, output bytes at that point."""

    windows: int = 0
    bytes: int = 0


def resume_point(out: Path, identity: dict, force: bool) -> Resume | None:
    """Where to continue ``out``'s partial output (None: start afresh); refuses to replace
    an output or continue another run's without ``force``."""
    state, partial = state_path(out), partial_path(out)
    for stray in out.parent.glob(f".{state.name}.*.tmp"):  # a state write cut by SIGKILL
        stray.unlink(missing_ok=True)
    if force:
        discard(out)
        return None
    if state.is_file():
        try:
            saved = json.loads(state.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            raise UserError(f"{state}: unreadable state of an interrupted run; pass --force to start over") from None
        if saved.get("identity") != identity:
            changed = [k for k in identity if saved.get("identity", {}).get(k) != identity[k]]
            raise UserError(f"{out}: an interrupted run with another {', '.join(changed) or 'setup'} wrote it; "
                            "run the same command to continue it, or pass --force to start over")
        if not partial.is_file() or partial.stat().st_size < saved["bytes"]:
            raise UserError(f"{partial}: missing or shorter than its interrupted run recorded; pass --force to "
                            "start over")
        return Resume(saved["windows"], saved["bytes"])
    refuse_finished(out)
    return None


def refuse_finished(out: Path) -> None:
    """A finished output (one without an interrupted run's state) is replaced only with --force."""
    if out.is_file() and not state_path(out).is_file():
        raise exists_error(out)


def discard(out: Path) -> None:
    """Remove the partial output and the state of a run into ``out``."""
    state_path(out).unlink(missing_ok=True)
    partial_path(out).unlink(missing_ok=True)


@dataclass
class Job:
    """One ``rationale predict`` over a file."""

    input: str
    out: Path
    output_format: str
    reader: dict  # fmt, aspect, text_col, id_field as the command resolved them
    batch_size: int = 64
    window: int = WINDOW
    shard: Shard = Shard()
    workers: int = 1  # processes annotating windows (CPU), not part of the run's identity
    decoding: Decoding = OWN  # how the model decodes (its own way unless asked otherwise)

    def identity(self, run: Run) -> dict:
        source = Path(self.input)
        return {"input": file_identity(source) if source.is_file() else {"path": self.input},
                "model": model_identity(run),
                "options": {**self.reader, "batch_size": self.batch_size, "window": self.window,
                            "shard": str(self.shard), "output_format": self.output_format,
                            **self.decoding.to_json()}}


def annotate(job: Job, run: Run, records: Iterable[Record], device, *, force: bool = False,
             progress: Callable[[int], None] = lambda n: None) -> tuple[Tally, int | None]:
    """Annotate ``records`` (the input's documents) into ``job.out``; returns the tally and
    the signal that stopped it early (None when it completed)."""
    # the file the output becomes (a link's target); standard output, a device or a pipe is written through
    dest = None if str(job.out) == "-" else writable_target(job.out)
    with nullcontext() if dest is None else output_lock(dest):  # one process writes an output at a time
        return annotate_into(job, dest, run, records, device, force=force, progress=progress)


def annotate_into(job: Job, dest: Path | None, run: Run, records: Iterable[Record], device, *, force: bool,
                  progress: Callable[[int], None]) -> tuple[Tally, int | None]:
    """:func:`annotate` into the file ``dest`` (None: written through), holding its lock."""
    from rationale_cli.output.writers import RESUMABLE, open_writer

    keep_freed_memory()
    identity = job.identity(run)
    direct = dest is None
    start = None if direct else resume_point(dest, identity, force)
    resumable = not direct and job.output_format in RESUMABLE
    target = job.out if direct else partial_path(dest)
    tally, began = Tally(), time.perf_counter()
    mine = (w for i, w in enumerate(windows_of(records, job.window)) if i % job.shard.count == job.shard.index)
    done = start.windows if start else 0
    stopped = None
    try:
        with stop_on_signals(), window_annotator(run, device, batch_size=job.batch_size, workers=job.workers,
                                                  eraser=job.output_format == "eraser",
                                                  decoding=job.decoding) as annotated, \
                open_writer(target, job.output_format, start.bytes if start else None, str(run.path)) as writer:
            for index, window, outputs in annotated(enumerate(mine), done, tally, progress):
                with writing():  # a window's output and the state that counts it, or neither
                    writer.write(outputs)
                    size = writer.flush()
                    if resumable:
                        write_text_atomic(state_path(dest), json.dumps(
                            {"identity": identity, **asdict(Resume(index + 1, size))}) + "\n")
                    tally.add(outputs)
                    progress(len(window))
    except Stopped as stop:  # a window in progress is dropped; what was written stays, to be continued
        stopped = stop.signal
    except WorkerDied:  # as after SIGKILL: what was written stays, to be continued
        raise UserError(f"a worker process died (killed, or out of memory?); {job.out} can be continued: run "
                        "the same command again") from None
    except Exception as err:  # bad input, a full disk: nothing half-written stays, an earlier output is kept
        if not direct:
            discard(dest)
        failure = write_failure(job.out, err)
        if failure is not None:
            raise failure from None
        raise
    if stopped is not None and not resumable:
        if direct:
            raise UserError(f"stopped by signal {stopped}: {job.out} holds the first "
                            f"{plural(tally.documents, 'document')} and cannot be continued")
        discard(dest)
        raise UserError(f"stopped by signal {stopped}: {job.out} cannot be continued, so nothing was written")
    tally.seconds = time.perf_counter() - began
    if stopped is not None:
        return tally, stopped
    if not direct:
        os.replace(target, dest)
        state_path(dest).unlink(missing_ok=True)
        record_shard(job, dest, identity)
    return tally, None


def record_shard(job: Job, out: Path, identity: dict) -> None:
    """Beside a finished shard's output, which shard of which input and model it is, the
    window and the output's size; beside any other output, no such record (an earlier one goes)."""
    record = shard_record_path(out)
    if job.shard.count == 1:
        record.unlink(missing_ok=True)
        return
    write_text_atomic(record, json.dumps({"shard": str(job.shard), "window": job.window, "bytes": out.stat().st_size,
                                          "input": identity["input"], "model": identity["model"]}) + "\n")


def count_documents(path: str) -> int | None:
    """Lines in a plain or gzip file, read as bytes in blocks (the documents of a text,
    JSONL or beer file; one more than a table's rows): a total for the progress bar, None
    where it cannot be read to the end (the reading itself then says why, in one line)."""
    source = Path(path)
    if not source.is_file():
        return None
    opener = gzip.open if source.name.endswith(".gz") else open
    lines, last = 0, b"\n"
    try:
        with opener(source, "rb") as handle:
            while block := handle.read(1 << 20):
                lines += block.count(b"\n")
                last = block[-1:]
    except (EOFError, OSError):  # a damaged or truncated .gz
        return None
    return lines + (last != b"\n")


def shard_set(parts: Sequence[Path]) -> tuple[list[Path], int]:
    """``parts`` in shard order and the window they were annotated with, from the record beside
    each (:func:`record_shard`); a :class:`UserError` unless they are every shard of one input
    and one model, each unchanged since ``predict`` wrote it."""
    found: dict[int, Path] = {}
    first = None
    for part in parts:
        record = read_shard_record(part)
        shard = Shard.parse(str(record.get("shard")))
        if part.stat().st_size != record.get("bytes"):
            raise UserError(f"{part}: changed since `predict` wrote it (its size differs from {shard_record_path(part).name})")
        same = {key: record.get(key) for key in ("input", "model", "window")} | {"count": shard.count}
        if first is None:
            first = same
        elif same != first:
            differ = ", ".join(key for key in same if same[key] != first[key])
            raise UserError(f"{part}: not a shard of the same run as {parts[0]} (another {differ})")
        if shard.index in found:
            raise UserError(f"{part} and {found[shard.index]} are both shard {shard}")
        found[shard.index] = part
    count = first["count"]
    missing = [f"{index}/{count}" for index in range(count) if index not in found]
    if missing:
        raise UserError(f"shard {', '.join(missing)} missing: merge needs the outputs of all {count} shards")
    return [found[index] for index in range(count)], first["window"]


def read_shard_record(part: Path) -> dict:
    """The record beside a shard's output (:func:`record_shard`)."""
    path = shard_record_path(part)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{part}: no {path.name} beside it; merge takes the outputs of `predict --shard I/N`, "
                        "each with the record predict writes beside it") from None
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: unreadable ({err})") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}: not a shard record (expected a JSON object)")
    return record


def merge(parts: Sequence[Path], out: Path, window: int = WINDOW) -> int:
    """The shards' JSONL or CSV outputs (in shard order, ``--shard 0/N`` first) in input
    order: ``window`` documents of each in turn, as ``predict`` split them. Returns the
    number of documents."""
    table = parts[0].suffix.lower() == ".csv"
    with ExitStack() as stack:
        handles = [stack.enter_context(open(p, "r", encoding="utf-8", newline="" if table else None)) for p in parts]
        readers = [csv.reader(h) for h in handles] if table else [iter(h) for h in handles]
        headers = [next(reader, None) for reader in readers] if table else []
        target = stack.enter_context(text_output(out))
        writer = csv.writer(target) if table else None
        if table:
            writer.writerow(headers[0])
        count, turn = 0, 0
        while True:
            chunk = list(islice(readers[turn % len(parts)], window))
            if table:
                writer.writerows(chunk)
            else:
                target.writelines(chunk)
            count += len(chunk)
            if len(chunk) < window:
                break
            turn += 1
        if any(next(reader, None) is not None for reader in readers):
            raise UserError(f"{out}: the parts do not come from one sharded run with --window {window} "
                            "(a part has documents after the last window); give the parts in shard order")
    return count
