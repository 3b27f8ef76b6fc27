"""How `rationale train` ends: stopped by SIGINT or SIGTERM (the lock gone, one line saying
what the run directory holds and how to go on, exit status 128 + the signal), and the
warnings of a finished run that is worse than chance or off its selection-rate target."""

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.data.records import Record
from rationale_cli.runs.config import from_values
from rationale_cli.runs.task import Classification, Regression
from rationale_cli.runtime.lock import run_lock
from rationale_cli.runtime.signals import Stopped, stop_on_signals, writing
from rationale_cli.training.checkpoint import RESUME
from rationale_cli.training.endings import Chance, chance, ending_warnings, stopped_state

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--encoder", "cnn", "--embedding-dim", "8", "--hidden-size", "8"]
runner = CliRunner()


def records(labels) -> list[Record]:
    return [Record(str(i), ["a", "b"], label) for i, label in enumerate(labels)]


# ----------------------------------------------------------------------------- chance and warnings

def test_chance_of_regression_is_the_training_mean_scored_on_validation():
    level = chance(Regression(), records([0.2, 0.4]), records([0.3, 0.5]))
    assert level.loss == pytest.approx((0.0**2 + 0.2**2) / 2, abs=1e-6)
    assert level.accuracy is None and "training mean 0.3" in level.predicts


def test_chance_of_classification_is_the_training_class_shares():
    level = chance(Classification(["a", "b"]), records(["a", "a", "b"]), records(["a", "b"]))
    assert level.loss == pytest.approx(-(math.log(2 / 3) + math.log(1 / 3)) / 2, abs=1e-6)
    assert level.accuracy == 0.5 and "majority 'a'" in level.predicts


def test_a_model_worse_than_chance_is_warned_with_its_numbers():
    config = from_values({"extractor": "attention", "lr": 1e6})
    level = Chance(0.0628, None, "the training mean 0.499")
    [warning] = ending_warnings(config, {"loss": 0.2953, "selection_rate": 0.13}, level, None)
    assert "worse than chance" in warning and "0.2953 against 0.0628" in warning
    assert "--lr (this run: 1e+06)" in warning
    assert ending_warnings(config, {"loss": 0.05, "selection_rate": 0.13}, level, None) == []


def test_an_accuracy_below_the_majority_class_is_worse_than_chance():
    config = from_values({"extractor": "attention"})
    level = Chance(0.69, 0.6, "the training class shares, majority 'pos'")
    [warning] = ending_warnings(config, {"loss": 0.6, "accuracy": 0.55, "selection_rate": 0.1}, level, None)
    assert "accuracy 55.0% against 60.0%" in warning and "loss 0.6" not in warning
    assert ending_warnings(config, {"loss": 0.6, "accuracy": 0.65, "selection_rate": 0.1}, level, None) == []


@pytest.mark.parametrize("rate, target, warned", [
    (1.0, 0.13, True),     # the report's: everything selected against 13%
    (0.05, 0.13, True),    # more than a factor 2 below
    (0.27, 0.13, True),    # more than a factor 2 above
    (0.2, 0.13, False),
    (0.08, 0.13, False),
    (0.62, 0.5, True),     # more than 10 points off
    (0.58, 0.5, False),
    (1.0, None, False),    # no target: no warning
])
def test_a_selection_rate_off_its_target_is_warned(rate, target, warned):
    config = from_values({"extractor": "hardkuma"})
    found = ending_warnings(config, {"loss": 0.01, "selection_rate": rate}, Chance(1.0, None, "x"), target)
    assert bool(found) == warned
    if warned:
        assert f"selects {100 * rate:.1f}% of the validation tokens" in found[0]
        assert f"target of {100 * target:.1f}%" in found[0] and "--keep best-loss-at-rate" in found[0]
        # under the target the multiplier is too weak; over it, too weak or swinging: the advice says which
        assert ("more --epochs or a larger --lagrange-lr" in found[0]) == (rate < target)
        assert ("a larger --lagrange-rho (this run: 1)" in found[0]) == (rate > target)
        assert ("swings across the target, a smaller --lagrange-lr" in found[0]) == (rate > target)


