"""Bad input and bad luck: every case is one error line on exit status 2, no traceback,
and no file created or changed (or, where the command can go on, the documented outcome)."""

import json
import os
import shutil
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
        "--no-reference", "--batch-size", "100", "--epochs", "1"]
runner = CliRunner()


def invoke(*args, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def failed(result, *expected: str) -> None:
    """Exit status 2 after what was printed before, ending in one error line, no traceback."""
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("error: ") and all(text in last for text in expected), result.output


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
    (lambda run, tmp: ["merge", EXAMPLES / "reviews.txt", "--out", tmp, "--force"], "is a folder"),
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
    train = ["train", "--data", "demo", "--out", str(out), *TINY[:-2]]
    first = subprocess.Popen([sys.executable, "-m", "rationale_cli", *train, "--epochs", "500"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (out / "config.json").exists() and time.time() < deadline:
            time.sleep(0.05)
        assert first.poll() is None and (out / "config.json").exists()
        second = invoke(*train, "--epochs", "1", "--force")  # this process: another than the first
        assert second.exit_code == 2, second.output
        assert f"another training is writing this run (process {first.pid} on" in second.output
        assert len(second.output.strip().splitlines()) == 1
    finally:
        first.kill()
        first.wait()
    third = invoke(*train, "--epochs", "1", "--force")
    assert third.exit_code == 0, third.output
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


# --------------------------------------------------------------------------- #
# one output rule for every command: inputs and a run's files never, other files with --force


@pytest.mark.parametrize("make_args", [
    lambda run, tmp: ["evaluate", run, "demo", "--json", run / "model.safetensors", "--force"],
    lambda run, tmp: ["evaluate", run, "demo", "--per-document", run / "metrics.json", "--force"],
    lambda run, tmp: ["score", tmp / "p.jsonl", "demo", "--json", run / "config.json", "--force"],
    lambda run, tmp: ["explain", run, "a fine beer", "--html", run / "vocab.json", "--force"],
    lambda run, tmp: ["report", run, "--out", run / "task.json", "--force"],
    lambda run, tmp: ["predict", run, EXAMPLES / "reviews.txt", "--out", run / "versions.json", "--force"],
])
def test_no_output_goes_over_a_run_file_even_with_force(run_dir, tmp_path, make_args):
    before = snapshot(run_dir)
    refused(invoke(*make_args(run_dir, tmp_path)), "is a file of the run directory", str(run_dir))
    assert snapshot(run_dir) == before
    assert invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", tmp_path / "ok.jsonl").exit_code == 0


@pytest.mark.parametrize("make_args", [
    lambda run, mine: ["evaluate", run, "demo", "--json", mine],
    lambda run, mine: ["evaluate", run, "demo", "--per-document", mine],
    lambda run, mine: ["score", mine.parent / "p.jsonl", "demo", "--per-document", mine],
    lambda run, mine: ["explain", run, "a fine beer", "--html", mine],
    lambda run, mine: ["report", run, "--out", mine],
])
def test_a_users_file_is_replaced_only_with_force(run_dir, tmp_path, make_args):
    mine = tmp_path / "mine.txt"
    mine.write_text("the user's\n")
    refused(invoke(*make_args(run_dir, mine)), f"{mine}: already exists", "--force")
    assert mine.read_text() == "the user's\n"


def test_evaluate_with_force_replaces_a_users_file_atomically(run_dir, tmp_path):
    mine = tmp_path / "m.json"
    mine.write_text("the user's\n")
    result = invoke("evaluate", run_dir, "demo", "--json", mine, "--no-faithfulness", "--force")
    assert result.exit_code == 0, result.output
    assert json.loads(mine.read_text())["documents"] == 300 and list(tmp_path.iterdir()) == [mine]


def test_no_output_goes_over_an_input_even_with_force(run_dir, tmp_path):
    data = tmp_path / "docs.jsonl"
    data.write_text(json.dumps({"text": "a thick white head", "score": 0.7, "rationale": [[0, 2]]}) + "\n")
    eraser = tmp_path / "eraser"
    (eraser / "docs").mkdir(parents=True)
    (eraser / "test.jsonl").write_text("{}\n")
    kept = {path: path.read_bytes() for path in (data, eraser / "test.jsonl")}
    for args, expected in (
            (["evaluate", run_dir, data, "--per-document", data], "is one of the command's inputs"),
            (["score", data, "demo", "--json", data], "is one of the command's inputs"),
            (["explain", run_dir, "--input", data, "--html", data], "is one of the command's inputs"),
            (["evaluate", run_dir, eraser, "--json", eraser / "test.jsonl"], f"is in the input folder {eraser}"),
            (["merge", data, "--out", data], "is one of the command's inputs")):
        refused(invoke(*args, "--force"), expected)
    assert {path: path.read_bytes() for path in kept} == kept
    refused(invoke("evaluate", run_dir, "demo", "--json", tmp_path / "x.json", "--per-document", tmp_path / "x.json"),
            "both name")


def test_a_second_predict_into_an_output_being_written_is_refused_naming_the_first(run_dir, tmp_path):
    """Another process holds the output's lock (as a first predict does while it writes): the
    second predict gets one line naming it, and neither the output nor the first's partial
    output and state are touched; once the first is gone, the same command goes ahead."""
    out = tmp_path / "p.jsonl"
    out.write_text("the first's\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from rationale_cli.runtime.outputs import "
         "output_lock\nwith output_lock(Path(sys.argv[1]).resolve()):\n print('held', flush=True); sys.stdin.read()",
         str(out)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        partial = tmp_path / ".p.jsonl.partial"
        partial.write_text("half\n")
        result = invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", out, "--force")
        refused(result, str(out), f"another process is writing this output (process {holder.pid} on")
        assert out.read_text() == "the first's\n" and partial.read_text() == "half\n"
    finally:
        holder.communicate("", timeout=30)
    result = invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", out, "--force")
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 2 and not (tmp_path / ".p.jsonl.lock").exists()


# --------------------------------------------------------------------------- #
# the file system refusing a write: one line naming the file, nothing half-written


def disk_full(kind: str):
    """The error a full disk gives: Python's own, or the one safetensors' native writer raises."""
    import errno

    from safetensors import SafetensorError

    if kind == "oserror":
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


@pytest.mark.parametrize("kind", ["oserror", "safetensors"])
def test_a_write_the_file_system_refuses_is_one_line_naming_the_file(tmp_path, kind):
    from rationale_cli.runtime.atomic import atomic_path
    from rationale_cli.runtime.errors import UserError

    target = tmp_path / "model.safetensors"
    target.write_text("earlier")
    with pytest.raises(UserError, match=f"^{target}: cannot write it \\(No space left on device\\)$"):
        with atomic_path(target):
            raise disk_full(kind)
    assert target.read_text() == "earlier" and list(tmp_path.iterdir()) == [target]
    with pytest.raises(ValueError):  # any other error is not the file system's: raised as it is
        with atomic_path(target):
            raise ValueError("a bug")


def test_a_full_disk_in_train_is_one_line_and_leaves_a_run_to_resume(tmp_path, monkeypatch):
    """The disk fills while the second epoch's resume state is written: one line naming the
    file; the run is incomplete (its metrics.json, written last, is gone), so predict and
    evaluate refuse it with a line saying how to resume it, and `train --resume` completes it."""
    from safetensors.torch import save_file

    from rationale_cli.training import checkpoint

    calls = []

    def fills_up(tensors, path, metadata=None):
        calls.append(path)
        if len(calls) == 2:
            raise disk_full("oserror")
        save_file(tensors, path, metadata=metadata)

    monkeypatch.setattr(checkpoint, "save_file", fills_up)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"text": f"{word} beer {i}", "score": score}) + "\n"
                            for i in range(20) for word, score in (("good", 0.9), ("bad", 0.1))))
    out = tmp_path / "run"
    train = ["train", "--data", data, "--out", out, *TINY[:-2], "--epochs", "2"]
    failed(invoke(*train), str(out / "resume.safetensors"), "cannot write it (No space left on device)")
    assert (out / "model.safetensors").is_file() and not (out / "metrics.json").exists()
    assert not list(out.glob(".*.tmp")) and not (tmp_path / ".run.lock").exists()
    for args in (["predict", out, EXAMPLES / "reviews.txt", "--out", tmp_path / "p.jsonl"], ["evaluate", out, "demo"]):
        refused(invoke(*args), f"{out}: incomplete run", f"rationale train --out {out} --resume", "remove it")
    refused(invoke(*train), "stopped while writing its files", "--resume")
    monkeypatch.undo()
    result = invoke("train", "--out", out, "--resume")
    assert result.exit_code == 0, result.output
    assert len(json.loads((out / "metrics.json").read_text())["history"]) == 2
    assert invoke("predict", out, EXAMPLES / "reviews.txt", "--out", tmp_path / "p.jsonl").exit_code == 0


