"""Compiled inner loops, with the plain PyTorch loops as their fallback.

Some loops run a few small operations per time step, so their time goes into dispatching
PyTorch operations rather than arithmetic. Their elementwise work (and, for the small
dependent selector, the whole step) is written in C here, one pass per step, with the
same math as the PyTorch code it stands in for (each is tested against it):

- :mod:`rationale_cli.models.native.rcnn`: the bigram RCNN's steps (``rcnn_steps.c``), forward and
  backward, for :mod:`rationale_cli.models.encoders.recurrence` (the whole loop, where PyTorch carries MKL);
- :mod:`rationale_cli.models.native.hardkuma_scan`: the dependent HardKuma selector's sampling loop
  (``hardkuma_scan.c``), forward and backward, for :mod:`rationale_cli.models.selectors.binary.dependent`;
- :mod:`rationale_cli.models.native.dropout`: dropout with a hashed mask (``dropout.c``), for every encoder;
- :mod:`rationale_cli.models.native.greedy_masks`: SparseMAP's starting support (``greedy_masks.c``, float64),
  for :mod:`rationale_cli.models.distributions.sparsemap`;
- :mod:`rationale_cli.models.native.token_rows`: an encoder's first layer at inference from each word's
  products (``token_rows.c``), for :mod:`rationale_cli.models.encoders.cnn` and :mod:`rationale_cli.models.encoders.recurrence`;
- :mod:`rationale_cli.models.native.kbest`: the k-best semiring's sum (``kbest.c``), for
  :mod:`rationale_cli.models.distributions.chain_dp`;
- :mod:`rationale_cli.models.native.chain_tables`: the same program's log-semiring tables and expectations
  (``chain_tables.c``), for the k-subset extractors' marginals and their gradients.
- :mod:`rationale_cli.models.native.tv_prox`: the total-variation prox, the taut string (``tv_prox.c``, float64),
  for :mod:`rationale_cli.models.prox` (fusedmax attention).

A C file (with the headers of this folder) is compiled on first use with the system's C
compiler (``cc``, or ``$CC``) into the user's cache folder (``$XDG_CACHE_HOME/rationale-cli``,
else a temporary folder) and loaded with :mod:`ctypes`: ``pip install`` needs no compiler.
Each build says so on standard error (once per source, compiler and CPU) and removes the
loop's older builds from that folder; a build that fails or outlasts :data:`COMPILE_SECONDS`
turns the compiler off for the process, so the other loops do not wait on it too (one that
outlasts it is killed with every process it started).
Where the platform has no user ids (Windows), a cache folder is used without the ownership
check.
Where there is none, a build fails, the tensors are not of the loop's type (float32; float64
for SparseMAP) on the CPU, or ``RATIONALE_NATIVE=0`` is set, the PyTorch loops run instead,
with the same results up to float rounding. A loop whose rows are independent runs on as
many threads as PyTorch uses (:func:`over_rows`; ctypes lets go of Python's lock during
each call).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor

COMPILE_SECONDS = 60
FLAGS = ("-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math", "-shared", "-fPIC")
INT, FLOAT, POINTER = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p


def _machine() -> bytes:
    """What ``-march=native`` compiles for: the CPU's flags (a cached build is never loaded
    on a CPU that lacks an instruction it uses)."""
    try:
        with open("/proc/cpuinfo", "rb") as info:
            return next((line for line in info if line.startswith(b"flags")), b"")
    except OSError:
        return platform.processor().encode()


def _user() -> str:
    """This user, for a folder name: the user id where the platform has them."""
    return str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")


def _folders() -> list[Path]:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [Path(cache) / "rationale-cli", Path(tempfile.gettempdir()) / f"rationale-cli-{_user()}"]


def _own(folder: Path) -> bool:
    """Whether only this user can write into ``folder`` (a library is never loaded from a folder,
    such as one in a shared temporary folder, where someone else could have put it). Without
    user ids (Windows) the folder's access is the operating system's per-user profile rule."""
    if not hasattr(os, "getuid"):
        return True
    info = folder.stat()
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


_compiler_failed = False  # a build failed or timed out: no other build is tried in this process


def _compile(command: list[str]) -> None:
    """Run the compiler in a process group of its own; one that outlasts :data:`COMPILE_SECONDS`
    is killed with the whole group (cc's cc1, as and ld too), so none is left behind."""
    own_group = hasattr(os, "killpg")  # POSIX
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=own_group)
    try:
        code = process.wait(timeout=COMPILE_SECONDS)
    except BaseException:  # the timeout, or a stop signal
        if own_group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
        process.wait()
        raise
    if code:
        raise subprocess.CalledProcessError(code, command)