@pytest.mark.parametrize("extractor, sampled, warned", [
    ("hardkuma", 0.30, True),     # beer's binary task: the task's pull 11.5 points over 18.5%
    ("hardkuma", 0.15, False),    # under it: a start (the demo's first epoch samples 7-10% at 13%)
    ("hardkuma", 0.205, False),   # within 3 points
    ("hardkuma", None, False),    # no training share known
    ("sparsemap", 0.30, False),   # holds no rate with multipliers
])
def test_a_training_rate_the_multipliers_did_not_hold_is_warned(extractor, sampled, warned):
    config = from_values({"extractor": extractor, "budget": 0.185})
    valid = {"loss": 0.01, "selection_rate": 0.2}  # decoded near the target: only the sampled share can warn
    found = ending_warnings(config, valid, Chance(1.0, None, "x"), config.rate_target(), sampled)
    assert bool(found) == warned
    if warned:
        assert f"sampled {100 * sampled:.1f}% of the training tokens" in found[0]
        assert "target of 18.5%" in found[0] and "--lagrange-rho (this run: 1; 20 held" in found[0]


def test_the_held_rate_warning_cites_rho_20_only_to_a_run_below_it():
    config = from_values({"extractor": "bernoulli", "budget": 0.185})  # its default rho is 20
    [warning] = ending_warnings(config, {"loss": 0.01, "selection_rate": 0.2}, Chance(1.0, None, "x"),
                                config.rate_target(), 0.3)
    assert warning.endswith("--lagrange-rho (this run: 20)")


@pytest.mark.slow
def test_a_run_with_a_far_too_large_lr_ends_with_its_three_warnings(tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["train", "--data", "demo", "--out", str(out), *TINY, "--batch-size", "500",
                                 "--epochs", "1", "--lr", "1e6", "--independent"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert len(lines) == 3, result.output
    assert "worse than chance on validation" in lines[0] and "--lr (this run: 1e+06)" in lines[0]
    assert "validation tokens against a --budget target of 13.0%" in lines[1]
    sampled = json.loads((out / "metrics.json").read_text())["history"][0]["selected"]
    assert f"sampled {100 * sampled:.1f}% of the training tokens" in lines[2] and "--lagrange-rho" in lines[2]


# ----------------------------------------------------------------------------- stopped by a signal

def test_a_stop_signal_raises_at_once_but_waits_for_a_write_under_way():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Stopped) as stop:
        with stop_on_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert stop.value.signal == signal.SIGTERM
    written = []
    with pytest.raises(Stopped):
        with stop_on_signals():
            with writing():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.1)
                written.append("whole")
            written.append("after")
    assert written == ["whole"] and signal.getsignal(signal.SIGTERM) == before


def test_a_stopped_lock_holder_removes_its_lock_and_the_folders_it_made(tmp_path):
    out = tmp_path / "new" / "run"
    with pytest.raises(Stopped):
        with stop_on_signals(), run_lock(out):
            assert (tmp_path / "new" / ".run.lock").exists()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert not (tmp_path / "new").exists()


def test_the_state_of_a_stopped_run_says_how_to_go_on(tmp_path):
    out = tmp_path / "my run"
    out.mkdir()
    assert stopped_state(out) == "before training started; nothing was written"
    (out / "config.json").write_text(json.dumps({"epochs": 5}))
    assert "before any epoch finished, so no model was saved" in stopped_state(out)
    (out / RESUME).write_bytes(b"")
    (out / "metrics.json").write_text(json.dumps({"best_epoch": 1, "history": [{}, {}]}))
    assert stopped_state(out) == (f"after epoch 2 of 5: {out} keeps epoch 1, the best so far, ready to use; "
                                  f"to go on: rationale train --out '{out}' --resume")
    (out / "config.json").write_text(json.dumps({"epochs": 5, "processes": 2}))
    assert stopped_state(out).endswith("--resume, under torchrun on 2 processes as before")
    (out / "config.json").write_text(json.dumps({"epochs": 2}))
    assert stopped_state(out) == f"after its last epoch: {out} is complete (epoch 1 kept)"


