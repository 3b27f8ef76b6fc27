"""--balance-classes: each epoch every document of the rarest class and an equal fresh draw of
every other class."""

import json
import random
from collections import Counter

import pytest
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.data.batching import balanced_draw, balanced_size
from rationale_cli.data.records import Record
from rationale_cli.runtime.errors import UserError
from tests.helpers import write


def unbalanced(negatives: int = 10, positives: int = 50) -> list[Record]:
    return [Record(id=f"n{i}", tokens=["bad", str(i)], label="neg") for i in range(negatives)] + \
        [Record(id=f"p{i}", tokens=["good", str(i)], label="pos") for i in range(positives)]


def test_a_draw_keeps_the_rare_class_whole_and_as_many_of_the_other():
    records = unbalanced()
    drawn = balanced_draw(records, random.Random(0))
    assert Counter(r.label for r in drawn) == {"neg": 10, "pos": 10}
    assert {r.id for r in drawn if r.label == "neg"} == {f"n{i}" for i in range(10)}
    assert len({r.id for r in drawn}) == 20  # without replacement
    assert balanced_size(records) == 20


def test_epochs_draw_afresh_and_reach_every_document():
    records, rng = unbalanced(), random.Random(0)
    epochs = [{r.id for r in balanced_draw(records, rng) if r.label == "pos"} for _ in range(30)]
    assert len({frozenset(e) for e in epochs}) > 1
    assert set().union(*epochs) == {f"p{i}" for i in range(50)}


def test_scores_are_refused():
    with pytest.raises(UserError, match="--balance-classes.*0.7"):
        balanced_size([Record(id="a", tokens=["x"], label=0.7)])


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def rows(path, negatives: int, positives: int):
    rng = random.Random(0)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(negatives + positives):
            label = "neg" if i < negatives else "pos"
            words = ["awful", "flat"] if label == "neg" else ["great", "clear"]
            text = " ".join(rng.sample(words + ["the", "beer", "was", "poured"], 6))
            handle.write(json.dumps({"id": str(i), "text": text, "label": label}) + "\n")
    return path


def test_train_runs_balanced_epochs(tmp_path):
    train, valid = rows(tmp_path / "train.jsonl", 8, 56), rows(tmp_path / "valid.jsonl", 4, 4)
    result = cli("train", "--data", str(train), "--valid", str(valid), "--out", str(tmp_path / "run"), "--epochs", "2",
                 "--batch-size", "4", "--balance-classes", "--hidden-size", "8", "--embedding-dim", "8")
    assert result.exit_code == 0, result.output
    assert "64 train (epochs of 16, classes balanced)" in result.output
    assert "classes weighted" in result.output  # the full-text reference weighs them as the epochs do
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["balance_classes"] is True


def test_train_refuses_it_for_scores(tmp_path):
    data = write(tmp_path / "scores.jsonl", "".join(json.dumps({"text": f"good beer {i}", "score": 0.1 * i}) + "\n"
                                                    for i in range(10)))
    result = cli("train", "--data", str(data), "--out", str(tmp_path / "run"), "--epochs", "1", "--balance-classes",
                 "--no-reference")
    assert result.exit_code != 0
    assert "--balance-classes balances classes" in result.output
    assert not (tmp_path / "run").exists()  # refused before the run directory is written
