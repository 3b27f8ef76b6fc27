"""``rationale tune``: a study on the demo corpus (a small slice of it, so that trials take a
moment), one stopped and run again, two processes on one study, the rule that chooses the best
trial, the search spaces, and the errors a user can cause."""

import ast
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from typer.testing import CliRunner

import rationale_cli as rationale
from rationale_cli.cli import app
from rationale_cli.data.synthetic import demo_records
from rationale_cli.models.search import OneOf, Searched
from rationale_cli.models.selectors import SELECTORS
from rationale_cli.runs.keep import Keep
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.signals import Stopped
from rationale_cli.tuning import objective as objective_module
from rationale_cli.tuning.job import plan_study, tune
from rationale_cli.tuning.leaderboard import TrialResult, choose, ranked, read_leaderboard
from rationale_cli.tuning.space import search_space
from rationale_cli.tuning.storage import NEEDS_OPTUNA

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--encoder", "cnn", "--embedding-dim", "8", "--hidden-size", "8", "--epochs", "2", "--budget", "0.2"]
runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[str, str]:
    """The first 80 training and 40 validation documents of the demo corpus, as JSON lines."""
    folder = tmp_path_factory.mktemp("data")
    paths = []
    for split, size in (("train", 80), ("valid", 40)):
        path = folder / f"{split}.jsonl"
        path.write_text("".join(json.dumps({"id": r.id, "tokens": r.tokens, "score": r.label,
                                            "rationale": [list(span) for span in r.rationale]}) + "\n"
                                for r in demo_records(split)[:size]))
        paths.append(str(path))
    return paths[0], paths[1]


def tune_args(data, out, *more) -> list[str]:
    return ["tune", "--data", data[0], "--valid", data[1], "--extractor", "simple", "--out", str(out), *FAST,
            *map(str, more)]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_study_trains_a_run_per_trial_and_the_best_is_a_normal_run(data, tmp_path):
    out = tmp_path / "study"
    result = invoke(*tune_args(data, out, "--trials", 4))
    assert result.exit_code == 0, result.output
    for number in range(4):
        assert f"trial {number} complete" in result.output
    assert "(4 of 4 finished)" in result.output and "best so far: trial" in result.output
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["finished"] == 4 and len(board["trials"]) == 4 and board["target"] is None  # simple holds no rate
    assert board["best"]["loss"] == min(trial["loss"] for trial in board["trials"])
    for trial in board["trials"]:
        assert Path(trial["run"]) == (out / "trials" / f"{trial['number']:04d}").resolve()
        assert (Path(trial["run"]) / "model.safetensors").is_file()
        assert set(trial["params"]) == {"lr", "weight_decay", "dropout", "batch_size", "kl_weight"}  # sizes fixed
    study = optuna.load_study(study_name="study", storage=f"sqlite:///{out / 'study.db'}")
    attrs = study.trials[0].user_attrs
    assert {"run", "valid_loss", "valid_rate"} <= set(attrs) and 0 < attrs["valid_rate"] <= 1
    best = Path(board["best"]["run"])
    assert f"best: trial {board['best']['number']}" in result.stdout and str(best) in result.stdout
    assert invoke("evaluate", best, data[1], "--no-faithfulness").exit_code == 0
    assert rationale.load(best).predict(["the aroma was weak ."])[0].prediction is not None
    result = invoke("report", out, "--out", tmp_path / "report.html", "--examples", 0)
    assert result.exit_code == 0, result.output
    page = (tmp_path / "report.html").read_text()
    assert "<h2>Study study</h2>" in page and 'data-plot="study"' in page
    assert f"best, trial {board['best']['number']}" in page  # the best trial's run follows the study
    # the same study with other settings is refused, not mixed in
    result = invoke(*tune_args(data, out, "--trials", 5, "--epochs", 3))
    assert result.exit_code == 2 and "made with other settings (options: epochs was 2, now 3)" in result.output