def test_train_stopped_by_sigint_before_an_epoch_finished(tmp_path):
    """In process: SIGINT once the run's settings are written, in the first of many long epochs."""
    out = tmp_path / "run"
    finished = threading.Event()

    def interrupt():
        while not (out / "config.json").exists() and not finished.is_set():
            time.sleep(0.01)
        if not finished.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    try:
        result = runner.invoke(app, ["train", "--data", "demo", "--out", str(out), *TINY, "--extractor", "attention",
                                     "--batch-size", "2", "--epochs", "50"])
    finally:
        finished.set()
        sender.join()
    assert result.exit_code == 130, result.output
    assert result.output.splitlines()[-1] == (
        f"stopped by SIGINT before any epoch finished, so no model was saved (only the run's settings are in "
        f"{out}); run the same command again to start over")
    assert not (tmp_path / ".run.lock").exists() and not (out / "model.safetensors").exists()


@pytest.mark.slow
def test_train_stopped_by_sigterm_keeps_its_last_epoch_and_goes_on_with_resume(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "rationale_cli", "train", "--data", "demo", "--out", str(out), *TINY,
               "--extractor", "attention", "--batch-size", "20", "--epochs", "500"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not (out / "metrics.json").exists() and time.time() < deadline:  # the first epoch is done
            time.sleep(0.05)
        assert process.poll() is None and (out / "metrics.json").exists()
        sent = time.time()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert time.time() - sent < 10
    assert process.returncode == 143, err
    assert "Traceback" not in err and len([line for line in err.splitlines() if "stopped by" in line]) == 1
    line = err.strip().splitlines()[-1]
    done = len(json.loads((out / "metrics.json").read_text())["history"])
    assert line.startswith(f"stopped by SIGTERM after epoch {done} of 500: {out} keeps epoch "), line
    assert line.endswith(f"to go on: rationale train --out {out} --resume"), line
    assert not (tmp_path / ".run.lock").exists() and not list(out.glob(".*.tmp"))
    assert (out / "model.safetensors").is_file() and (out / RESUME).is_file()
    result = runner.invoke(app, ["train", "--out", str(out), "--resume", "--epochs", str(done + 1)])
    assert result.exit_code == 0, result.output
    assert f"resuming after epoch {done}" in result.output


def test_the_chance_level_of_trains_table_is_the_one_its_warning_names(tmp_path):
    """Training mean 0.5, validation all 0.9: chance is (0.9 - 0.5)^2 = 0.16 in the table and in
    metrics.json, not the validation labels' own variance (0)."""
    train, valid = tmp_path / "train.jsonl", tmp_path / "valid.jsonl"
    train.write_text("".join(json.dumps({"text": f"{word} beer", "score": score}) + "\n"
                             for _ in range(20) for word, score in (("good", 0.9), ("bad", 0.1))))
    valid.write_text(json.dumps({"text": "good beer", "score": 0.9}) + "\n")
    out = tmp_path / "run"
    result = runner.invoke(app, ["train", "--data", str(train), "--valid", str(valid), "--out", str(out), *TINY,
                                 "--extractor", "attention", "--epochs", "1", "--no-reference"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("│ mse "))
    assert row.split("│")[3].strip() == "0.16000", result.output
    saved = json.loads((out / "metrics.json").read_text())
    assert math.isclose(saved["valid"]["mse_of_mean"], 0.16, rel_tol=1e-5)


@pytest.mark.parametrize("budget, expected", [("1000000", "--budget k=1000000: 1,000,000 tokens, at least the "
                                                           "longest training document's 2: every token is selected"),
                                              ("1.0", "--budget 1: a share of 1: every token is selected"),
                                              ("0.5", None)])
def test_a_budget_that_holds_every_token_is_warned_before_training(budget, expected):
    from rationale_cli.training.endings import budget_warning

    config = from_values({"data": "demo", "extractor": "topk", "budget": budget})
    found = budget_warning(config, records([0.1, 0.9]))
    assert found is None if expected is None else expected in found, found
