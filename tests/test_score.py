"""`rationale score`, ERASER results output, ERASER folders with queries, docs.jsonl and
splits, and the bad prediction files a user can hand in."""

import json
import random

import pytest
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.data.readers import read_records
from rationale_cli.runtime.errors import UserError
from tests.helpers import write

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def evidence(docid, start, end):
    return {"docid": docid, "start_token": start, "end_token": end, "start_sentence": -1, "end_sentence": -1}


def make_eraser(root, n=40, seed=0, docs_jsonl=False, query=None):
    """A small sentiment dataset in ERASER's layout: the gold rationale is the opinion word."""
    rng = random.Random(seed)
    filler = "the film has a plot and some actors in it".split()
    docs, splits = {}, {"train": [], "val": [], "test": []}
    for i in range(n):
        label = "POS" if i % 2 else "NEG"
        words = rng.sample(filler, 6)
        at = rng.randrange(len(words) + 1)
        words.insert(at, rng.choice(["good", "great"] if label == "POS" else ["bad", "awful"]))
        docid = f"{label.lower()}_{i:03d}.txt"
        docs[docid] = " ".join(words)
        split = "train" if i < n * 0.6 else "val" if i < n * 0.8 else "test"
        line = {"annotation_id": docid, "classification": label, "docids": None,
                "evidences": [[evidence(docid, at, at + 1)]], "query": query or "What is the sentiment?"}
        splits[split].append(json.dumps(line))
    if docs_jsonl:
        write(root / "docs.jsonl", "".join(json.dumps({"docid": d, "document": t}) + "\n" for d, t in docs.items()))
    else:
        for docid, text in docs.items():
            write(root / "docs" / docid, text + "\n")
    for split, lines in splits.items():
        write(root / f"{split}.jsonl", "\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    base = tmp_path_factory.mktemp("eraser")
    data = make_eraser(base / "data")
    run = base / "run"
    result = invoke("train", "--data", data, "--out", run, "--extractor", "hardkuma", "--encoder", "cnn",
                    "--epochs", 2, "--embedding-dim", 8, "--hidden-size", 8, "--batch-size", 8, "--seed", 0)
    assert result.exit_code == 0, result.output
    return data, run


def close(a, b, path=""):
    """Equal JSON trees, numbers to 1e-6."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            close(a[key], b[key], f"{path}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and b is not None:
        assert a == pytest.approx(b, abs=1e-6), path
    else:
        assert a == b, path


def test_score_of_eraser_results_equals_evaluate(trained, tmp_path):
    data, run = trained
    results = tmp_path / "results.jsonl"
    result = invoke("predict", run, data, "--out", results, "--output-format", "eraser")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(lines) == 8 and all(line["rationales"][0]["docid"] == line["annotation_id"] for line in lines)
    assert {len(line["thresholded_scores"]) for line in lines} == {5}
    assert invoke("evaluate", run, data, "--json", tmp_path / "eval.json").exit_code == 0
    result = invoke("score", results, data, "--json", tmp_path / "score.json", "--per-document", tmp_path / "d.jsonl")
    assert result.exit_code == 0, result.output
    evaluated = json.loads((tmp_path / "eval.json").read_text())
    scored = json.loads((tmp_path / "score.json").read_text())
    close(evaluated["eraser"], scored["eraser"])
    for key in ("precision", "recall", "f1", "accuracy", "selection_rate", "gold_share", "majority_accuracy"):
        assert evaluated[key] == pytest.approx(scored[key]), key
    assert set(evaluated["eraser"]) == {"iou_scores", "rationale_prf", "token_prf", "token_soft_metrics",
                                        "classification_scores"}
    assert evaluated["eraser"]["classification_scores"]["comprehensiveness_aopc"] is not None
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and {"precision", "iou_f1", "comprehensiveness"} <= set(rows[0])


def test_score_of_predict_jsonl(trained, tmp_path):
    data, run = trained
    out = tmp_path / "pred.jsonl"
    assert invoke("predict", run, data, "--out", out).exit_code == 0
    result = invoke("score", out, data, "--json", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    scored = json.loads((tmp_path / "s.json").read_text())
    assert scored["documents"] == 8 and "token_soft_metrics" in scored["eraser"]
    assert "comprehensiveness" not in scored["eraser"]["classification_scores"] or \
        scored["eraser"]["classification_scores"]["comprehensiveness"] is None


def test_score_hand_made_results(tmp_path):
    data = make_eraser(tmp_path / "data", n=10, docs_jsonl=True)
    gold = read_records(data, split="test")
    lines = []
    for record in gold:
        (start, end), = record.rationale
        # one exact hit and one miss for every document
        spans = [{"start_token": start, "end_token": end}, {"start_token": 0 if start else 1, "end_token": 1 if start
                                                           else 2}]
        lines.append({"annotation_id": record.id, "rationales": [{"docid": record.docid,
                                                                  "hard_rationale_predictions": spans}],
                      "classification": record.label, "classification_scores": {record.label: 1.0}})
    results = write(tmp_path / "r.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    result = invoke("score", results, data, "--json", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    scored = json.loads((tmp_path / "s.json").read_text())["eraser"]
    assert scored["token_prf"]["instance_micro"]["p"] == 0.5 and scored["token_prf"]["instance_micro"]["r"] == 1.0
    assert scored["iou_scores"][0]["micro"]["p"] == 0.5 and scored["rationale_prf"]["instance_micro"]["r"] == 1.0
    assert scored["classification_scores"]["accuracy"] == 1.0
    assert "token_soft_metrics" not in scored


def bad_results(tmp_path, mutate):
    data = make_eraser(tmp_path / "data", n=10)
    lines = []
    for record in read_records(data, split="test"):
        lines.append({"annotation_id": record.id, "rationales": [{
            "docid": record.docid, "hard_rationale_predictions": [{"start_token": 0, "end_token": 2}]}]})
    mutate(lines)
    return data, write(tmp_path / "r.jsonl", "".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.parametrize("mutate, fragment", [
    (lambda lines: lines.pop(), "without a prediction"),
    (lambda lines: lines[0].update(annotation_id="elsewhere.txt"), "ids not in the gold"),
    (lambda lines: lines[1]["rationales"][0]["hard_rationale_predictions"].append(
        {"start_token": 5, "end_token": 99}), "goes past the end"),
    (lambda lines: lines[0].pop("rationales"), "no 'rationales'"),
    (lambda lines: lines[1]["rationales"][0].pop("hard_rationale_predictions"), "on every line or on none"),
    (lambda lines: lines.append(dict(lines[0])), "again"),
    (lambda lines: lines[0]["rationales"][0]["hard_rationale_predictions"].append(
        {"start_token": 1, "end_token": 3}), "overlap"),
    (lambda lines: [line["rationales"][0].update(soft_rationale_predictions=[float("nan")] * 9) for line in lines],
     "finite numbers"),
    (lambda lines: [line.update(classification="NEG", classification_scores={"NEG": 0.6, "POS": 0.4},
                                comprehensiveness_classification_scores={"NEG": 0.5}) for line in lines],
     "has classes"),
    (lambda lines: [line.update(classification="NEG", classification_scores={"NEG": 0.6, "POS": 0.4},
                                thresholded_scores=[{"threshold": t, "comprehensiveness_classification_scores":
                                                     {"NEG": 0.5, "POS": 0.5}, "sufficiency_classification_scores":
                                                     {"NEG": 0.5, "POS": 0.5}} for t in ((0.1, 0.5) if i else (0.1,))])
                     for i, line in enumerate(lines)], "AOPC thresholds"),
])
def test_bad_prediction_files(tmp_path, mutate, fragment):
    data, results = bad_results(tmp_path, mutate)
    result = invoke("score", results, data)
    assert result.exit_code == 2
    assert fragment in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 3  # one line, wrapped at most


def test_duplicate_gold_ids_and_class_predictions_without_probabilities(tmp_path):
    gold = write(tmp_path / "gold.jsonl", '{"id": "a", "tokens": ["x", "y"], "label": "P", "rationale": [[0, 1]]}\n' * 2)
    preds = write(tmp_path / "p.jsonl", '{"id": "a", "prediction": "P", "rationale": [[0, 1]]}\n')
    result = invoke("score", preds, gold)
    assert result.exit_code == 2 and "needs its 'probabilities'" in result.output
    preds = write(tmp_path / "p.jsonl", '{"id": "a", "prediction": "P", "probabilities": {"P": 1.0}, '
                                         '"rationale": [[0, 1]]}\n')
    result = invoke("score", preds, gold)
    assert result.exit_code == 2 and "again in the gold" in result.output
    gold = write(tmp_path / "gold.jsonl", '{"id": "a", "tokens": ["x", "y"], "label": "P", "rationale": [[0, 1]]}\n')
    preds = write(tmp_path / "p.jsonl", '{"id": "a", "prediction": 0.7, "rationale": [[0, 1]]}\n')
    result = invoke("score", preds, gold)
    assert result.exit_code == 2 and "the predictions are scores but the gold holds class labels" in result.output


def test_first_line_without_hard_predictions_does_not_hide_the_rest(tmp_path):
    """The official scorer looks only at the first line to decide whether there are hard
    predictions; here an empty list on the first line is an empty selection."""
    def first_empty(lines):
        lines[0]["rationales"][0]["hard_rationale_predictions"] = []
    data, results = bad_results(tmp_path, first_empty)
    assert invoke("score", results, data, "--json", tmp_path / "s.json").exit_code == 0
    scored = json.loads((tmp_path / "s.json").read_text())
    assert scored["eraser"]["token_prf"]["instance_micro"]["p"] is not None


def test_eraser_reader_query_docs_jsonl_and_split(tmp_path):
    data = make_eraser(tmp_path / "data", n=10, docs_jsonl=True, query="is it good ?")
    val = read_records(data, split="val")
    assert len(val) == 2 and val[0].query == ["is", "it", "good", "?"] and val[0].docid == val[0].id
    assert val[0].evidence == val[0].rationale


@pytest.mark.parametrize("docs_jsonl", [False, True])
def test_eraser_lines_are_the_documents_sentences(tmp_path, docs_jsonl):
    data = make_eraser(tmp_path / "data", n=5, docs_jsonl=docs_jsonl)
    if docs_jsonl:
        others = (data / "docs.jsonl").read_text().splitlines()[1:]
        write(data / "docs.jsonl", "\n".join([json.dumps({"docid": "neg_000.txt", "document": "a b\nc d e\nf"}),
                                              *others]) + "\n")
    else:
        write(data / "docs" / "neg_000.txt", "a b \n\n  c  d e\nf\n")  # blank lines and doubled spaces
    record = read_records(data, split="train")[0]
    assert record.tokens == list("abcdef") and record.sentences == [(0, 2), (2, 5), (5, 6)]


def test_several_documents_per_annotation_are_refused(tmp_path):
    data = make_eraser(tmp_path / "data", n=10)
    line = {"annotation_id": "pair", "classification": "POS", "docids": ["neg_000.txt", "pos_001.txt"],
            "evidences": [[evidence("neg_000.txt", 0, 1)]]}
    write(data / "test.jsonl", json.dumps(line) + "\n")
    with pytest.raises(UserError, match="several documents"):
        read_records(data, split="test")


def test_query_runs_train_and_evaluate_on_a_split(tmp_path):
    data = make_eraser(tmp_path / "data", n=20, query="is it good ?")
    run = tmp_path / "run"
    result = invoke("train", "--data", data, "--out", run, "--extractor", "hardkuma", "--encoder", "cnn", "--epochs",
                    1, "--embedding-dim", 8, "--hidden-size", 8)
    assert result.exit_code == 0, result.output
    assert json.loads((run / "config.json").read_text())["query"] is True
    assert "[sep]" in json.loads((run / "vocab.json").read_text())["itos"]  # lower-cased like every word
    result = invoke("evaluate", run, data, "--split", "val", "--json", tmp_path / "m.json", "--no-faithfulness")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "m.json").read_text())["documents"] == 4
    assert invoke("evaluate", run, data, "--split", "dev").exit_code == 2
