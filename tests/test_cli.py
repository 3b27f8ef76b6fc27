"""Every command through the CLI, on the synthetic corpus and small files."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.training.callbacks import out_of_time

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SMALL = ["--encoder", "cnn", "--extractor", "attention", "--embedding-dim", "16", "--hidden-size", "16",
         "--batch-size", "100", "--budget", "0.2", "--lr", "0.003", "--no-reference"]

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "demo"
    result = invoke("train", "--data", "demo", "--out", out, "--epochs", 2, *SMALL)
    assert result.exit_code == 0, result.output
    return out


def test_train_writes_a_complete_run_directory(run_dir):
    for name in ("model.safetensors", "config.json", "vocab.json", "task.json", "metrics.json", "versions.json"):
        assert (run_dir / name).is_file(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert len(metrics["history"]) == 2
    assert 0.0 <= metrics["valid"]["selection_rate"] <= 1.0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["encoder"] == "cnn" and config["extractor"] == "attention"
    assert not list(run_dir.glob("*.tmp*"))
    # the weights get a new file's permissions, like the JSON files (safetensors alone writes 0600)
    modes = {p.name: p.stat().st_mode & 0o777 for p in run_dir.iterdir()}
    assert len(set(modes.values())) == 1, modes


def test_save_epochs_keeps_each_epoch_and_evaluate_reads_one(tmp_path):
    out = tmp_path / "run"
    result = invoke("train", "--data", "demo", "--out", out, "--epochs", 2, "--save-epochs", "--patience", 0, *SMALL)
    assert result.exit_code == 0, result.output
    kept = json.loads((out / "metrics.json").read_text())["best_epoch"]
    epochs = {n: load_file(str(out / "epochs" / f"epoch-{n}.safetensors")) for n in (1, 2)}
    model = load_file(str(out / "model.safetensors"))
    assert all(torch.equal(model[k], epochs[kept][k]) for k in model)
    assert not all(torch.equal(epochs[1][k], epochs[2][k]) for k in model)
    scores = {}
    for n in (1, 2):
        result = invoke("evaluate", out, "demo", "--epoch", n, "--no-faithfulness", "--json", tmp_path / f"{n}.json")
        assert result.exit_code == 0, result.output
        scores[n] = json.loads((tmp_path / f"{n}.json").read_text())
    assert scores[1] != scores[2]
    result = invoke("evaluate", out, "demo", "--epoch", 3)
    assert result.exit_code == 2 and "no weights of epoch 3; the run kept epochs 1, 2" in result.output


def test_train_refuses_to_overwrite_a_run(run_dir):
    before = (run_dir / "model.safetensors").read_bytes()
    result = invoke("train", "--data", "demo", "--out", run_dir, "--epochs", 1, *SMALL)
    assert result.exit_code == 2
    assert "--force" in result.output
    assert (run_dir / "model.safetensors").read_bytes() == before


def test_same_seed_gives_the_same_weights(tmp_path):
    for name in ("a", "b"):
        result = invoke("train", "--data", "demo", "--out", tmp_path / name, "--epochs", 1, "--seed", 3, *SMALL)
        assert result.exit_code == 0, result.output
    a, b = (load_file(str(tmp_path / n / "model.safetensors")) for n in ("a", "b"))
    assert a.keys() == b.keys()
    assert all((a[k] == b[k]).all() for k in a)


def test_time_limit_stops_before_an_epoch_that_would_pass_it(tmp_path):
    out = tmp_path / "run"
    # a limit far below one epoch's time: the first epoch runs, no second is started
    result = invoke("train", "--data", "demo", "--out", out, "--epochs", 3, "--time-limit", 1e-6, *SMALL)
    assert result.exit_code == 0, result.output
    assert "time limit" in result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["history"]) == 1 and metrics["best_epoch"] == 1
    assert (out / "model.safetensors").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("extra", [SMALL, ["--extractor", "hardkuma", "--encoder", "lstm", "--embedding-dim", "8",
                                             "--hidden-size", "8", "--batch-size", "100", "--dropout", "0.3"],
                                   [*SMALL, "--lr-final", "0.1", "--lr-decay-epochs", "2"]])  # resumed mid-decay
def test_resume_ends_where_an_uninterrupted_run_ends(tmp_path, extra):
    whole, halves = tmp_path / "whole", tmp_path / "halves"
    assert invoke("train", "--data", "demo", "--out", whole, "--epochs", 3, "--seed", 5, *extra).exit_code == 0
    result = invoke("train", "--data", "demo", "--out", halves, "--epochs", 3, "--seed", 5, "--time-limit", 1e-6, *extra)
    assert result.exit_code == 0 and "time limit" in result.output
    result = invoke("train", "--out", halves, "--resume", "--epochs", 3, "--time-limit", 0)
    assert result.exit_code == 0, result.output
    assert "resuming after epoch 1" in result.output
    for name in ("model.safetensors", "resume.safetensors"):
        a, b = (load_file(str(run / name)) for run in (whole, halves))
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a), name
    a, b = (json.loads((run / "metrics.json").read_text()) for run in (whole, halves))
    assert [h["train_loss"] for h in a["history"]] == [h["train_loss"] for h in b["history"]]
    assert a["best_epoch"] == b["best_epoch"]
    assert json.loads((halves / "config.json").read_text())["epochs"] == 3


@pytest.mark.parametrize("args, expected", [
    (["--resume", "--epochs", 2], "already trained for 2 epochs"),
    (["--resume", "--epochs", 3, "--lr", 0.1], "cannot change --lr"),
    (["--resume", "--epochs", 3, "--force"], "no --config or --force"),
    (["--resume", "--epochs", 3, "--data", "demo", "--aspect", 1], "data differ"),
])
def test_resume_refuses_what_would_not_go_on_the_same_run(run_dir, args, expected):
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    result = invoke("train", "--out", run_dir, *args)
    assert result.exit_code == 2, result.output
    assert expected in result.output and len(result.output.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def test_resume_needs_a_complete_run_with_resume_state(run_dir, tmp_path):
    result = invoke("train", "--out", tmp_path / "none", "--resume")
    assert result.exit_code == 2 and "nothing to resume" in result.output
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "resume.safetensors").write_bytes((run_dir / "resume.safetensors").read_bytes())
    result = invoke("train", "--out", damaged, "--resume", "--epochs", 5)
    assert result.exit_code == 2 and "incomplete run directory" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_out_of_time_judges_by_the_slowest_epoch():
    history = [{"seconds": 50.0}, {"seconds": 20.0}]
    assert not out_of_time(0.0, 1e9, history)  # 0: no limit
    assert not out_of_time(2.0, 69.0, history)  # 69 + 50 < 120
    assert out_of_time(2.0, 71.0, history)  # 71 + 50 > 120


def test_config_file_and_command_line_precedence(tmp_path):
    config = tmp_path / "train.toml"
    config.write_text('[train]\nepochs = 2\nhidden-size = 12\nencoder = "lstm"\n')
    out = tmp_path / "run"
    result = invoke("train", "--data", "demo", "--out", out, "--config", config, "--epochs", 1,
                    "--embedding-dim", 8, "--batch-size", 200)
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "config.json").read_text())
    assert saved["epochs"] == 1 and saved["hidden_size"] == 12 and saved["encoder"] == "lstm"


def test_predict_writes_spans_that_map_back_to_the_text(run_dir, tmp_path):
    out = tmp_path / "pred.jsonl"
    result = invoke("predict", run_dir, EXAMPLES / "reviews.txt", "--out", out)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    texts = (EXAMPLES / "reviews.txt").read_text().splitlines()
    assert len(lines) == len(texts)
    for line, text in zip(lines, texts):
        assert 0.0 <= line["prediction"] <= 1.0
        assert len(line["char_spans"]) == len(line["rationale"])
        joined = " ".join(text[s:e] for s, e in line["char_spans"])
        assert joined.split() == " ".join(line["selected_tokens"]).split() or joined.replace(" ", "") == "".join(line["selected_tokens"])
        assert all(0.0 <= s <= 1.0 for s in line["token_scores"])


def test_predict_on_labelled_jsonl_keeps_the_label(run_dir, tmp_path):
    out = tmp_path / "pred.jsonl"
    assert invoke("predict", run_dir, EXAMPLES / "reviews.jsonl", "--out", out).exit_code == 0
    first = json.loads(out.read_text().splitlines()[0])
    assert first["id"] == "r1" and first["label"] == 0.8


@pytest.fixture(scope="module")
def table_run(tmp_path_factory):
    """A run trained on a small CSV whose ids are in review_id and text in body, and that CSV."""
    import csv

    from rationale_cli.data import sources

    folder = tmp_path_factory.mktemp("table")
    table = folder / "reviews.csv"
    with table.open("w", newline="") as handle:
        rows = csv.writer(handle)
        rows.writerow(["review_id", "body", "label"])
        for n, record in enumerate(sources.load("demo", "test")[:60]):
            rows.writerow([f"r{n}", " ".join(record.tokens), record.label])
    run = folder / "run"
    result = invoke("train", "--data", table, "--text-col", "body", "--id-col", "review_id", "--out", run,
                    "--epochs", 1, *SMALL)
    assert result.exit_code == 0, result.output
    return run, table


def test_predict_and_explain_read_a_table_by_the_runs_columns(table_run, tmp_path):
    run, table = table_run
    assert json.loads((run / "config.json").read_text())["id_col"] == "review_id"
    out = tmp_path / "pred.jsonl"
    result = invoke("predict", run, table, "--out", out)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    gold = list(csv_rows(table))
    assert [line["id"] for line in lines] == [row["review_id"] for row in gold]
    assert [line["label"] for line in lines] == [float(row["label"]) for row in gold]
    page = tmp_path / "page.html"
    result = invoke("explain", run, "--input", table, "--limit", 2, "--html", page)
    assert result.exit_code == 0, result.output
    assert "r0" in page.read_text() and "r1" in page.read_text()


def test_a_table_without_the_runs_id_column_is_one_line(table_run, tmp_path):
    run, _ = table_run
    table = tmp_path / "new.csv"
    table.write_text("body\nthe head was thick .\nthe nose was dull .\n")
    out = tmp_path / "pred.jsonl"
    result = invoke("predict", run, table, "--out", out)
    assert result.exit_code == 2 and not out.exists()
    assert result.output.strip().splitlines() == [
        f"error: {table}: no id column 'review_id'; columns are: body (--id-col NAME names the one holding the "
        "ids, --id-col '' numbers the rows)"]
    result = invoke("predict", run, table, "--out", out, "--id-col", "")
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["1", "2"]
    assert "label" not in out.read_text()


def csv_rows(path):
    import csv

    with path.open(newline="") as handle:
        yield from csv.DictReader(handle)


def test_predict_leaves_no_half_written_output_on_a_bad_line(run_dir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a fine beer"}\n{"text": "good"}\n{"text": \n')
    out = tmp_path / "pred.jsonl"
    out.write_text("keep me\n")
    result = invoke("predict", run_dir, bad, "--out", out, "--force")
    assert result.exit_code == 2
    assert f"{bad}:3" in result.output
    assert "Traceback" not in result.output
    assert out.read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "pred.jsonl"]


def test_evaluate_reports_fractions_and_writes_json(run_dir, tmp_path):
    out = tmp_path / "metrics.json"
    result = invoke("evaluate", run_dir, "demo", "--json", out)
    assert result.exit_code == 0, result.output
    assert "precision" in result.output
    metrics = json.loads(out.read_text())
    for key in ("precision", "recall", "f1", "selection_rate", "mse"):
        assert 0.0 <= metrics[key] <= 1.0, key
    assert metrics["documents_with_gold"] == metrics["documents"] == 300


def test_evaluate_runs_the_leakage_probe_when_asked(run_dir, tmp_path):
    out = tmp_path / "metrics.json"
    result = invoke("evaluate", run_dir, "demo", "--leakage-probe", "--no-faithfulness", "--json", out)
    assert result.exit_code == 0, result.output
    assert "leakage_mse" in result.output
    metrics = json.loads(out.read_text())
    assert 0.0 <= metrics["leakage_mse"] <= 1.0 and 0.0 < metrics["leakage_mse_of_mean"] <= 1.0
    assert metrics["leakage_documents"] == 2000


def test_explain_text_and_html(run_dir, tmp_path):
    result = invoke("explain", run_dir, "The color is a <b>hazy</b> gold & the head is thick.")
    assert result.exit_code == 0, result.output
    assert "prediction" in result.output
    page = tmp_path / "page.html"
    result = invoke("explain", run_dir, "--input", "demo", "--limit", 2, "--html", page)
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert html.count("demo-") >= 2
    result = invoke("explain", run_dir, "<script>x</script>", "--html", page, "--force")
    assert result.exit_code == 0
    html = page.read_text()
    assert "<script>" not in html and "</script" not in html and "&lt;/script" in html


@pytest.mark.parametrize("args, expected", [
    (["explain", "RUN"], "nothing to explain"),
    (["explain", "RUN", "   "], "empty"),
    (["explain", "RUN", str(EXAMPLES / "reviews.txt")], "--input"),
    (["explain", "RUN", str(EXAMPLES)], "is a folder"),
    (["evaluate", "RUN", "missing.jsonl"], "missing.jsonl"),
    (["evaluate", "RUN", str(EXAMPLES / "reviews.txt")], "no label"),
    (["train", "--data", "missing.csv", "--out", "OUT"], "missing.csv"),
    (["train", "--data", "demo", "--out", "OUT", "--encoder", "gru"], "--encoder gru"),
    (["train", "--data", "demo", "--out", "OUT", "--device", "tpu"], "--device tpu"),
    (["train", "--data", "demo", "--out", "OUT", "--time-limit", "-5"], "--time-limit -5"),
    (["train", "--data", "demo", "--out", "OUT", "--extractor", "hardkuma", "--transitions", "0.02",
      "--coherence", "0.0002"], "no --transitions target beside it"),
    (["train", "--data", "demo", "--out", "OUT", "--extractor", "simple", "--k", "0"], "--budget 0: --extractor simple"),
    (["train", "--data", "demo", "--out", "OUT", "--extractor", "sparsemap", "--budget", "1.5"], "--budget 1.5"),
    (["train", "--data", "demo", "--out", "OUT", "--extractor", "attention", "--budget", "0"], "--budget 0"),
    (["train", "--data", "demo", "--out", "OUT", "--extractor", "sparsemap", "--tau", "3"],
     "--tau does not apply to --extractor sparsemap"),
    (["train", "--data", "demo", "--out", "OUT", "--extractor", "bernoulli", "--baseline", "loo", "--samples", "1"],
     "--samples 1: --extractor bernoulli expects 2 or more"),
    (["train", "--data", "demo", "--out", "OUT", "--epochs", "0"], "--epochs 0"),
    (["train", "--data", "demo", "--out", "OUT", "--batch-size", "0"], "--batch-size 0"),
    (["predict", "nowhere", str(EXAMPLES / "reviews.txt"), "--out", "OUT"], "not a run directory"),
])
def test_user_errors_are_one_line_and_exit_2(run_dir, tmp_path, args, expected):
    args = [str(run_dir) if a == "RUN" else str(tmp_path / "x") if a == "OUT" else a for a in args]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "x").exists()
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_damaged_run_directories_are_refused(run_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    versions = json.loads((copy / "versions.json").read_text())
    (copy / "versions.json").write_text(json.dumps({**versions, "format_version": 99}))
    result = invoke("evaluate", copy, "demo")
    assert result.exit_code == 2 and "version 99" in result.output
    (copy / "versions.json").write_text(json.dumps(versions))
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "hidden_size": 17}))
    result = invoke("evaluate", copy, "demo")
    assert result.exit_code == 2 and "do not match" in result.output
    (copy / "vocab.json").unlink()
    result = invoke("evaluate", copy, "demo")
    assert result.exit_code == 2 and "vocab.json" in result.output


def test_demo_takes_the_settings_each_extractor_declares():
    result = invoke("demo", "--extractor", "bernoulli", "--epochs", 1)
    assert result.exit_code == 0, result.output
    assert "--budget" not in result.output.split("settings of examples/demo.toml:")[1].splitlines()[0]


def test_demo_command_runs_end_to_end():
    result = invoke("demo", "--epochs", 1)
    assert result.exit_code == 0, result.output
    assert "precision" in result.output
    assert "demo-" in result.output


def test_python_dash_m_entry_point():
    done = subprocess.run([sys.executable, "-m", "rationale_cli", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    for command in ("train", "predict", "explain", "evaluate", "demo"):
        assert command in done.stdout


@pytest.mark.parametrize("extractor, extra", [
    ("full", []),
    ("hardkuma", ["--dependent", "--transitions", "0.05"]),
    ("bernoulli", ["--dependent", "--baseline", "loo", "--samples", "2"]),
    ("simple", ["--budget", "k=5", "--kl-weight", "0.01"]),
    ("topk", ["--k", "5", "--tau", "0.5"]),
    ("corr-topk", ["--k", "5", "--straight-through"]),
    ("sparse-attention", ["--gamma", "0.5"]),
    ("sparse-attention", ["--attention", "fusedmax", "--lambda", "0.2"]),
    ("sparse-attention", ["--attention", "oscarmax"]),
    ("sparsemap", ["--budget", "0.3"]),
    ("topk-sparsemax", ["--selection", "0.3", "--top-masks", "4"]),  # the old name of --budget still works
])
def test_every_extractor_trains_and_evaluates(tmp_path, extractor, extra):
    out = tmp_path / extractor
    result = invoke("train", "--data", "demo", "--out", out, "--epochs", 1, "--extractor", extractor, "--encoder", "rcnn",
                    "--embedding-dim", 8, "--hidden-size", 8, "--batch-size", 100, *extra)
    assert result.exit_code == 0, result.output
    # the faithfulness reruns decode as evaluate does (tests/test_faithfulness.py, test_score.py)
    result = invoke("evaluate", out, "demo", "--json", tmp_path / "m.json", "--no-faithfulness")
    assert result.exit_code == 0, result.output
    assert 0.0 <= json.loads((tmp_path / "m.json").read_text())["selection_rate"] <= 1.0


def test_version():
    from rationale_cli import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and __version__ in result.output


def test_train_help_lists_every_extractor_with_its_own_options_and_every_default():
    from rationale_cli.models.selectors import SELECTORS, option_specs
    from rationale_cli.runs.config import TRAIN_SPECS
    from rationale_cli.runs.flags import flag_of

    result = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for name in SELECTORS:
        own = " ".join(flag_of(spec.name) for spec in option_specs(name).values()) or "no options"
        assert f"{name}: " in text and f"Options: {own}." in text, name
    for spec in TRAIN_SPECS.values():
        assert flag_of(spec.name) in text
    assert text.count("[default:") >= len(TRAIN_SPECS)
    assert "[default: hardkuma]" in text
    assert not re.search(r"\w \.(\s|$)", text)  # no default swallowed as markup, leaving "word ."


def test_explain_says_when_the_limit_hides_documents(run_dir):
    result = invoke("explain", run_dir, "--input", "demo", "--limit", 2)
    assert result.exit_code == 0, result.output
    assert "the first 2 documents of demo shown" in result.output


def test_a_run_saved_before_budgets_still_loads_and_predicts(run_dir, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    config = json.loads((old / "config.json").read_text())
    config["selection"] = config.pop("budget")
    config.update(k=10, tau=1.0, transitions=None, baseline="ema", attention="sparsemax", gamma=1.0, lam=None)
    (old / "config.json").write_text(json.dumps(config))
    for run, name in ((old, "old.jsonl"), (run_dir, "new.jsonl")):
        result = invoke("predict", run, EXAMPLES / "reviews.txt", "--out", tmp_path / name)
        assert result.exit_code == 0, result.output
    assert (tmp_path / "old.jsonl").read_text() == (tmp_path / "new.jsonl").read_text()


def test_readme_extractor_table_agrees_with_the_declarations():
    from rationale_cli.models.options import spelled
    from rationale_cli.models.selectors import SELECTORS, option_specs
    from rationale_cli.runs.flags import flag_of

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = readme.split("| `--extractor` | what it selects | `--budget` is | default |")[1].split("\n\n")[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| `")]
    for name in SELECTORS:
        cells = next(row for row in rows if f"`{name}`" in row[0] and len(row) == 4)
        spec = option_specs(name).get("budget")
        if spec is None:
            assert cells[2].strip().startswith("-"), name
        else:
            assert spelled(spec.role, flag_of).split(" (")[0] in cells[2], name
            assert cells[3].strip() == spec.default_shown(), name


def test_declared_texts_name_only_options_the_extractor_has():
    """A summary, help or role names options as ``{name}`` placeholders: each one must exist."""
    from rationale_cli.models.options import spelled
    from rationale_cli.models.selectors import SELECTORS, option_specs
    from rationale_cli.runs.config import TRAIN_SPECS

    for name, cls in SELECTORS.items():
        own = option_specs(name)

        def known(option: str) -> str:
            assert option in own or option in TRAIN_SPECS, (name, option)
            return option

        for text in [cls.summary] + [t for spec in own.values() for t in (spec.help, spec.role) if t]:
            spelled(text, known)
