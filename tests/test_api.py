"""The library training loop (fit and its callbacks) and the Python API."""

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from typer.testing import CliRunner

import rationale_cli as rationale
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.data.vocab import Vocab
from rationale_cli.models.model import RationaleModel
from rationale_cli.models.selectors.attention.attention import AttentionSelector
from rationale_cli.runs.config import from_values
from rationale_cli.runs.run_directory import build_model
from rationale_cli.runs.task import infer_task
from rationale_cli.runtime.errors import UserError
from rationale_cli.training.callbacks import summary_line
from rationale_cli.training.loop import Callback, Epoch, fit
from rationale_cli.training.train_job import train_options
from rationale_cli.training.trainer import train_config

README = Path(__file__).resolve().parent.parent / "README.md"
SMALL = dict(extractor="attention", encoder="cnn", embedding_dim=16, hidden_size=16, batch_size=50, epochs=2)


def demo_parts():
    train, valid = sources.load("demo", "train"), sources.load("demo", "valid")
    task = infer_task([r.label for r in train])
    vocab = Vocab.build(r.tokens for r in train)
    torch.manual_seed(0)
    model = build_model(from_values(SMALL), len(vocab), task)
    return model, vocab, task, train, valid


def test_fit_without_callbacks_trains_in_memory_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model, vocab, task, train, valid = demo_parts()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = fit(model, vocab, task, train, valid, epochs=3, batch_size=50, lr=0.005, patience=0)
    assert list(tmp_path.iterdir()) == []
    assert state.epoch == 3 and [h["epoch"] for h in state.history] == [1, 2, 3] and state.stop is None
    assert state.history[-1]["train_loss"] < state.history[0]["train_loss"]
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    best = state.best_weights  # the model ends with its best epoch's weights
    assert all(torch.equal(best[k], v) for k, v in model.state_dict().items())
    assert state.metrics()["valid"] == state.best["valid"]
    assert state.history[state.best["epoch"] - 1]["valid_loss"] == min(h["valid_loss"] for h in state.history)

def test_linear_decay_takes_the_learning_rate_down_update_by_update_then_holds_it():
    class Rates(Callback):
        def __init__(self):
            self.seen = []

        def on_step(self, fit, step, mean_loss):
            self.seen.append(fit.optimizer.param_groups[0]["lr"])

    model, vocab, task, train, valid = demo_parts()
    rates = Rates()
    state = fit(model, vocab, task, train, valid, epochs=3, batch_size=64, lr=0.01, lr_final=0.1, lr_decay_epochs=2,
                patience=0, callbacks=[rates])
    steps = len(rates.seen) // 3
    assert len(rates.seen) == 3 * steps and state.epoch == 3
    expected = [0.01 * (1 - 0.9 * min(1.0, t / (2 * steps))) for t in range(3 * steps)]
    assert rates.seen == pytest.approx(expected, rel=1e-12)
    assert rates.seen[-1] == pytest.approx(0.001)  # held after the decay



def test_a_callback_sees_every_step_and_can_stop_training():
    model, vocab, task, train, valid = demo_parts()

    class StopAfterTwo(Callback):
        def __init__(self):
            self.steps, self.ends = 0, 0

        def on_step(self, fit, step, mean_loss):
            self.steps += 1

        def on_epoch_end(self, fit, result: Epoch):
            if result.epoch == 2:
                fit.state.stop = "enough"

        def on_end(self, fit):
            self.ends += 1

    hook = StopAfterTwo()
    state = fit(model, vocab, task, train, valid, epochs=5, batch_size=100, callbacks=[hook])
    assert state.epoch == 2 and state.stop == "enough"
    assert hook.steps == 2 * len(range(0, len(train), 100)) and hook.ends == 1


def test_callbacks_write_the_run_directory_of_rationale_train(tmp_path):
    """The library with a run directory writes what the command writes: the same files,
    keys and weights (same seed)."""
    cli, lib = tmp_path / "cli", tmp_path / "lib"
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()]
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(cli), *flags])
    assert result.exit_code == 0, result.output
    train_config(from_values({**SMALL, "data": "demo"}), lib)
    files = ["config.json", "metrics.json", "model.safetensors", "reference.json", "reference.safetensors",
             "resume.safetensors", "task.json", "versions.json", "vocab.json"]
    assert sorted(p.name for p in cli.iterdir()) == sorted(p.name for p in lib.iterdir()) == files
    for name in ("config.json", "task.json", "vocab.json", "versions.json"):
        assert (cli / name).read_text() == (lib / name).read_text(), name
    a, b = (json.loads((run / "metrics.json").read_text()) for run in (cli, lib))
    assert sorted(a) == sorted(b) == ["best_epoch", "history", "train_seconds", "valid", "warnings"]
    assert [sorted(h) for h in a["history"]] == [sorted(h) for h in b["history"]]
    assert [h["train_loss"] for h in a["history"]] == [h["train_loss"] for h in b["history"]]
    assert (cli / "model.safetensors").read_bytes() == (lib / "model.safetensors").read_bytes()
    metas = []
    for run in (cli, lib):
        with safe_open(str(run / "resume.safetensors"), framework="pt") as handle:
            metas.append(json.loads(handle.metadata()["state"]))
    assert sorted(metas[0]) == sorted(metas[1]) == ["best", "epoch", "fingerprint", "history", "lrs", "python_rng",
                                                    "stale", "train_seconds"]


def epoch_result(**stats) -> Epoch:
    valid = {"loss": 0.02, "mse": 0.02, "selection_rate": 0.131, "precision": 0.9}
    return Epoch(3, 0.0412, stats, valid, 2.4, True)


