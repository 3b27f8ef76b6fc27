"""Where a run's data is found again (from another working directory, or moved together with
the run), what `evaluate` records of what it scored, progress lines off a terminal, and the
demo's temporary run directory."""

import importlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from rationale_cli.cli import _util, app
from rationale_cli.evaluation.scoring import evaluated_on
from rationale_cli.runs.config import FROM_RUN, TrainConfig, located
from rationale_cli.runtime.errors import UserError

demo = importlib.import_module("rationale_cli.cli.demo")  # the module, not the command of that name
TINY = ["--no-reference", "--epochs", "1", "--encoder", "cnn", "--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "100"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A project folder holding ``data/reviews.jsonl`` and ``runs/r``, trained from inside it
    with the relative path ``data/reviews.jsonl``."""
    project = tmp_path_factory.mktemp("paths") / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "reviews.jsonl").write_text("".join(
        json.dumps({"text": f"{word} beer {i}", "score": score, "rationale": [[0, 1]]}) + "\n"
        for i in range(20) for word, score in (("good", 0.9), ("bad", 0.1))))
    here = os.getcwd()
    os.chdir(project)
    try:
        result = invoke("train", "--data", "data/reviews.jsonl", "--out", "runs/r", *TINY)
    finally:
        os.chdir(here)
    assert result.exit_code == 0, result.output
    return project


@pytest.fixture
def project(trained, tmp_path, monkeypatch):
    """A copy of the trained project, and a working directory that is not its own."""
    copy = tmp_path / "project"
    shutil.copytree(trained, copy)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return copy


def test_the_run_records_its_data_absolute_and_from_the_run_directory(trained):
    saved = json.loads((trained / "runs" / "r" / "config.json").read_text())
    assert saved["data"] == str(trained / "data" / "reviews.jsonl")
    assert saved[FROM_RUN] == {"data": os.path.join("..", "..", "data", "reviews.jsonl")}


def test_report_finds_the_data_from_another_working_directory(trained, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("report", trained / "runs" / "r", "--out", "r.html")
    assert result.exit_code == 0, result.output
    assert f"{trained / 'data' / 'reviews.jsonl'} (validation documents)" in (tmp_path / "r.html").read_text()


def test_a_run_moved_with_its_data_finds_it_from_the_run_directory(project, tmp_path):
    config = project / "runs" / "r" / "config.json"
    saved = json.loads(config.read_text())
    config.write_text(json.dumps({**saved, "data": str(tmp_path / "gone" / "data" / "reviews.jsonl")}))
    moved = tmp_path / "moved"
    project.rename(moved)
    result = invoke("report", moved / "runs" / "r", "--out", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    assert f"{moved / 'data' / 'reviews.jsonl'} (validation documents)" in (tmp_path / "r.html").read_text()


def test_a_run_saved_with_a_relative_path_reads_it_from_the_working_directory(project, monkeypatch):
    config = project / "runs" / "r" / "config.json"
    saved = json.loads(config.read_text())
    saved.pop(FROM_RUN, None)
    config.write_text(json.dumps({**saved, "data": "data/reviews.jsonl"}))
    assert located(json.loads(config.read_text()), config.parent)["data"] == "data/reviews.jsonl"
    assert invoke("report", project / "runs" / "r", "--out", "a.html").exit_code == 2  # not from here, as before
    monkeypatch.chdir(project)
    result = invoke("report", "runs/r", "--out", "b.html")
    assert result.exit_code == 0, result.output


def test_paths_are_saved_absolute_and_built_in_names_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert TrainConfig(data="demo").to_dict()["data"] == "demo"
    saved = TrainConfig(data="train.jsonl", valid="../valid.jsonl").to_dict()
    assert saved["data"] == str(tmp_path / "train.jsonl") and saved["valid"] == str(tmp_path.parent / "valid.jsonl")
    assert saved["embeddings"] is None and TrainConfig().to_dict()["data"] == ""
    # a saved path that still exists wins over the one from the run directory
    (tmp_path / "train.jsonl").touch()
    assert located({"data": str(tmp_path / "train.jsonl"), FROM_RUN: {"data": "x"}}, tmp_path)["data"] == \
        str(tmp_path / "train.jsonl")


def test_evaluate_records_the_run_data_split_and_aspect(project, tmp_path):
    run, data = project / "runs" / "r", project / "data" / "reviews.jsonl"
    result = invoke("evaluate", run, data, "--json", tmp_path / "file.json", "--no-faithfulness")
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "file.json").read_text())
    assert {k: metrics[k] for k in ("run", "data", "split", "aspect")} == \
        {"run": str(run), "data": str(data), "split": None, "aspect": None}
    assert "precision" in metrics and "eraser" in metrics
    result = invoke("evaluate", run, "demo", "--split", "val", "--aspect", 1, "--json", "-", "--no-faithfulness")
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert (metrics["data"], metrics["split"], metrics["aspect"]) == ("demo", "valid", 1)


def test_the_aspect_of_a_beer_file_is_its_name_s(tmp_path):
    beer = tmp_path / "reviews.aspect2.heldout.txt"
    beer.write_text("0.1 0.2 0.3 0.4 0.5\tgood beer\n")
    scored = evaluated_on(Path("run"), str(beer), TrainConfig(), split="test")
    assert scored["aspect"] == 2 and scored["split"] is None and scored["run"] == str(Path("run").absolute())
    assert evaluated_on(Path("run"), str(beer), TrainConfig(aspect=4))["aspect"] == 4


def test_evaluate_and_report_print_progress_lines_off_a_terminal(project, tmp_path, monkeypatch):
    monkeypatch.setattr(_util, "PLAIN_EVERY", 0.0)
    run = project / "runs" / "r"
    result = invoke("evaluate", run, project / "data" / "reviews.jsonl")
    assert result.exit_code == 0, result.output
    assert "decoding: 40 of 40 (100%) documents, " in result.stderr
    assert "faithfulness reruns: 40 of 40 (100%) documents, " in result.stderr and "s elapsed, " in result.stderr
    result = invoke("report", run, "--out", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    assert "decoding for r: 4 of 4 (100%) documents, " in result.stderr


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch):
    monkeypatch.setattr(_util, "PLAIN_EVERY", 0.0)
    for terminal in (True, False):
        text = io.StringIO()
        with _util.progress_reporter(Console(file=text, force_terminal=terminal), 3, doing="work") as advance:
            advance(3)
        assert ("work: 3 of 3 (100%) documents" in text.getvalue()) is not terminal


@pytest.fixture
def fake_demo(tmp_path, monkeypatch):
    """The demo's steps replaced by ones that write a file into the run directory, and the
    system's temporary folder inside ``tmp_path``."""
    import tempfile

    def train(out, **_):
        out.mkdir(exist_ok=True)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(demo, "train", train)
    monkeypatch.setattr(demo, "evaluate", lambda **_: None)
    monkeypatch.setattr(demo, "explain", lambda **_: None)
    return tmp_path


def test_the_demo_removes_its_temporary_run_and_says_so(fake_demo):
    result = invoke("demo")
    assert result.exit_code == 0, result.output
    assert "removed the demo's run directory " + str(fake_demo / "rationale-demo-") in result.output
    assert not list(fake_demo.glob("rationale-demo-*"))
    assert "removed at the end" in invoke("demo", "--help").output


def test_the_demo_removes_its_run_when_a_step_fails(fake_demo, monkeypatch):
    def fail(**_):
        raise UserError("no room")

    monkeypatch.setattr(demo, "evaluate", demo.friendly(fail))
    result = invoke("demo")
    assert result.exit_code == 2 and "no room" in result.output and "removed the demo's run" in result.output
    assert not list(fake_demo.glob("rationale-demo-*"))


def test_the_demo_keeps_the_run_given_with_out(fake_demo):
    result = invoke("demo", "--out", fake_demo / "kept")
    assert result.exit_code == 0, result.output
    assert (fake_demo / "kept" / "config.json").is_file() and "removed" not in result.output
