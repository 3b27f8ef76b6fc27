"""The full-text reference: a TF-IDF linear model chosen on validation, saved without pickle
and scored beside the model by train, evaluate, report and the Python API."""

import json
import random

import numpy as np
import pytest
from typer.testing import CliRunner

import rationale_cli as rationale
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.data.records import Record
from rationale_cli.runs.reference import NGRAMS, STRENGTHS, fit_reference, ngrams
from rationale_cli.runs.run_directory import REFERENCE, load_reference, save_reference
from rationale_cli.runs.task import Classification, Regression
from rationale_cli.runtime.errors import UserError

JSON, ARRAYS = REFERENCE
SMALL = ["--extractor", "attention", "--encoder", "cnn", "--embedding-dim", "16", "--hidden-size", "16",
         "--batch-size", "100"]
FILLER = ["the", "film", "was", "a", "story", "of", "people", "and", "time", "in", "it"]


def reviews(n: int, seed: int) -> list[Record]:
    """Documents whose class is told by the bigram 'not good' against 'very good' (both hold
    'good'), among filler words: words alone cannot tell them apart, bigrams can."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = "neg" if i % 2 else "pos"
        words = [rng.choice(FILLER) for _ in range(12)]
        words[rng.randrange(12):0] = ["not" if label == "neg" else "very", "good"]
        words.insert(0, "not" if label == "pos" else "very")  # the other word, never before 'good'
        out.append(Record(f"d{seed}-{i}", words, label))
    return out


def test_ngrams_are_lowercased_and_run_up_to_the_longest():
    assert ngrams(["Not", "good", "."], 2) == ["not", "good", ".", "not good", "good ."]
    assert ngrams(["a"], 2) == ["a"]


def test_the_setting_best_on_validation_is_chosen_and_bigrams_win_where_only_they_tell():
    train, valid, test = reviews(200, 0), reviews(100, 1), reviews(100, 2)
    reference = fit_reference(train, valid, Classification(["neg", "pos"]))
    assert len(reference.tried) == len(NGRAMS) * len(STRENGTHS["logistic"])
    assert reference.valid["value"] == max(row["accuracy"] for row in reference.tried)
    assert reference.longest == 2
    assert reference.score(test, Classification(["neg", "pos"])) > 0.95
    words_only = [row["accuracy"] for row in reference.tried if row["longest_ngram"] == 1]
    assert max(words_only) < reference.valid["value"]


def test_token_contributions_sum_to_the_decision_value_and_find_the_bigram():
    """The shares of a document's tokens add up to its decision value less the bias (features
    times weights, unigrams and bigrams, repeated n-grams too); 'not good' and 'very good' carry
    the largest shares, the class-telling bigram's words above the filler."""
    train, valid = reviews(200, 0), reviews(100, 1)
    reference = fit_reference(train, valid, Classification(["neg", "pos"]))
    for record in reviews(20, 3) + [Record("r", ["not", "good", "not", "good", "Good", "film"], "neg")]:
        shares = reference.token_contributions(record)
        decision = float((reference.features([record]) @ reference.weights[0]).item())
        assert len(shares) == len(record.tokens) and shares.sum() == pytest.approx(decision, rel=1e-4, abs=1e-5)
    record = reviews(1, 4)[0]
    at = [i for i in range(len(record.tokens) - 1) if record.tokens[i + 1] == "good"][0]
    top = set(np.argsort(-np.abs(reference.token_contributions(record)))[:2].tolist())
    assert top == {at, at + 1}, (record.tokens, top)