def test_the_epoch_line_shows_shares_in_percent_and_the_rest_with_verbose():
    result = epoch_result(selected=0.2131, expected_l0=0.2, lambda_l0=0.00123)
    line = summary_line(result, 20)
    assert line == ("epoch 3/20 | train loss 0.0412 | train selected 21.3% | valid loss 0.0200 | valid mse 0.0200 | "
                    "valid selected 13.1% | valid precision 90.0% | 2s *")
    verbose = summary_line(result, 20, verbose=True)
    assert "train expected_l0 20.0%" in verbose and "train lambda_l0 0.00123" in verbose


def test_api_predicts_strings_records_and_dicts_and_makes_a_frame(capsys):
    model = rationale.train("demo", **SMALL)
    assert model.metrics["best_epoch"] in (1, 2) and len(model.metrics["history"]) == 2
    text = "Pours a hazy golden color. Smells of citrus."
    record = sources.load("demo", "test")[0]
    results = model.predict([text, {"tokens": ["dark", "brown"], "id": "t"}, record])
    first = results[0]
    assert first.id == "0" and first.text == text and len(first.selected) == len(first.tokens) == len(first.scores)
    for (start, end), (c0, c1) in zip(first.spans, first.char_spans):
        assert text[c0:c1].split()[0] == first.tokens[start] and all(first.selected[start:end])
    assert first.pieces == [text[c0:c1] for c0, c1 in first.char_spans]
    assert results[1].id == "t" and results[1].char_spans is None and results[2].label == record.label
    frame = model.frame([text, "Dark and murky."])
    assert list(frame["prediction"]) == [r.prediction for r in model.predict([text, "Dark and murky."])]
    assert {"id", "rationale", "char_spans", "token_scores", "text", "rationale_text"} <= set(frame.columns)
    metrics = model.evaluate("demo")
    assert 0 <= metrics["precision"] <= 1 and metrics["documents"] == len(sources.load("demo", "test"))
    assert model.evaluate([record])["documents"] == 1
    explained = model.explain([record], html=None)
    shown = capsys.readouterr().out
    assert explained[0].to_dict() == model.predict([record])[0].to_dict()
    assert f"gold: {record.label:.3f}" in shown  # as `rationale explain` shows it


def test_api_refuses_bad_input_with_one_line():
    with pytest.raises(UserError, match="--budget"):
        rationale.train("demo", extractor="hardkuma", budget=2.5)
    with pytest.raises(UserError, match="unknown option --colour"):
        rationale.train("demo", colour=3)
    with pytest.raises(UserError, match="not a run directory"):
        rationale.load("/nonexistent/run")
    model = rationale.train("demo", **{**SMALL, "epochs": 1})
    with pytest.raises(UserError, match="document 1: empty text"):
        model.predict(["fine text", "   "])
    with pytest.raises(UserError, match="needs 'text' or 'tokens'"):
        model.predict([{"id": "x"}])
    with pytest.raises(UserError, match="no label"):
        model.evaluate(["no label here"])
    with pytest.raises(UserError, match="got one document; put it in a list"):
        model.predict("one string")
    with pytest.raises(UserError, match="'tokens' must be a list of strings"):
        model.predict([{"tokens": "dark brown"}])
    with pytest.raises(UserError, match="'text' must be a string, got float"):
        model.predict([{"text": float("nan")}])
    with pytest.raises(UserError, match="no documents"):
        model.evaluate([])
    with pytest.raises(UserError, match="budget: an option of the named extractors"):
        rationale.train("demo", selector=AttentionSelector, budget=0.05)


def test_a_model_takes_a_selector_instance_or_subclass():
    own = AttentionSelector(16)
    model = RationaleModel(50, 8, 8, 1, encoder="cnn", extractor=own)
    assert model.selector is own
    built = RationaleModel(50, 8, 8, 1, encoder="cnn", extractor=AttentionSelector)
    assert type(built.selector) is AttentionSelector and built.selector is not own
    with pytest.raises(UserError, match="registered extractor"):
        rationale.train("demo", out="/tmp/never", selector=AttentionSelector)


def test_a_training_checks_its_options_once_and_the_selector_keeps_them(tmp_path, monkeypatch):
    """Every option given is checked once (:meth:`Spec.check`, the one validation path) on its
    way into the configuration, whose extractor options the selector then holds as they are;
    loading the run, or going on with it, reads config.json and checks them once again, no more."""
    from collections import Counter

    from rationale_cli.models.options import Spec, specs

    checked, check = Counter(), Spec.check
    monkeypatch.setattr(Spec, "check", lambda spec, *args, **kw: checked.update([id(spec)]) or check(spec, *args, **kw))
    model = rationale.train("demo", out=tmp_path / "run", **{**SMALL, "epochs": 1, "budget": 0.2})
    own = specs(type(model.config.options)).values()
    assert model.model.selector.options is model.config.options
    assert [checked[id(spec)] for spec in own] == [1] and max(checked.values()) == 1
    checked.clear()
    loaded = rationale.load(tmp_path / "run")
    assert [checked[id(spec)] for spec in own] == [1] and max(checked.values()) == 1
    assert loaded.model.selector.options is loaded.config.options == model.config.options
    checked.clear()  # going on with the run: its options read once, for the config and the model both
    resumed = train_options(tmp_path / "run", None, {"epochs": 2}, resume=True)
    assert [checked[id(spec)] for spec in own] == [1] and resumed.model.selector.options is resumed.config.options


def readme_example() -> str:
    section = README.read_text(encoding="utf-8").split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_python_example_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_example(), "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "runs" / "api-demo" / "model.safetensors").is_file()
    assert (tmp_path / "runs" / "api-demo.html").read_text().startswith("<!DOCTYPE html>")
    assert "rationale_text" in capsys.readouterr().out
