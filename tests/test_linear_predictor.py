"""``--predictor-encoder linear``: a TF-IDF n-gram linear model fitted in one pass on a fixed
support's rationales, whose outputs are scikit-learn's on the rationale's text."""

import json
import math
from collections import Counter

import numpy as np
import pytest
import torch
from helpers import trained_on_part_of_demo
from typer.testing import CliRunner

import rationale_cli as rationale
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.models.encoders.tfidf import CLIP, TfidfLinear
from rationale_cli.runs.task import Classification
from rationale_cli.training import linear_predictor
from rationale_cli.training.linear_predictor import TEXTS, WITH_FULL_TEXTS, fitted_rows


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def by_hand(ids: list[int], gate: list[int], bigrams: dict[tuple[int, int], int], vocab_size: int,
            idf: np.ndarray) -> np.ndarray:
    """The row's TF-IDF vector counted in Python: the selected words (not padding or <unk>), the
    adjacent selected pairs found in ``bigrams``, 1 + log count, times idf, L2-normalised."""
    counts = Counter(w for w, g in zip(ids, gate) if g and w >= 2)
    counts.update(vocab_size + bigrams[(a, b)] for a, b, ga, gb in zip(ids, ids[1:], gate, gate[1:])
                  if ga and gb and (a, b) in bigrams)
    row = np.zeros(len(idf))
    for feature, n in counts.items():
        row[feature] = (1 + math.log(n)) * idf[feature]
    norm = np.linalg.norm(row)
    return row / norm if norm else row


@pytest.mark.parametrize("outputs", [1, 3])
def test_the_outputs_are_the_linear_model_on_the_rationale_s_tfidf_counted_by_hand(outputs):
    """Every row of random ids under random hard gates: W x + b for the TF-IDF vector counted by
    hand (bigrams only inside the rationale and in the table; an empty rationale gives the bias),
    and for one output (a score) the logit of that value clipped to [0.001, 0.999]."""
    generator = torch.Generator().manual_seed(0)
    V, B, T = 12, 6, 15
    ids = torch.randint(0, V, (B, T), generator=generator)
    gate = (torch.rand(B, T, generator=generator) < 0.6).long()
    gate[0] = 0  # an empty rationale
    pairs = sorted({(a, b) for a in range(2, V) for b in range(2, V) if (a + 2 * b) % 3 == 0})
    encoder = TfidfLinear(V, outputs)
    keys = torch.tensor([a * V + b for a, b in pairs])
    idf = torch.rand(V + len(pairs), generator=generator) + 1
    weight = torch.randn(outputs, V + len(pairs), generator=generator) * (0.3 if outputs == 1 else 2)
    bias = torch.randn(outputs, generator=generator) * 0.1 + (0.5 if outputs == 1 else 0)
    encoder.fill(keys, idf, weight, bias)
    got = encoder.summary(ids, gate)
    table = {pair: i for i, pair in enumerate(pairs)}
    for row in range(B):
        x = by_hand(ids[row].tolist(), gate[row].tolist(), table, V, idf.double().numpy())
        value = weight.double().numpy() @ x + bias.double().numpy()
        if outputs == 1:
            value = np.log(np.clip(value, CLIP, 1 - CLIP) / (1 - np.clip(value, CLIP, 1 - CLIP)))
        assert got[row].tolist() == pytest.approx(value.tolist(), rel=1e-4, abs=1e-4)
    assert got[0].tolist() == pytest.approx(bias.tolist() if outputs > 1 else
                                            [math.log(bias.item() / (1 - bias.item()))], abs=1e-5)


