"""The benchmark scripts' shared runner (benchmarks/common.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# a benchmark script whose child (standing in for `rationale train`) writes its pid, then sleeps
SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import common
common.run_child([sys.executable, "-c",
                  "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)", sys.argv[2]])
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_benchmark_stopped_with_sigterm_stops_its_child(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = subprocess.Popen([sys.executable, "-c", SCRIPT, str(BENCHMARKS), str(pid_file)])
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert alive(child)
    script.send_signal(signal.SIGTERM)
    assert script.wait(timeout=30) == 128 + signal.SIGTERM
    assert not alive(child)  # terminated and reaped by the script before it exited


def test_a_failing_child_fails_the_benchmark():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import common
    finally:
        sys.path.remove(str(BENCHMARKS))
    with pytest.raises(subprocess.CalledProcessError) as failed:
        common.run_child([sys.executable, "-c", "raise SystemExit(3)"])
    assert failed.value.returncode == 3