def _build(compiler: str, source: Path, folder: Path, target: Path) -> None:
    """Compile ``source`` into ``target`` (whole or not at all), saying so, then remove the
    loop's older builds in ``folder``."""
    global _compiler_failed
    sys.stderr.write(f"rationale: compiling {source.name} for this CPU (once)\n")
    partial = folder / f".{target.name}.{os.getpid()}"
    try:
        _compile([compiler, *FLAGS, str(source), "-o", str(partial), "-lm"])
    except (OSError, subprocess.SubprocessError):
        _compiler_failed = True
        partial.unlink(missing_ok=True)
        sys.stderr.write(f"rationale: {source.name} did not compile; the PyTorch loops run instead\n")
        raise
    os.replace(partial, target)  # whoever builds it first
    stem = target.name.rsplit("-", 1)[0]
    for old in folder.glob(f"{stem}-*.so"):
        if old != target and len(old.name) == len(target.name):  # another build of this loop only
            old.unlink(missing_ok=True)


@functools.cache
def library(name: str) -> ctypes.CDLL | None:
    """The compiled ``name.c`` of this folder, built once per source, compiler and CPU; None
    where it cannot be (or ``RATIONALE_NATIVE=0``)."""
    if os.environ.get("RATIONALE_NATIVE", "1") == "0":
        return None
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None or _compiler_failed:
        return None
    source = Path(__file__).with_name(f"{name}.c")
    text = source.read_bytes() + b"".join(header.read_bytes() for header in sorted(source.parent.glob("*.h")))
    key = hashlib.sha256(text + " ".join((compiler, *FLAGS)).encode() + _machine()).hexdigest()[:16]
    for folder in _folders():
        target = folder / f"{name}-{key}.so"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _own(folder):
                continue
            if not target.is_file():
                _build(compiler, source, folder, target)
            return ctypes.CDLL(str(target))
        except (OSError, subprocess.SubprocessError):
            if _compiler_failed:
                return None
            continue
    return None


def declared(lib: ctypes.CDLL | None, name: str, *argtypes) -> ctypes._CFuncPtr | None:
    """The C function ``name`` of ``lib`` with its argument types, or None without ``lib``."""
    if lib is None:
        return None
    function = getattr(lib, name)
    function.argtypes, function.restype = list(argtypes), None
    return function


def usable(library_name: str, *tensors: Tensor, dtype: torch.dtype = torch.float32) -> bool:
    """Whether a compiled loop can run on these tensors: ``dtype`` on the CPU, its library built."""
    return all(x.dtype == dtype and x.device.type == "cpu" for x in tensors) and library(library_name) is not None


def pointers(*tensors: Tensor) -> list[int]:
    """The tensors' data addresses (each must be contiguous)."""
    assert all(x.is_contiguous() for x in tensors)
    return [x.data_ptr() for x in tensors]


def rows_from(first: int, *tensors: Tensor) -> list[int]:
    """The addresses of row ``first`` of each (contiguous) tensor: where a part of the rows starts."""
    assert all(x.is_contiguous() for x in tensors)
    return [x.data_ptr() + first * x.stride(0) * x.element_size() for x in tensors]


def over_rows(run: Callable[[int, int], None], rows: int) -> int:
    """``run(first, count)`` on consecutive parts of ``rows``, one per thread of PyTorch's
    (:func:`torch.get_num_threads`), the first part in this thread and the others on kept
    threads (starting a thread per call took about 0.3 ms); how many parts. Each part must
    write only its own rows (or its own copy of what they add up). An error in any part is
    raised here, once every part has ended."""
    parts = max(1, min(torch.get_num_threads(), rows))
    bounds = [rows * i // parts for i in range(parts + 1)]
    errors: list[BaseException] = []

    def part(first: int, count: int) -> None:
        try:
            run(first, count)
        except BaseException as error:  # handed to the calling thread
            errors.append(error)

    helpers = _helpers() if parts > 1 else None
    others = [helpers.submit(part, bounds[i], bounds[i + 1] - bounds[i]) for i in range(1, parts)]
    part(bounds[0], bounds[1])
    for other in others:
        other.result()
    if errors:
        raise errors[0]
    return parts


_pools: dict[int, ThreadPoolExecutor] = {}  # by size: one per thread count PyTorch was given
_pools_lock = threading.Lock()


def _helpers() -> ThreadPoolExecutor:
    """The kept threads of :func:`over_rows`: one fewer than PyTorch's threads."""
    count = torch.get_num_threads() - 1
    with _pools_lock:
        if count not in _pools:
            _pools[count] = ThreadPoolExecutor(count, thread_name_prefix="rationale-rows")
        return _pools[count]


def _forget_helpers() -> None:
    """A forked process has none of its parent's threads: it makes its own."""
    _pools.clear()


if hasattr(os, "register_at_fork"):  # a platform without fork (Windows) has no child to forget them in
    os.register_at_fork(after_in_child=_forget_helpers)
