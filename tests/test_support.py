"""Two-stage training (``train --support RUN``): the support's selector, copied and fixed,
decodes the rationales a new predictor learns from; the result is a run like any other."""

import json

import pytest
import torch
from typer.testing import CliRunner

import rationale_cli as rationale
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.models.decoding import Decoding
from rationale_cli.runs.config import from_values
from rationale_cli.training.support import SELECTOR_SIDE
from rationale_cli.training.trainer import train_config


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def trained(out, **options):
    """A run on part of the demo corpus (train_config with the documents read already)."""
    train, valid = sources.load("demo", "train")[:400], sources.load("demo", "valid")[:80]
    config = from_values({"data": "demo", "encoder": "cnn", "embedding_dim": 16, "hidden_size": 16, "batch_size": 100,
                          "epochs": 1, "seed": 0, **options})
    return train_config(config, out, data=(train, valid))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("support")
    trained(root / "support", extractor="hardkuma", budget=0.2, reference=False)
    trained(root / "second", support=str(root / "support"), predictor_encoder="bow", lr=0.01)
    return root / "support", root / "second"


def selector_side(model) -> dict:
    return {k: v for k, v in model.state_dict().items() if k.startswith(SELECTOR_SIDE)}


def test_the_selector_is_the_support_s_and_stays_fixed_in_training(runs):
    support, second = (rationale.load(run) for run in runs)
    theirs, mine = selector_side(support.model), selector_side(second.model)
    assert set(theirs) == set(mine) and any(k.startswith("selector.") for k in mine)
    assert all(torch.equal(theirs[k], mine[k]) for k in theirs)
    assert not any(p.requires_grad for part in second.model.selector_side() for p in part.parameters())
    trained = [k for k in second.model.state_dict() if k.startswith(("predictor_encoder.", "output."))]
    assert trained, "the predictor is the new run's own"


def test_the_run_decodes_as_the_support_at_its_budget_in_sentences(runs):
    support, second = (rationale.load(run) for run in runs)
    records = sources.load("demo", "test")[:40]
    asked = support.predict(records, decoding=Decoding(rate=0.2, sentences=True))
    own = second.predict(records)
    assert [r.selected for r in own] == [r.selected for r in asked]
    assert any(sum(r.selected) for r in own)


def test_the_config_records_the_support_and_the_run_works_with_every_command(runs, tmp_path):
    support, second = runs
    config = json.loads((second / "config.json").read_text())
    assert config["support"] == str(support) and config["support_sentences"] is True
    assert config["extractor"] == "hardkuma" and config["predictor_encoder"] == "bow"
    out = tmp_path / "m.json"
    result = invoke("evaluate", second, "demo", "--no-faithfulness", "--json", out)
    assert result.exit_code == 0, result.output
    metrics = json.loads(out.read_text())
    assert "full_text_reference" in metrics and metrics["selection_rate"] > 0
    predicted = invoke("predict", second, "demo", "--out", tmp_path / "p.jsonl")
    assert predicted.exit_code == 0, predicted.output
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert lines and all(line["rationale"] for line in lines)


def test_a_support_without_a_budget_or_not_a_run_is_one_error_line(tmp_path):
    trained(tmp_path / "full", extractor="full", reference=False)
    result = invoke("train", "--data", "demo", "--out", tmp_path / "second", "--support", tmp_path / "full")
    assert result.exit_code == 2
    assert "holds no selection rate" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "second").exists()
    missing = invoke("train", "--data", "demo", "--out", tmp_path / "third", "--support", tmp_path / "nothing")
    assert missing.exit_code == 2 and "not a run directory" in missing.output