def test_a_full_disk_in_predict_is_one_line_and_keeps_the_earlier_output(run_dir, tmp_path, monkeypatch):
    from rationale_cli.output import writers

    def full(self):
        raise disk_full("oserror")

    monkeypatch.setattr(writers.TextWriter, "flush", full)
    out = tmp_path / "p.jsonl"
    out.write_text("earlier\n")
    refused(invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", out, "--force"),
            f"{out}: cannot write it (No space left on device)")
    assert out.read_text() == "earlier\n" and list(tmp_path.iterdir()) == [out]


def test_a_full_disk_writing_metrics_is_one_line(run_dir, tmp_path, monkeypatch):
    from rationale_cli.runtime import atomic

    def full(path):
        raise disk_full("oserror")

    monkeypatch.setattr(atomic, "_fsync", full)
    out = tmp_path / "m.json"
    failed(invoke("evaluate", run_dir, "demo", "--no-faithfulness", "--json", out),
           f"{out}: cannot write it (No space left on device)")
    assert list(tmp_path.iterdir()) == []


def test_an_output_in_a_loop_of_symbolic_links_is_one_line(run_dir, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    refused(invoke("train", "--data", "demo", "--out", loop, *TINY), str(loop), "symbolic links")
    refused(invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", loop), str(loop), "symbolic links")


@pytest.mark.parametrize("size", [-5, 0, 10**9])
def test_a_saved_model_size_out_of_range_is_one_line_before_anything_is_built(run_dir, tmp_path, size):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "hidden_size": size}))
    refused(invoke("predict", copy, "demo", "--out", tmp_path / "p.jsonl"), "config.json", "--hidden-size")