@pytest.mark.parametrize("classes", [2, 3])
def test_a_fitted_logistic_regression_s_probabilities_are_the_encoder_s(classes):
    """scikit-learn's rows into the encoder (a two-class model's one row as the second class's
    logit): the softmax of its outputs is ``predict_proba`` on the same TF-IDF rows."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    V = 9
    ids = torch.from_numpy(rng.integers(2, V, (40, 8)))
    gate = torch.ones_like(ids)
    encoder = TfidfLinear(V, classes)
    idf = torch.ones(V, dtype=torch.float64)
    x = np.stack([by_hand(r, [1] * 8, {}, V, idf.numpy()) for r in ids.tolist()])
    y = rng.integers(0, classes, 40)
    fitted = LogisticRegression(C=10.0).fit(x, y)
    task = Classification([str(c) for c in range(classes)])
    encoder.fill(torch.zeros(0, dtype=torch.long), idf, *map(torch.from_numpy, fitted_rows(fitted, task)))
    probabilities = torch.softmax(encoder.summary(ids, gate), -1).numpy()
    assert probabilities == pytest.approx(fitted.predict_proba(x), abs=1e-5)


@pytest.fixture(scope="module")
def linear_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("linear")
    trained_on_part_of_demo(root / "run", support="reference", support_sentences=True, budget=0.3,
                            predictor_encoder="linear")
    return root / "run"


@pytest.fixture(scope="module", params=TEXTS)
def fitted_on(request, tmp_path_factory):
    """A linear run fitted on ``request.param`` alone (the grid's other texts left out)."""
    root = tmp_path_factory.mktemp("texts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(linear_predictor, "TEXTS", (request.param,))
        trained_on_part_of_demo(root / "run", support="reference", support_sentences=True, budget=0.3,
                                predictor_encoder="linear")
    return root / "run", request.param


def test_the_fit_is_the_grid_s_best_on_validation_and_reloads_as_fitted(linear_run):
    """One epoch whose row names the chosen setting and every setting's validation mse; the run
    reloaded from its files (the tables sized from its weights) scores that mse on the
    validation documents, and nothing of it is trainable."""
    metrics = json.loads((linear_run / "metrics.json").read_text())
    row = metrics["history"][0]
    assert len(metrics["history"]) == 1 and row["predictor"].startswith("TF-IDF")
    assert [(t["fitted_on"], t["longest_ngram"], t["alpha"]) for t in row["tried"]] == [
        (t, n, a) for t in TEXTS for n in (1, 2) for a in (0.1, 0.3, 1.0, 3.0)]
    best = min(t["mse"] for t in row["tried"])
    assert metrics["valid"]["mse"] == pytest.approx(best, rel=1e-4)
    run = rationale.load(linear_run)
    assert not any(p.requires_grad for p in run.model.parameters())
    valid = sources.load("demo", "valid")[:80]
    assert run.evaluate(valid)["mse"] == pytest.approx(best, rel=1e-4)


def test_predictions_are_ridge_regression_on_the_rationale_s_text(fitted_on):
    """scikit-learn's own vectorizer and ridge regression, fitted with the chosen setting on the
    training rationales' text (the selected words and the bigrams inside the selection), and with
    the full texts, on those and the full texts' words and the same bigrams, predict what the run
    predicts on new documents."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge

    path, texts = fitted_on
    run = rationale.load(path)
    setting = json.loads((path / "metrics.json").read_text())["history"][0]["predictor"]
    assert setting.endswith(f", fitted on {texts}")
    longest = 2 if "1-2-grams" in setting else 1
    alpha = float(setting.split("alpha=")[1].split(",")[0])

    def grams(words_and_gate):
        words, gate = words_and_gate
        out = [w.lower() for w, g in zip(words, gate) if g]
        if longest == 2:
            out += [f"{a.lower()} {b.lower()}" for a, b, ga, gb in zip(words, words[1:], gate, gate[1:]) if ga and gb]
        return out

    def rationales(records):
        return [(r.tokens, out.selected) for r, out in zip(records, run.predict(records))]

    train, test = sources.load("demo", "train")[:400], sources.load("demo", "test")[:60]
    docs, labels = rationales(train), [r.label for r in train]
    vocabulary = {g for doc in docs for g in grams(doc)}
    if texts == WITH_FULL_TEXTS:  # the full texts' words join, their bigrams do not
        full = [(r.tokens, [1] * len(r.tokens)) for r in train]
        vocabulary |= {w for doc in full for w in grams(doc) if " " not in w}
        docs, labels = docs + full, labels * 2
    vectorizer = TfidfVectorizer(analyzer=grams, sublinear_tf=True, vocabulary=sorted(vocabulary))
    ridge = Ridge(alpha=alpha).fit(vectorizer.fit_transform(docs), labels)
    expected = np.clip(ridge.predict(vectorizer.transform(rationales(test))), CLIP, 1 - CLIP)
    got = [out.prediction for out in run.predict(test)]
    assert got == pytest.approx(expected.tolist(), abs=1e-4)


@pytest.mark.parametrize("options, line", [
    (["--predictor-encoder", "linear", "--no-reference"], "train without --no-reference"),
    (["--predictor-encoder", "linear", "--guidance", "1"], "the full-text reference, fixed"),
    (["--support", "reference", "--predictor-encoder", "linear", "--guidance", "1"], "fitted in one pass"),
    (["--support", "reference", "--predictor-encoder", "linear", "--balance-classes"], "--balance-classes trains"),
    (["--selector-encoder", "linear"], "linear"),
])
def test_the_linear_predictor_refuses_what_it_cannot_do(tmp_path, options, line):
    result = invoke("train", "--data", "demo", "--out", tmp_path / "run", *options)
    assert result.exit_code != 0 and line in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run" / "config.json").exists()


def test_a_linear_run_has_nothing_to_resume(linear_run, tmp_path):
    result = invoke("train", "--resume", "--out", linear_run)
    assert result.exit_code != 0 and "nothing to resume" in result.output and "Traceback" not in result.output
    assert (linear_run / "metrics.json").exists()


def test_tune_searches_only_what_changes_a_linear_run(tmp_path):
    """The training options change nothing in a fitted predictor: tune drops them, with a note,
    keeps the support's options a search-space file gives, and with nothing left is one error line."""
    from rationale_cli.tuning.job import plan_study

    options = {"data": "demo", "support": "reference", "predictor_encoder": "linear", "budget": 0.3}
    space = tmp_path / "space.toml"
    space.write_text("window = [1, 3]\ndropout = [0.1, 0.2]\n")
    notes = []
    plan = plan_study(options, space_file=space, note=notes.append)
    assert plan.space.names() == ["window"]
    assert any("--dropout" in line and "fitted, not trained" in line for line in notes)
    result = invoke("tune", "--data", "demo", "--support", "reference", "--predictor-encoder", "linear",
                    "--trials", "2", "--out", tmp_path / "study")
    assert result.exit_code != 0 and "nothing to search" in result.output and "Traceback" not in result.output


def test_the_report_names_the_fitted_predictor(linear_run, tmp_path):
    result = invoke("report", linear_run, "--out", tmp_path / "report.html")
    assert result.exit_code == 0, result.output
    assert "linear predictor fitted: TF-IDF" in (tmp_path / "report.html").read_text()
