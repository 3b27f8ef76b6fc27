"""Bad input and bad luck: every case is one error line on exit status 2, no traceback,
and no file created or changed (or, where the command can go on, the documented outcome)."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rationale_cli.cli import app

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TINY = ["--encoder", "cnn", "--extractor", "attention", "--embedding-dim", "8", "--hidden-size", "8",
        "--batch-size", "100", "--epochs", "1"]
runner = CliRunner()


def invoke(*args, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(result, *expected: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for text in expected:
        assert text in lines[0], result.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    result = invoke("train", "--data", "demo", "--out", out, *TINY)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cls")
    data = folder / "train.jsonl"
    data.write_text("".join(json.dumps({"text": f"{word} beer {i}", "label": label}) + "\n"
                            for i in range(20) for word, label in (("good", "POS"), ("bad", "NEG"))))
    out = folder / "run"
    result = invoke("train", "--data", data, "--out", out, *TINY)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("make_args, expected", [
    (lambda run, tmp: ["predict", run, EXAMPLES / "reviews.txt", "--out", tmp / "nodir" / "p.jsonl"], "no such folder"),
    (lambda run, tmp: ["predict", run, EXAMPLES / "reviews.txt", "--out", tmp], "is a folder"),
    (lambda run, tmp: ["explain", run, "a fine beer", "--html", tmp / "nodir" / "p.html"], "no such folder"),
    (lambda run, tmp: ["evaluate", run, "demo", "--json", tmp / "nodir" / "m.json"], "no such folder"),
    (lambda run, tmp: ["evaluate", run, "demo", "--json", tmp], "is a folder"),
    (lambda run, tmp: ["train", "--data", "demo", "--out", tmp / "afile" / "run", *TINY], "cannot create"),
    (lambda run, tmp: ["train", "--data", "demo", "--out", tmp / "afile", *TINY], "is a file"),
    (lambda run, tmp: ["predict", run, EXAMPLES / "reviews.txt", "--out", "OUT", "--batch-size", "0"], "--batch-size 0"),
    (lambda run, tmp: ["evaluate", run, "demo", "--batch-size", "-3"], "--batch-size -3"),
    (lambda run, tmp: ["explain", run, "--input", "demo", "--limit", "-1"], "--limit -1"),
    (lambda run, tmp: ["train", "--data", "demo", "--out", tmp / "r", "--valid-fraction", "1.0"], "--valid-fraction 1"),
    (lambda run, tmp: ["train", "--data", "demo", "--out", tmp / "r", "--hidden-size", "0"], "--hidden-size 0"),
    (lambda run, tmp: ["train", "--data", "demo", "--out", tmp / "r", "--extractor", "bernoulli", "--samples", "0"],
     "--samples 0"),
    (lambda run, tmp: ["train", "--data", "demo", "--out", tmp / "r", "--extractor", "topk-sparsemax",
                       "--top-masks", "0"], "--top-masks 0"),
    (lambda run, tmp: ["explain", run], "nothing to explain"),
])
def test_unwritable_outputs_and_out_of_range_options(run_dir, tmp_path, make_args, expected):
    (tmp_path / "afile").write_text("keep")
    before = snapshot(tmp_path)
    refused(invoke(*make_args(run_dir, tmp_path)), expected)
    assert snapshot(tmp_path) == before


def test_labels_of_the_wrong_kind_are_named_with_file_and_line(run_dir, classifier, tmp_path):
    labels = tmp_path / "l.jsonl"
    labels.write_text('{"text": "nice beer", "label": "POS"}\n')
    refused(invoke("predict", run_dir, labels, "--out", tmp_path / "p.jsonl"), f"{labels}:1", "class name")
    refused(invoke("evaluate", run_dir, labels), f"{labels}:1")
    scores = tmp_path / "s.jsonl"
    scores.write_text('{"text": "nice beer", "score": 0.4}\n{"text": "bad beer", "label": "MEH"}\n')
    refused(invoke("evaluate", classifier, scores), f"{scores}:1", "score 0.4")
    unknown = tmp_path / "u.jsonl"
    unknown.write_text('{"text": "nice beer", "label": "POS"}\n{"text": "bad beer", "label": "MEH"}\n')
    refused(invoke("evaluate", classifier, unknown), f"{unknown}:2", "unknown label 'MEH'")
    assert not (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize("name, content, expected", [
    ("config.json", b"\xff\xfe not utf-8", "not UTF-8"),
    ("config.json", b"[1, 2]", "expected a JSON object, found list"),
    ("versions.json", b"[]", "expected a JSON object, found list"),
    ("task.json", b'{"task": "classification"}', "needs its labels"),
])
def test_corrupt_run_files_are_named(run_dir, tmp_path, name, content, expected):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / name).write_bytes(content)
    refused(invoke("predict", run, EXAMPLES / "reviews.txt", "--out", tmp_path / "p.jsonl"), name, expected)
    assert not (tmp_path / "p.jsonl").exists()


def test_non_finite_vectors_are_refused(tmp_path):
    vectors = tmp_path / "v.txt"
    vectors.write_text("the 0.1 0.2\nhead nan 0.3\n")
    refused(invoke("train", "--data", "demo", "--out", tmp_path / "r", "--embeddings", vectors, *TINY),
            f"{vectors}:2", "non-finite")
    assert not (tmp_path / "r").exists()


def test_training_that_diverges_stops_with_one_line_and_no_nan_anywhere(tmp_path):
    out = tmp_path / "r"
    result = invoke("train", "--data", "demo", "--out", out, "--extractor", "simple", "--encoder", "cnn",
                    "--lr", "10000", *TINY[4:])
    assert result.exit_code == 2, result.output
    assert "diverged at epoch 1, step" in result.output and "Traceback" not in result.output
    assert not (out / "model.safetensors").exists()
    for path in out.glob("*.json"):
        assert "NaN" not in path.read_text(), path


def test_json_output_never_holds_nan(tmp_path):
    from rationale_cli.runs.run_directory import write_json
    from rationale_cli.runtime.safe_json import to_json_line

    line = to_json_line({"prediction": float("nan"), "token_scores": [0.5, float("inf")]})
    assert json.loads(line) == {"prediction": None, "token_scores": [0.5, None]}
    write_json(tmp_path / "m.json", {"loss": float("nan")})
    assert json.loads((tmp_path / "m.json").read_text()) == {"loss": None}


def test_file_names_are_printed_as_they_are(run_dir, tmp_path):
    folder = tmp_path / "[bold red]x["  # the path holds "[/", a closing tag for rich
    folder.mkdir()
    out = folder / "[bold]p.jsonl"
    result = invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", out)
    assert result.exit_code == 0, result.output
    assert str(out) in result.output and out.is_file()


def test_predict_never_overwrites_its_input_and_needs_force_for_other_files(run_dir, tmp_path):
    data = tmp_path / "in.txt"
    data.write_text("a fine beer\n")
    refused(invoke("predict", run_dir, data, "--out", data, "--force"), "is one of the command's inputs")
    assert data.read_text() == "a fine beer\n"
    out = tmp_path / "p.jsonl"
    out.write_text("keep me\n")
    refused(invoke("predict", run_dir, data, "--out", out), "already exists", "--force")
    assert out.read_text() == "keep me\n"
    assert invoke("predict", run_dir, data, "--out", out, "--force").exit_code == 0
    assert json.loads(out.read_text())["id"] == "1"


def test_eraser_document_ids_stay_inside_docs(run_dir, tmp_path):
    folder = tmp_path / "eraser"
    (folder / "docs").mkdir(parents=True)
    (tmp_path / "secret").write_text("do not read me\n")
    annotation = {"annotation_id": "a1", "classification": "POS",
                  "evidences": [[{"docid": "../../secret", "start_token": 0, "end_token": 1, "text": "do"}]]}
    for split in ("train", "val", "test"):
        (folder / f"{split}.jsonl").write_text(json.dumps(annotation) + "\n")
    refused(invoke("evaluate", run_dir, folder), "../../secret", "inside docs/")


def test_writes_follow_symbolic_links_and_go_through_pipes(run_dir, tmp_path):
    target = tmp_path / "target.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", link, "--force").exit_code == 0
    assert link.is_symlink() and json.loads(target.read_text().splitlines()[0])["id"] == "1"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    result = invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", fifo)
    reader.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert fifo.exists() and not fifo.is_file() and len(received[0].splitlines()) == 2


def test_dash_reads_standard_input_and_writes_standard_output(run_dir):
    done = subprocess.run([sys.executable, "-m", "rationale_cli", "predict", str(run_dir), "-", "--out", "-"],
                          input='{"text": "a thick white head", "score": 0.7}\n', capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert line["label"] == 0.7 and line["selected_tokens"]
    done = subprocess.run([sys.executable, "-m", "rationale_cli", "evaluate", str(run_dir), "demo", "--json", "-"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["documents"] == 300, done.stderr


def test_two_trainings_into_one_run_directory(tmp_path):
    """While one training writes a run, a second into the same --out is refused; once the
    first is killed (SIGKILL: nothing cleans up), its lock is gone with it and a new
    training goes ahead."""
    out = tmp_path / "run"
    command = [sys.executable, "-m", "rationale_cli", "train", "--data", "demo", "--out", str(out), *TINY[:-2]]
    first = subprocess.Popen(command + ["--epochs", "500"], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (out / "config.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        assert first.poll() is None and (out / "config.json").exists()
        second = subprocess.run(command + ["--epochs", "1", "--force"], cwd=ROOT, capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 2, second.stderr
        assert f"another training is writing this run (process {first.pid} on" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.kill()
        first.wait()
    third = subprocess.run(command + ["--epochs", "1", "--force"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert third.returncode == 0, third.stderr
    assert not (tmp_path / ".run.lock").exists()
    assert invoke("predict", out, EXAMPLES / "reviews.txt", "--out", tmp_path / "p.jsonl").exit_code == 0


def test_the_lock_is_one_per_run_whatever_the_path_names_it(tmp_path):
    from rationale_cli.runtime.errors import UserError
    from rationale_cli.runtime.lock import run_lock

    (tmp_path / "run").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "run")
    with run_lock(tmp_path / "run"):
        with pytest.raises(UserError, match="another training is writing this run"):
            with run_lock(tmp_path / "alias"):
                pass
    with run_lock(tmp_path / "alias"):
        pass
    assert not list(tmp_path.glob(".*.lock"))


def test_a_csv_row_with_extra_fields_is_refused_not_shifted(tmp_path):
    from rationale_cli.data.readers import read_records
    from rationale_cli.runtime.errors import UserError

    table = tmp_path / "t.csv"
    table.write_text('id,text,label\n1,"a thick, white head",0.8,murky\n2,clear gold,0.9\n')
    with pytest.raises(UserError, match="more fields than the header"):
        read_records(table)


def test_labels_are_checked_before_the_run_directory_is_written(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"text": f"{w} beer", "label": w}) + "\n" for w in ("good", "bad") * 5))
    valid = tmp_path / "valid.jsonl"
    valid.write_text(json.dumps({"text": "meh beer", "label": "meh"}) + "\n")
    refused(invoke("train", "--data", train, "--valid", valid, "--out", tmp_path / "r", *TINY),
            f"{valid}:1", "unknown label 'meh'")
    assert not (tmp_path / "r").exists()


def test_numeric_labels_train_a_classifier_when_asked(tmp_path):
    data = tmp_path / "scores.jsonl"
    data.write_text("".join(json.dumps({"text": f"{w} beer", "score": s}) + "\n"
                            for w, s in (("good", 0.8), ("bad", 0.2)) * 5))
    result = invoke("train", "--data", data, "--out", tmp_path / "r", "--task", "classification", *TINY)
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r" / "task.json").read_text())["labels"] == ["0.2", "0.8"]


def test_a_forced_run_that_diverges_keeps_nothing_of_the_run_it_replaced(run_dir, tmp_path):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    result = invoke("train", "--data", "demo", "--out", out, "--force", "--extractor", "simple", "--encoder", "cnn",
                    "--lr", "10000", *TINY[4:])
    assert result.exit_code == 2 and "diverged" in result.output
    assert not (out / "model.safetensors").exists() and not (out / "resume.safetensors").exists()
    refused(invoke("predict", out, EXAMPLES / "reviews.txt", "--out", tmp_path / "p.jsonl"), "missing model.safetensors")


def test_a_score_that_is_not_a_number_is_named_with_its_line(tmp_path):
    predictions = tmp_path / "p.jsonl"
    predictions.write_text('{"id": "0", "prediction": 0.5, "rationale": [[0, 1]]}\n'
                           '{"id": "1", "prediction": NaN, "rationale": [[0, 1]]}\n')
    refused(invoke("score", predictions, "demo"), f"{predictions}:2", "'prediction' is nan")


def test_a_run_file_gone_while_reading_is_one_line(run_dir, tmp_path):
    from rationale_cli.runs.run_directory import read_json
    from rationale_cli.runtime.errors import UserError

    with pytest.raises(UserError, match="no such file .was the run directory moved or deleted"):
        read_json(tmp_path / "gone" / "config.json")
    with pytest.raises(UserError, match="cannot read it"):
        read_json(tmp_path)  # a folder, not a file


@pytest.mark.parametrize("lr", ["1e38", "1e300"])
def test_a_learning_rate_too_large_for_float32_is_refused_before_the_run_directory(tmp_path, lr):
    before = snapshot(tmp_path)
    refused(invoke("train", "--data", "demo", "--out", tmp_path / "r", "--lr", lr, *TINY), f"--lr {float(lr):g}")
    assert snapshot(tmp_path) == before and not (tmp_path / "r").exists()


def test_predict_into_a_folder_where_files_cannot_be_created_names_out(run_dir, tmp_path):
    refused(invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", "/proc/x.jsonl"),
            "/proc/x.jsonl", "cannot write")
    assert not Path("/proc/.x.jsonl.partial").exists()


@pytest.mark.parametrize("make_args", [
    lambda run: ["evaluate", run, "demo", "--json", "/proc/x.json"],
    lambda run: ["evaluate", run, "demo", "--per-document", "/proc/x.jsonl"],
    lambda run: ["explain", run, "a fine beer", "--html", "/proc/x.html"],
])
def test_unwritable_evaluate_and_explain_outputs_are_refused_before_any_work(run_dir, monkeypatch, make_args):
    import importlib

    evaluate_command = importlib.import_module("rationale_cli.cli.evaluate")  # the modules, not the commands
    explain_command = importlib.import_module("rationale_cli.cli.explain")

    def no_work(*args, **kwargs):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(evaluate_command, "load_for_inference", no_work)
    monkeypatch.setattr(explain_command, "load_for_inference", no_work)
    refused(invoke(*make_args(run_dir)), "/proc/x.", "cannot write")


@pytest.mark.parametrize("bad", [["--data", "missing.jsonl"], ["--data", "demo", "--embeddings", "missing.txt"]])
def test_a_missing_input_file_creates_no_folder_for_the_run(tmp_path, monkeypatch, bad):
    monkeypatch.chdir(tmp_path)
    refused(invoke("train", *bad, "--out", Path("runs") / "new" / "x", *TINY), "missing.")
    assert list(tmp_path.iterdir()) == []


def test_predict_stopped_by_a_signal_does_not_say_it_wrote_the_output(run_dir, tmp_path, monkeypatch):
    import signal

    from rationale_cli.annotation import engine

    counted = engine.Tally.add

    def add_then_signal(tally, outputs):  # SIGTERM while the first window is being written
        counted(tally, outputs)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(engine.Tally, "add", add_then_signal)
    out = tmp_path / "p.jsonl"
    result = invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", out, "--window", "1")
    assert result.exit_code == 128 + signal.SIGTERM, result.output
    assert not out.exists() and len(engine.partial_path(out).read_text().splitlines()) == 1  # that window whole
    assert json.loads(engine.state_path(out).read_text())["windows"] == 1
    lines = result.output.strip().splitlines()
    assert "wrote" not in result.output and f"predictions to {out}" not in result.output, result.output
    assert lines[0].startswith("stopped by SIGTERM") and "run the same command again to continue" in lines[0], lines