def test_a_rating_outside_the_unit_interval_says_how_to_rescale_it(tmp_path):
    data = tmp_path / "stars.jsonl"
    data.write_text(json.dumps({"tokens": ["good", "beer"], "score": 4.5}) + "\n")
    refused(invoke("train", "--data", data, "--out", tmp_path / "run"), "got 4.5", "(stars - 1) / 4")


def test_whole_number_labels_are_classes_and_the_line_says_so(tmp_path):
    data = tmp_path / "stars.jsonl"
    data.write_text("".join(json.dumps({"tokens": [word, "beer"], "label": stars}) + "\n"
                            for word, stars in (("good", 5), ("bad", 1), ("fine", 3)) for _ in range(4)))
    result = invoke("train", "--data", data, "--valid", data, "--out", tmp_path / "run", *TINY)
    assert result.exit_code == 0, result.output
    assert "note: the labels are whole numbers, read as 3 classes (1, 3, 5)" in result.output


@pytest.mark.parametrize("damage", ["not gzip", "truncated"])
def test_a_damaged_gz_input_to_predict_is_one_line_and_writes_nothing(run_dir, tmp_path, damage):
    import gzip

    whole = gzip.compress(b'{"text": "a fine beer"}\n' * 200)
    source = tmp_path / "in.jsonl.gz"
    source.write_bytes(b"plain text, not gzip\n" if damage == "not gzip" else whole[: len(whole) // 2])
    out = tmp_path / "p.jsonl"
    failed(invoke("predict", run_dir, source, "--out", out), str(source), "cannot read")
    assert not out.exists()


def test_escape_sequences_and_bidi_controls_from_files_never_reach_the_terminal(run_dir, tmp_path):
    """A CSV header and a file name holding ESC sequences (a window title, colours) and U+202E
    are quoted in the error line as U+FFFD, which stays one line."""
    table = tmp_path / "reviews.csv"
    table.write_text("te\x1b]0;owned\x07xt\u202eabc,score\nfine,0.5\n", encoding="utf-8")
    result = invoke("train", "--data", table, "--out", tmp_path / "run")
    refused(result, "no column 'text'", "te\ufffd]0;owned\ufffdxt\ufffdabc")
    named = tmp_path / "a\x1b[31m\u202ename\nx.jsonl"
    result = invoke("predict", run_dir, named, "--out", tmp_path / "p.jsonl")
    refused(result, "a\ufffd[31m\ufffdname\ufffdx.jsonl: no such file")
    assert not any(char in result.output for char in "\x1b\x07\u202e")


@pytest.mark.parametrize("vectors", [False, True])
def test_resume_takes_the_original_command_and_refuses_only_what_it_changes(tmp_path, monkeypatch, vectors):
    """The original command with --resume added goes on, word vectors' file (a path option) and all."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"text": f"{word} beer {i}", "score": score}) + "\n"
                            for i in range(20) for word, score in (("good", 0.9), ("bad", 0.1))))
    (tmp_path / "vectors.txt").write_text("good 0.5 0.1 0.2 0.3 0.1 0.1 0.1 0.1\nbad -0.5 0.1 0.2 0.3 0.1 0.1 0.1 0.1\n")
    out = tmp_path / "run"
    command = ["train", "--data", data, "--out", out, *TINY, "--budget", "0.3", "--lr", "0.002",
               *(["--embeddings", "vectors.txt"] if vectors else [])]
    assert invoke(*command).exit_code == 0
    refused(invoke(*command, "--resume"), f"{out}: already trained for 1 epoch; give --epochs more than 1")
    refused(invoke(*command, "--lr", "0.003", "--epochs", "2", "--resume"),
            "--resume goes on with the run's own options; it cannot change --lr")
    result = invoke(*command, "--epochs", "2", "--resume")
    assert result.exit_code == 0, result.output
    assert len(json.loads((out / "metrics.json").read_text())["history"]) == 2



def test_predict_refuses_an_id_seen_before_naming_both_lines(run_dir, tmp_path):
    data = tmp_path / "dup.jsonl"
    data.write_text("".join(json.dumps({"id": name, "text": "a fine beer"}) + "\n" for name in ("a", "b", "a")))
    out = tmp_path / "p.jsonl"
    refused(invoke("predict", run_dir, data, "--out", out), f"{data}:3: id 'a' again (first at {data}:1)")
    assert not out.exists()
