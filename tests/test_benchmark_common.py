"""The benchmark scripts' shared runner (benchmarks/common.py)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import BENCHMARKS, load_script

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
    common = load_script("common")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        common.run_child([sys.executable, "-c", "raise SystemExit(3)"])
    assert failed.value.returncode == 3


def test_rows_go_to_their_benchmarks_file_and_the_report_reads_them_all(tmp_path, monkeypatch):
    common, report = load_script("common"), load_script("report")
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(report, "RESULTS", tmp_path / "results")
    rows = [{"benchmark": "beer", "seed": 0}, {"benchmark": "eraser", "seed": 0}, {"benchmark": "beer", "seed": 1}]
    for row in rows:
        common.append_result(row)
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["beer.jsonl", "eraser.jsonl"]
    assert report.load() == [rows[0], rows[2], rows[1]]  # file by file, each in the order appended


def test_the_binary_table_names_an_estimator_and_a_lagrange_rho_that_are_not_the_defaults():
    report = load_script("report")
    rows = [{"extractor": "bernoulli", "estimator": "straight-through"}, {"extractor": "bernoulli",
                                                                          "estimator": "reinforce"},
            {"extractor": "hardkuma"}, {"extractor": "hardkuma", "lagrange_rho": 20.0},
            {"extractor": "bernoulli", "lagrange_rho": 20.0}, {"extractor": "bernoulli", "lagrange_rho": 1.0,
                                                               "estimator": "straight-through"}]
    assert [report.variant(r) for r in rows] == [" (straight-through)", "", "", " (--lagrange-rho 20)", "",
                                                 " (straight-through, --lagrange-rho 1)"]


def test_the_binary_table_names_mcds_split_apart_from_plain_guidance():
    report = load_script("report")
    assert report.remedy({"remedies": {"guidance": 1.0}}) == "MCD 1"
    assert report.remedy({"remedies": {"guidance": 1.0, "separate_guidance": True}}) == "MCD 1, separated"


def test_the_binary_table_says_when_a_balanced_runs_training_classes_are_uneven():
    report = load_script("report")
    row = {"sizes": {"train": 1900}, "negatives": {"train": 465}, "balanced": True}
    assert report.train_reviews(row) == "1,900 (465 negative)"
    assert report.train_reviews({**row, "negatives": {"train": 950}}) == "1,900"
    assert report.train_reviews({**row, "balanced": False, "labels": "score"}) == "1,900 (all), their ratings"
    assert report.train_reviews({**row, "balanced": False, "balance_classes": True}) == "1,900 (all, balanced epochs)"


def test_the_binary_tables_validation_figure_is_that_of_the_decoding_the_row_chose():
    report = load_script("report")
    row = {"valid_accuracy": 0.819, "decoding": "rate", "accuracy": 0.8,
           "valid_by_decoding": {"own": {"accuracy": 0.819}, "rate": {"accuracy": 0.8235}}}
    assert report.binary_task(row, "valid_") == report.pct(0.8235)
    assert report.binary_task({**row, "decoding": "own"}, "valid_") == report.pct(0.819)
    assert report.binary_task({"valid_accuracy": 0.819}, "valid_") == report.pct(0.819)  # rows before the decodings
    assert report.binary_task(row) == report.pct(0.8)