def test_a_stopped_study_goes_on_when_the_same_command_runs_again(data, tmp_path, monkeypatch):
    out = tmp_path / "study"
    calls = []
    real = objective_module.train_config

    def stopped_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise Stopped(signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(objective_module, "train_config", stopped_second)
    result = invoke(*tune_args(data, out, "--trials", 3, "--epochs", 1))
    assert result.exit_code == 130, result.output
    assert "stopped by SIGINT (1 of 3 trials finished); run the same command again" in result.output
    before = read_leaderboard(out)
    assert [(t.number, t.state) for t in sorted(before.trials, key=lambda t: t.number)] == \
        [(0, "complete"), (1, "failed")]
    monkeypatch.setattr(objective_module, "train_config", real)
    result = invoke(*tune_args(data, out, "--trials", 3, "--epochs", 1))
    assert result.exit_code == 0, result.output
    assert "1 of 3 trials finished" in result.output  # where the study stood
    after = {t.number: t for t in read_leaderboard(out).trials}
    assert sorted(after) == [0, 1, 2, 3] and after[0] == next(t for t in before.trials if t.number == 0)
    assert [after[n].state for n in (1, 2, 3)] == ["failed", "complete", "complete"]


GATED = """
import os, pathlib, sys, time
import rationale_cli.tuning.objective as objective
gate = pathlib.Path(sys.argv[1])
real = objective.train_config
def gated(*args, **kwargs):  # no first trial trains before both processes are in one
    (gate / str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(list(gate.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    return real(*args, **kwargs)
objective.train_config = gated
from rationale_cli.cli import app
app(sys.argv[2:])
"""


def test_two_processes_share_one_sqlite_study(data, tmp_path, monkeypatch):
    """This process and another, each asked for 4 trials of one study; each waits to train its
    first trial until the other is in a trial too (so both take part, however long either takes
    to start), then runs trials until 4 have finished."""
    out, gate, script = tmp_path / "study", tmp_path / "gate", tmp_path / "gated.py"
    gate.mkdir()
    script.write_text(GATED)
    args = tune_args(data, out, "--trials", 4, "--epochs", 1)
    other = subprocess.Popen([sys.executable, str(script), str(gate), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=ROOT)
    real = objective_module.train_config

    def gated(*args, **kwargs):
        (gate / "this").touch()
        deadline = time.monotonic() + 60
        while len(list(gate.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(objective_module, "train_config", gated)
    result = invoke(*args)
    _, err = other.communicate(timeout=120)
    assert result.exit_code == 0 and other.returncode == 0, (result.output, err)
    ran = [{int(word) for word in _trial_numbers(text)} for text in (result.output, err)]
    assert all(ran) and not ran[0] & ran[1]  # each process ran trials of its own
    board = read_leaderboard(out)
    assert {t.number for t in board.trials} == ran[0] | ran[1] and len(board.trials) >= 4
    assert all(t.state in ("complete", "pruned") for t in board.trials)


def _trial_numbers(stderr: str) -> list[str]:
    """The trials a process reports finished (a fifth may be pruned: the median rule judges from the fourth)."""
    return [line.split()[1] for line in stderr.splitlines()
            if line.startswith("trial ") and line.split()[2] in ("complete", "pruned")]


def test_the_best_trial_has_the_lowest_validation_loss_on_target_whatever_its_precision():
    trials = [
        TrialResult(0, "complete", loss=0.010, rate=0.40, precision=0.99),  # lowest loss, most precise: off target
        TrialResult(1, "complete", loss=0.050, rate=0.21, precision=0.95),  # the most precise on target
        TrialResult(2, "complete", loss=0.030, rate=0.19, precision=0.60),  # the lowest loss on target
        TrialResult(3, "pruned", loss=0.001, rate=0.20, precision=0.99),  # pruned: never chosen
        TrialResult(4, "failed", error="training diverged"),
        TrialResult(5, "complete", loss=0.030, rate=0.205),  # as low, but later
    ]
    keep = Keep(0.2, 0.02)
    assert choose(trials, keep).number == 2
    assert [t.number for t in ranked(trials, keep)] == [2, 5, 1, 0, 3, 4]
    assert choose(trials, Keep()).number == 0  # an extractor without a rate target: every complete trial
    assert choose([trials[0], trials[3], trials[4]], keep) is None  # none complete on target: none chosen


def test_every_declared_search_space_is_valid_and_the_papers_ranges_are_there():
    for extractor in SELECTORS:
        space = search_space(extractor)
        assert {"lr", "dropout", "hidden_size", "batch_size"} <= set(space.names())
        assert "budget" not in space.names()
    assert Searched("tau", 0.1, 2.0) in search_space("topk").entries  # Paulus et al. D.6
    assert OneOf("coherence", (1e-4, 2e-4, 3e-4, 4e-4)) in search_space("hardkuma").entries  # Bastings et al. B.1
    assert OneOf("lagrange_rho", (1.0, 20.0)) in search_space("hardkuma").entries  # the rate held on beer's classes


def test_a_searched_option_that_clashes_with_a_fixed_one_is_left_out(data, tmp_path):
    notes = []
    plan = plan_study({"data": data[0], "valid": data[1], "extractor": "hardkuma", "transitions": 0.05},
                      note=notes.append)
    assert "coherence" not in plan.space.names() and "dependent" in plan.space.names()
    assert notes and notes[0].startswith("--coherence not searched:")
    assert plan.config.keep == "best-loss-at-rate"  # a rate held: its epochs kept at the rate
    file = tmp_path / "space.toml"
    file.write_text("coherence = [0.0001, 0.0002]\n")
    with pytest.raises(UserError, match="search space and the fixed options clash: --coherence"):
        plan_study({"data": data[0], "valid": data[1], "extractor": "hardkuma", "transitions": 0.05},
                   space_file=file)


def test_a_search_space_file_changes_the_space_and_pruned_trials_stop_cleanly(data, tmp_path):
    file = tmp_path / "space.json"
    file.write_text(json.dumps({"lr": {"low": 0.002, "high": 0.004, "log": True}, "batch-size": [16, 32],
                                "kl_weight": 0.01, "weight_decay": {"choices": [0.0]}}))
    tuned = tune(tmp_path / "study", {"data": data[0], "valid": data[1], "extractor": "simple", "encoder": "cnn",
                                      "embedding_dim": 8, "hidden_size": 8, "epochs": 3, "budget": 0.2},
                 trials=2, search_space=file, pruner=optuna.pruners.ThresholdPruner(upper=0.0))  # prunes all
    assert tuned.best is None and [t.state for t in tuned.leaderboard.trials] == ["pruned", "pruned"]
    for trial in tuned.leaderboard.trials:
        assert 0.002 <= trial.params["lr"] <= 0.004 and trial.params["batch_size"] in (16, 32)
        assert "kl_weight" not in trial.params and trial.epochs == 1  # stopped after the epoch it was pruned at
        config = json.loads((Path(trial.run) / "config.json").read_text())
        metrics = json.loads((Path(trial.run) / "metrics.json").read_text())
        assert config["kl_weight"] == 0.01 and len(metrics["history"]) == 1
        assert (Path(trial.run) / "model.safetensors").is_file()


BAD_SPACES = {
    "missing.toml": (None, "search-space file not found"),
    "broken.toml": ("lr = {low = ", "not valid TOML"),
    "broken.json": ('{"lr": ', "not valid JSON"),
    "space.yaml": ("lr: 1", "ending in .toml or .json"),
    "unknown.toml": ("no_such_option = [1, 2]", "no_such_option is no option of extractor simple"),
    "other.toml": ("tau = [0.5, 1.0]", "tau is no option of extractor simple"),
    "reversed.toml": ("lr = {low = 0.01, high = 0.001}", "low end is below its high end"),
    "log.toml": ("dropout = {low = 0.0, high = 0.5, log = true}", "low end above 0 on a log scale"),
    "range.toml": ("dropout = {low = 0.1, high = 2.0}", "dropout 2: expected a number >= 0 and <= 0.9"),
    "keys.toml": ("lr = {lo = 0.001, high = 0.01}", "expected {low, high}"),
    "budget.json": ('{"budget": [0.1, 0.2]}', "budget is the same for every trial of a study"),
    "epochs.toml": ("epochs = [1, 2]", "the same for every trial of a study: give it as --epochs"),
    "ints.toml": ("hidden_size = {low = 8.5, high = 16}", "a range of whole numbers"),
    "type.toml": ("dropout = ['a', 'b']", "dropout a: expected a number"),
}


@pytest.mark.parametrize("name", BAD_SPACES)
def test_a_bad_search_space_file_is_one_line_and_exit_2(data, tmp_path, name):
    text, expected = BAD_SPACES[name]
    file = tmp_path / name
    if text is not None:
        file.write_text(text)
    out = tmp_path / "study"
    result = invoke(*tune_args(data, out, "--trials", 1, "--search-space", file))
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and expected in result.output, result.output
    assert not out.exists()


@pytest.mark.parametrize("url, expected", [
    ("nonsense", "cannot open the study's database (ArgumentError"),
    ("nosuchdb://host/name", "cannot open the study's database (NoSuchModuleError"),
    ("sqlite:////no/such/folder/study.db", "cannot open the study's database (OperationalError"),
    ("postgresql://user:secret@localhost/name", "driver for this URL is not installed"),
])
def test_a_bad_storage_url_is_one_line_and_exit_2(data, tmp_path, url, expected):
    out = tmp_path / "study"
    result = invoke(*tune_args(data, out, "--trials", 1, "--storage", url))
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert len(line.splitlines()) == 1 and expected in line and "secret" not in line, line
    assert not out.exists()


def test_without_optuna_tune_says_how_to_install_it(data, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna now fails
    result = invoke(*tune_args(data, tmp_path / "study", "--trials", 1))
    assert result.exit_code == 2 and result.output.strip() == f"error: {NEEDS_OPTUNA}"


def test_optuna_is_imported_only_inside_the_tuning_functions_and_models_knows_no_search_library():
    for path in sorted((ROOT / "rationale_cli").rglob("*.py")) + sorted((ROOT / "models").rglob("*.py")):
        text = path.read_text()
        in_models = path.is_relative_to(ROOT / "models")
        if "optuna" not in text and not (in_models and ("typer" in text or "rationale_cli." in text)):
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(name.split(".")[0] == "optuna" for name in names):
                assert path.relative_to(ROOT).as_posix() == "rationale_cli/tuning/storage.py", path
                assert node not in tree.body, f"{path}: optuna imported at module level"
            if in_models:
                assert not any(name.split(".")[0] in ("optuna", "typer") or name.startswith("rationale_cli.")
                               and not name.startswith("rationale_cli.models") for name in names), path


def test_the_documented_search_space_file_is_one(tmp_path):
    page = (ROOT / "docs" / "how-to" / "tune.md").read_text()
    file = tmp_path / "space.toml"
    file.write_text(page.split("```toml\n")[1].split("```")[0])
    space = search_space("hardkuma", file)
    assert space.fixed == {"dependent": True} and "dependent" not in space.names()
    assert OneOf("hidden_size", (100, 200)) in space.entries and Searched("lr", 0.0003, 0.003, True) in space.entries


def test_options_at_their_defaults_leave_a_study_the_same(tmp_path):
    from rationale_cli.tuning.job import without_defaults
    from rationale_cli.tuning.storage import open_storage, open_study

    store = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    saved = {"extractor": "hardkuma", "options": {"epochs": 3, "dropout": 0.1}, "space": {}, "data": "d"}
    open_study(store, "s", saved, comparable=without_defaults)  # dropout listed at its default
    open_study(store, "s", {**saved, "options": {"epochs": 3}}, comparable=without_defaults)  # a release lists fewer
    with pytest.raises(UserError, match="epochs was 3, now 4"):
        open_study(store, "s", {**saved, "options": {"epochs": 4}}, comparable=without_defaults)


def test_a_read_only_or_locked_study_database_is_one_line(data, tmp_path, monkeypatch):
    """A database that cannot be written, or that another process keeps locked (past the wait,
    here half a second), is one line naming it: no traceback, no silent wait."""
    import sqlite3

    from rationale_cli.tuning import storage

    out = tmp_path / "study"
    assert invoke(*tune_args(data, out, "--trials", 1, "--epochs", 1)).exit_code == 0
    database = out / "study.db"
    read_only = f"sqlite:///file:{database}?mode=ro&uri=true"
    result = invoke(*tune_args(data, out, "--trials", 2, "--epochs", 1, "--storage", read_only))
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "cannot write the study's database (attempt to write a readonly database)" in result.output
    monkeypatch.setattr(storage, "SQLITE_WAIT", 0.5)
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = invoke(*tune_args(data, out, "--trials", 2, "--epochs", 1))
    finally:
        holder.close()
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "(database is locked); another process has held a lock on it" in result.output


def test_a_study_folder_that_cannot_be_made_is_one_line(data, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for out, expected in ((loop, "a loop of symbolic links"), (loop / "study", "a loop of symbolic links"),
                          (Path("/proc/no-study"), "cannot write here")):
        result = invoke(*tune_args(data, out, "--trials", 1))
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
        assert result.output.startswith(f"error: {out}: cannot write here") and expected in result.output


def test_the_leaderboard_off_a_terminal_is_whole_and_importances_not_computed_are_said():
    import io
    from types import SimpleNamespace

    from rich.console import Console
    from rich.table import Table

    from rationale_cli.cli._util import print_whole
    from rationale_cli.output.study_report import effects_html

    table = Table()
    table.add_column("trial")
    table.add_column("params")
    table.add_row("0", " ".join(f"option_{i}=0.00{i}" for i in range(12)))
    out = io.StringIO()
    print_whole(Console(file=out, width=80), table)
    assert "option_0=0.000 " in out.getvalue() and "option_11=0.0011 " in out.getvalue()
    assert len(out.getvalue().splitlines()) == 5  # top, header, rule, the row on one line, bottom
    board = SimpleNamespace(effects={"lr": {"spearman": -1.0, "trials": 3}}, importance=None)
    page = effects_html(board)
    assert "importances were not computed (they need at least 5 complete trials)" in page
    assert "importance (Optuna)" not in page and ">-<" not in page
    board.importance = {"lr": 0.9}
    assert "importance (Optuna)" in effects_html(board) and "0.9" in effects_html(board)
