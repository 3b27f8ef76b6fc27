"""Shared by the benchmark scripts: run the CLI, record one JSON line per run."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import torch
from report import RESULTS  # one JSONL file per benchmark, named for it

from rationale_cli.models.selectors import option_specs

ROOT = Path(__file__).resolve().parent.parent
GLOVE = Path("glove_6B_50d_subset") / "glove.6B.50d.subset.txt.gz"  # under the data folder


def movies_inputs(data_dir: str, vectors: Path | None = None) -> tuple[Path, Path]:
    """ERASER movies under the data folder ``data_dir``, and ``vectors`` or, without them, the
    GloVe 6B 50-d subset there."""
    root = Path(data_dir).resolve()
    return root / "eraser_movies", vectors.resolve() if vectors else root / GLOVE


def word_inputs(parser: argparse.ArgumentParser, encoder: str | None, pretrained: Path | None,
                vectors: str | Path) -> list[str]:
    """``train``'s options for what the encoders read: a transformer's folder with ``--encoder
    hf`` (no word vectors), nothing with ``--encoder bow`` (its own vectors over word ids), else
    the word vectors; a transformer without ``--pretrained`` or the reverse is a usage error."""
    if (encoder == "hf") != (pretrained is not None):
        parser.error("--encoder hf goes with --pretrained DIR, and --pretrained with --encoder hf")
    if encoder == "bow":
        return []
    return ["--pretrained", str(pretrained.resolve())] if pretrained else ["--embeddings", str(vectors)]


def pooled_reviews(beer: Path, aspect: int) -> tuple[list, list]:
    """The aspect's own 9,000 / 1,000 split of its heldout reviews (the CLI's ``--valid-fraction
    0.1``) with every other heldout file's reviews added to training, labelled with this aspect's
    score; reviews equal to a validation review or to one already taken are left out."""
    from rationale_cli.data.readers import read_records
    from rationale_cli.training.trainer import split_validation

    own = beer / f"reviews.aspect{aspect}.heldout.txt.gz"
    train, valid = split_validation(read_records(own, "beer", aspect=aspect), 0.1)
    seen = {" ".join(r.tokens) for r in valid}
    pooled = []
    others = sorted(p for p in beer.glob("reviews.aspect*.heldout.txt.gz") if p != own)
    for source, records in [(own.name, train)] + [(p.name, read_records(p, "beer", aspect=aspect)) for p in others]:
        for record in records:
            text = " ".join(record.tokens)
            if text not in seen:
                seen.add(text)
                pooled.append(dataclasses.replace(record, id=f"{source}:{record.id}"))
    return pooled, valid


def budget_options(extractor: str, rate) -> tuple[str, ...]:
    """``--budget RATE`` for an extractor that takes one; none for those whose size is their own
    (``full``; sparse attention's support: a rate decoding at test time still holds a rate)."""
    return ("--budget", str(rate)) if "budget" in option_specs(extractor) else ()


def runs_folder(given: str | None, prefix: str) -> Path:
    """Where a benchmark keeps its run directories: ``given``, or a new temporary folder."""
    return Path(given) if given else Path(tempfile.mkdtemp(prefix=prefix))


def vectors_name(path: Path) -> str:
    """How a results row names its word vectors: the GloVe subset, or the file's name."""
    return "glove 50d" if path.name == Path(GLOVE).name else path.name


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        # the results files themselves change as a benchmark records its rows
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!benchmarks/results", ":!benchmarks/RESULTS.md"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def invocation() -> str:
    """The command line this benchmark script runs under, as its results record it."""
    return shlex.join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def rationale_command(*args: str) -> str:
    """``rationale ARGS`` as results record the command."""
    return shlex.join(["rationale", *args])


def rationale(*args: str) -> tuple[str, float]:
    """Run ``rationale ARGS`` (this checkout's), stream its output, return the command and seconds."""
    started = time.perf_counter()
    run_child([sys.executable, "-m", "rationale_cli", *args])
    return rationale_command(*args), time.perf_counter() - started


def run_child(argv: list[str]) -> None:
    """Run ``argv`` from the checkout's root and wait for it (CalledProcessError if it fails). A
    SIGTERM to this script, or any error while it waits, stops the child too: a benchmark killed
    with ``kill PID`` leaves no training running into its run folder."""
    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    child = subprocess.Popen(argv, cwd=ROOT)
    try:
        code = child.wait()
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait()
        signal.signal(signal.SIGTERM, previous)
    if code:
        raise subprocess.CalledProcessError(code, argv)


# a ``rationale`` command in-process, then its peak resident memory (or its largest worker's) as
# the last line of its output: run with ``python -c MEASURED ARGS`` from a checkout's root,
# which then imports that checkout's code
MEASURED = """
import json, resource, sys
from rationale_cli.cli import app
try:
    app(sys.argv[1:])
except SystemExit as stop:
    assert not stop.code, stop.code
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"peak_mb": peak / 1024}))
"""


def measured(args: list[str], tree: Path) -> tuple[subprocess.CompletedProcess, float]:
    """``rationale ARGS`` with the code of the checkout ``tree``, in its own process: the finished
    process (its output captured) and its peak resident memory in MB."""
    done = subprocess.run([sys.executable, "-c", MEASURED, *args], cwd=tree, check=True, capture_output=True,
                          text=True)
    return done, json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]


@contextlib.contextmanager
def commit_tree(commit: str | None, folder: Path) -> Iterator[Path | None]:
    """The checkout of ``commit`` in a git worktree at ``folder`` while the block runs (removed
    after); None without a commit."""
    if commit is None:
        yield None
        return
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), commit], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, check=False,
                       capture_output=True)


def append_result(row: dict) -> None:
    """Append ``row`` to its benchmark's file, benchmarks/results/<benchmark>.jsonl."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{row['benchmark']}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def timed(fn: Callable[[], object], repeats: int, device: torch.device | str = "cpu") -> float:
    """Median milliseconds of ``fn()`` over ``repeats`` runs after one warm-up run,
    synchronizing a GPU around each run."""
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    fn()
    runs = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000


def timing_parser(doc: str, batch: int, length: int) -> argparse.ArgumentParser:
    """The options every timing script takes: sizes, repeats, threads and device."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--length", type=int, default=length)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    return parser


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what the platform says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform
        return platform.processor() or platform.machine()


def device_name(device: torch.device | str) -> str:
    """The name a result records for a device: the GPU model on CUDA, else ``cpu``."""
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def timing_setup(args: argparse.Namespace) -> tuple[torch.device, str]:
    """Threads and seed set; the device and its name for the results (the GPU model on CUDA)."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    return device, device_name(device)