def test_saved_reference_is_json_and_safetensors_and_predicts_the_same(tmp_path):
    train, valid, test = reviews(120, 0), reviews(60, 1), reviews(60, 2)
    reference = fit_reference(train, valid, Classification(["neg", "pos"]))
    save_reference(tmp_path, reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([JSON, ARRAYS])
    json.loads((tmp_path / JSON).read_text())  # plain JSON, nothing to unpickle
    again = load_reference(tmp_path)
    assert again.predict(test) == reference.predict(test)
    assert again.setting == reference.setting


def test_scores_are_fitted_by_ridge_and_kept_in_the_unit_interval():
    rng = random.Random(0)
    docs = []
    for i in range(150):
        score = rng.random()
        docs.append(Record(str(i), ["great"] * int(10 * score) + ["bad"] * int(10 * (1 - score)) + ["beer"], score))
    reference = fit_reference(docs[:100], docs[100:], Regression())
    assert reference.kind == "ridge"
    predictions = np.array(reference.predict(docs[100:]))
    assert predictions.min() >= 0.0 and predictions.max() <= 1.0
    assert reference.valid["metric"] == "mse"
    assert reference.valid["value"] == min(row["mse"] for row in reference.tried)
    assert reference.valid["value"] < np.var([d.label for d in docs[100:]]) / 4


def test_a_damaged_reference_is_one_error_line(tmp_path):
    reference = fit_reference(reviews(40, 0), reviews(20, 1), Classification(["neg", "pos"]))
    save_reference(tmp_path, reference)
    (tmp_path / ARRAYS).write_bytes(b"not safetensors")
    with pytest.raises(UserError, match="unreadable full-text reference.*remove reference.json"):
        load_reference(tmp_path)
    assert load_reference(tmp_path / "elsewhere") is None


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "run"
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(out), "--epochs", "1", *SMALL])
    assert result.exit_code == 0, result.output
    assert "full-text reference (TF-IDF" in result.output and "this model" in result.output
    return out


def test_train_saves_the_reference_and_evaluate_reports_the_difference(demo_run, tmp_path):
    assert (demo_run / JSON).is_file() and (demo_run / ARRAYS).is_file()
    out = tmp_path / "m.json"
    result = CliRunner().invoke(app, ["evaluate", str(demo_run), "demo", "--no-faithfulness", "--json", str(out)])
    assert result.exit_code == 0, result.output
    metrics = json.loads(out.read_text())
    reference = metrics["full_text_reference"]
    assert reference["metric"] == "mse" and reference["model"] == metrics["mse"]
    assert reference["difference"] == pytest.approx(metrics["mse"] - reference["value"])
    assert 0 < reference["value"] < metrics["mse_of_mean"]
    assert "full-text reference" in result.output


def test_the_api_scores_the_reference_too(demo_run):
    model = rationale.load(demo_run)
    metrics = model.evaluate("demo", faithfulness=False)
    assert metrics["full_text_reference"]["value"] == pytest.approx(
        model.reference.score(sources.load("demo", "test"), model.task))


def test_no_reference_fits_none_and_replacing_a_run_removes_its_reference(demo_run, tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(out), "--epochs", "1", "--no-reference",
                                      *SMALL])
    assert result.exit_code == 0, result.output
    assert not (out / JSON).exists() and "full-text reference" not in result.output
    for name in (JSON, ARRAYS):
        (out / name).write_bytes((demo_run / name).read_bytes())
    again = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(out), "--epochs", "1", "--force",
                                     "--no-reference", *SMALL])
    assert again.exit_code == 0, again.output
    assert not (out / JSON).exists() and not (out / ARRAYS).exists()
    metrics = rationale.load(out).evaluate("demo", faithfulness=False)
    assert "full_text_reference" not in metrics


def noisy(n: int, negatives: int, seed: int) -> list[Record]:
    """Documents whose class shows in one word that is right two times in three, among filler."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = "neg" if i < negatives else "pos"
        cue = ("bad" if label == "neg" else "fine") if rng.random() < 2 / 3 else ("fine" if label == "neg" else "bad")
        out.append(Record(f"n{seed}-{i}", [rng.choice(FILLER) for _ in range(8)] + [cue], label))
    return out


def test_classes_weighted_for_balanced_epochs_predict_the_rare_class_as_often(tmp_path):
    """On training data of one negative in ten, the reference of a --balance-classes run weighs the
    classes equally: on balanced validation it predicts 'neg' for about half the documents,
    where the unweighted fit predicts the common class nearly always; it is saved as such."""
    train, valid, task = noisy(400, 40, 0), noisy(200, 100, 1), Classification(["neg", "pos"])
    plain, weighted = fit_reference(train, valid, task), fit_reference(train, valid, task, balanced=True)
    share = {name: np.mean([p == "neg" for p in ref.predict(valid)]) for name, ref in (("plain", plain),
                                                                                      ("weighted", weighted))}
    assert share["plain"] < 0.15 and 0.3 < share["weighted"] < 0.7
    assert weighted.valid["value"] > plain.valid["value"]
    assert "classes weighted" in weighted.setting and "classes weighted" not in plain.setting
    save_reference(tmp_path, weighted)
    assert load_reference(tmp_path).balanced and load_reference(tmp_path).setting == weighted.setting
