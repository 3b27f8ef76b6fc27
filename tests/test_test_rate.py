"""A test-time rate: decoding keeps each document's best-scored tokens at the size asked for."""

import json

import pytest
import torch
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.models.budget import Budget
from rationale_cli.models.decoding import Decoding
from rationale_cli.models.model import RationaleModel


def test_decode_holds_each_documents_share_of_its_best_scored_tokens():
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 1, encoder="cnn", extractor="hardkuma").eval()
    ids = torch.randint(2, 30, (2, 8))
    mask = torch.tensor([[1.0] * 8, [1.0] * 4 + [0.0] * 4])
    _, scores, _ = model.decode(ids, mask)
    z, same_scores, _ = model.decode(ids, mask, decoding=Decoding(rate=Budget(0.25)))
    assert z.sum(-1).tolist() == [2.0, 1.0]  # round(0.25 * 8), round(0.25 * 4)
    assert torch.equal(scores, same_scores)
    for row in range(2):
        chosen = z[row].nonzero().flatten()
        others = ((z[row] == 0) & (mask[row] > 0)).nonzero().flatten()
        assert scores[row, chosen].min() >= scores[row, others].max()
    assert model.decode(ids, mask, decoding=Decoding(rate=Budget(count=3)))[0].sum(-1).tolist() == [3.0, 3.0]
    assert torch.equal(model.decode(ids, mask)[0], model.decode(ids, mask)[0])  # nothing stays on the model


def test_a_sparse_support_is_never_filled_up_with_zero_scored_tokens():
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 1, encoder="cnn", extractor="topk-sparsemax").eval()
    ids, mask = torch.randint(2, 30, (3, 20)), torch.ones(3, 20)
    _, scores, _ = model.decode(ids, mask)
    z = model.decode(ids, mask, decoding=Decoding(rate=Budget(0.9)))[0]
    assert torch.equal(z, (scores > 0).float())  # a cap here: the support, not the first tokens


def test_evaluate_reports_the_rate_asked_for_and_the_rate_reached(tmp_path):
    runner = CliRunner()
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--data", "demo", "--out", str(run), "--epochs", "1", "--encoder", "cnn",
                                 "--embedding-dim", "8", "--hidden-size", "8"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["evaluate", str(run), "demo", "--rate", "0.2", "--no-faithfulness", "--json",
                                 str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["test_rate"] == 0.2 and abs(metrics["selection_rate"] - 0.2) < 0.02
    result = runner.invoke(app, ["evaluate", str(run), "demo", "--rate", "none"])
    assert result.exit_code == 2 and "--rate" in result.output
    full = tmp_path / "full"
    assert runner.invoke(app, ["train", "--data", "demo", "--out", str(full), "--epochs", "1", "--extractor", "full",
                               "--encoder", "cnn", "--embedding-dim", "8", "--hidden-size", "8"]).exit_code == 0
    result = runner.invoke(app, ["evaluate", str(full), "demo", "--rate", "0.2"])
    assert result.exit_code == 2 and "no best tokens" in result.output


@pytest.fixture(scope="module")
def attention_run(tmp_path_factory):
    """A small attention run on the demo corpus (its weights do not tie), trained once for the
    corpus-rate tests."""
    run = tmp_path_factory.mktemp("attention") / "run"
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(run), "--epochs", "1", "--encoder",
                                      "cnn", "--extractor", "attention", "--embedding-dim", "8", "--hidden-size", "8"])
    assert result.exit_code == 0, result.output
    return run


def test_a_corpus_rate_is_one_threshold_holding_the_share_over_all_documents(attention_run, tmp_path):
    runner = CliRunner()
    run = attention_run
    rows = {}
    for over in ("document", "corpus"):
        result = runner.invoke(app, ["evaluate", str(run), "demo", "--rate", "0.2", "--rate-over", over,
                                     "--no-faithfulness", "--json", str(tmp_path / f"{over}.json"),
                                     "--per-document", str(tmp_path / f"{over}.jsonl")])
        assert result.exit_code == 0, result.output
        rows[over] = [json.loads(line) for line in (tmp_path / f"{over}.jsonl").read_text().splitlines()]
    metrics = json.loads((tmp_path / "corpus.json").read_text())
    assert metrics["test_rate"] == 0.2 and metrics["test_rate_over"] == "corpus"
    tokens = sum(row["tokens"] for row in rows["corpus"])
    selected = sum(row["selected"] for row in rows["corpus"])
    assert selected == round(0.2 * tokens)  # attention weights do not tie
    assert abs(metrics["selection_rate"] - 0.2) <= 1 / tokens
    # each document at its own share of the threshold, not at round(0.2 x its length)
    assert any(row["selected"] != max(round(0.2 * row["tokens"]), 1) for row in rows["corpus"])
    assert all(row["selected"] == max(round(0.2 * row["tokens"]), 1) for row in rows["document"])
    result = runner.invoke(app, ["evaluate", str(run), "demo", "--rate", "10", "--rate-over", "corpus"])
    assert result.exit_code == 2 and "expected a share" in result.output
    result = runner.invoke(app, ["evaluate", str(run), "demo", "--rate-over", "corpus"])
    assert result.exit_code == 2 and "with --rate" in result.output


def test_predict_holds_a_share_over_the_whole_input_in_every_worker(attention_run, tmp_path):
    """``predict --rate 0.2 --rate-over corpus`` scores the input once to find the threshold,
    then writes rationales holding 20% of all its tokens, the same from worker processes;
    a shard, which sees part of the input, is refused, and so is an existing output, before
    the scoring pass."""
    runner = CliRunner()
    run = attention_run
    outputs = {}
    for workers in ("1", "2"):
        out = tmp_path / f"workers-{workers}.jsonl"
        result = runner.invoke(app, ["predict", str(run), "demo", "--rate", "0.2", "--rate-over", "corpus",
                                     "--workers", workers, "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert "keeps 20% of the input's tokens" in result.output
        outputs[workers] = out.read_text()
    assert outputs["1"] == outputs["2"]
    rows = [json.loads(line) for line in outputs["1"].splitlines()]
    tokens = sum(len(row["token_scores"]) for row in rows)
    assert sum(len(row["selected_tokens"]) for row in rows) == round(0.2 * tokens)
    assert len({len(row["selected_tokens"]) - round(0.2 * len(row["token_scores"])) for row in rows}) > 1
    result = runner.invoke(app, ["predict", str(run), "demo", "--rate", "0.2", "--rate-over", "corpus",
                                 "--shard", "0/2", "--out", str(tmp_path / "shard.jsonl")])
    assert result.exit_code == 2 and "a shard does not see" in result.output
    result = runner.invoke(app, ["predict", str(run), "demo", "--rate", "0.2", "--rate-over", "corpus",
                                 "--out", str(tmp_path / "workers-1.jsonl")])
    assert result.exit_code == 2 and "already exists" in result.output and "threshold" not in result.output
    assert (tmp_path / "workers-1.jsonl").read_text() == outputs["1"]


def test_evaluate_predict_and_explain_decode_with_a_transition_cost(tmp_path):
    runner = CliRunner()
    small = ["--epochs", "1", "--encoder", "cnn", "--embedding-dim", "8", "--hidden-size", "8"]
    run = tmp_path / "run"
    result = runner.invoke(app, ["train", "--data", "demo", "--out", str(run), "--extractor", "topk-sparsemax",
                                 "--budget", "0.3", *small])
    assert result.exit_code == 0, result.output
    scores = {}
    for name, extra in (("own", []), ("costly", ["--coherence", "0.5"])):
        result = runner.invoke(app, ["evaluate", str(run), "demo", "--no-faithfulness", *extra, "--json",
                                     str(tmp_path / f"{name}.json")])
        assert result.exit_code == 0, result.output
        scores[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert "test_coherence" not in scores["own"] and scores["costly"]["test_coherence"] == 0.5
    assert scores["costly"]["selection_rate"] > 0.2  # the same cap, filled with fewer, longer spans
    assert scores["costly"]["transitions"] < scores["own"]["transitions"] / 2
    written = {}
    for name, extra in (("own", []), ("costly-1", ["--coherence", "0.5"]), ("costly-2", ["--coherence", "0.5",
                                                                                        "--workers", "2"])):
        out = tmp_path / f"{name}.jsonl"
        result = runner.invoke(app, ["predict", str(run), "demo", *extra, "--out", str(out)])
        assert result.exit_code == 0, result.output
        written[name] = out.read_text()
    assert written["costly-1"] == written["costly-2"] != written["own"]  # worker processes decode alike

    def spans(text):
        return sum(len(json.loads(line)["rationale"]) for line in text.splitlines())

    assert spans(written["costly-1"]) < spans(written["own"]) / 2
    marks = {}
    for name, extra in (("own", []), ("costly", ["--coherence", "0.5"])):
        page = tmp_path / f"{name}.html"
        result = runner.invoke(app, ["explain", str(run), "--input", "demo", "--limit", "0", "--html", str(page),
                                     *extra])
        assert result.exit_code == 0, result.output
        marks[name] = page.read_text().count("<mark")
    assert 0 < marks["costly"] < marks["own"]  # explain draws the spans predict writes
    page = tmp_path / "rate.html"
    result = runner.invoke(app, ["explain", str(run), "--input", "demo", "--limit", "0", "--rate", "k=1", "--html",
                                 str(page)])
    assert result.exit_code == 0, result.output
    documents = page.read_text().split("<section", 1)[1]  # after the legend
    assert documents.count("<mark") == 300  # one token for each of the 300 documents
    result = runner.invoke(app, ["predict", str(run), "demo", "--coherence", "0.5", "--engine", "dask",
                                 "--out", str(tmp_path / "dask.parquet")])
    assert result.exit_code == 2 and "--coherence is not available with --engine dask" in result.output
    result = runner.invoke(app, ["evaluate", str(run), "demo", "--coherence", "-1"])
    assert result.exit_code == 2 and "expected a number >= 0" in result.output
    other = tmp_path / "hardkuma"
    assert runner.invoke(app, ["train", "--data", "demo", "--out", str(other), *small, "--budget", "0.6"]).exit_code == 0
    placed = {}
    for name, extra in (("own", []), ("costly", ["--coherence", "0.5"])):  # any extractor: its count, in runs
        result = runner.invoke(app, ["evaluate", str(other), "demo", *extra, "--json", str(tmp_path / f"{name}.json"),
                                     "--force"])  # over the file of the first run's evaluation
        assert result.exit_code == 0, result.output
        placed[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert placed["costly"]["selection_rate"] == pytest.approx(placed["own"]["selection_rate"])
    assert placed["costly"]["spans"] < placed["own"]["spans"]
    for name, extra in (("sentences", ["--sentences"]), ("corpus", ["--sentences", "--rate", "0.1", "--rate-over",
                                                                    "corpus"])):
        result = runner.invoke(app, ["evaluate", str(other), "demo", "--no-faithfulness", *extra, "--json",
                                     str(tmp_path / f"{name}.json")])
        assert result.exit_code == 0, result.output
        placed[name] = json.loads((tmp_path / f"{name}.json").read_text())
    # the demo's sentences end in '.': whole ones, at least as many tokens as decoded, one span per sentence run
    assert placed["sentences"]["test_sentences"] is True
    assert placed["sentences"]["selection_rate"] >= placed["own"]["selection_rate"]
    assert placed["sentences"]["spans"] < placed["own"]["spans"]
    assert placed["corpus"]["test_rate_over"] == "corpus" and placed["corpus"]["selection_rate"] >= 0.1
    out = tmp_path / "sentences.jsonl"
    assert runner.invoke(app, ["predict", str(other), "demo", "--sentences", "--out", str(out)]).exit_code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(row["selected_tokens"] for row in rows)
    for row in rows:  # whole sentences, one span each (adjacent ones apart): as many spans as '.'s
        assert not row["selected_tokens"] or row["selected_tokens"][-1] == "."
        assert len(row["rationale"]) == row["selected_tokens"].count(".")
    assert any(end == start for row in rows for (_, end), (start, _) in zip(row["rationale"], row["rationale"][1:]))
    for extra in (["--coherence", "0.5"], ["--engine", "dask"]):
        result = runner.invoke(app, ["predict", str(other), "demo", "--sentences", *extra, "--out",
                                     str(tmp_path / "refused.parquet")])
        assert result.exit_code == 2 and ("choose one" in result.output or "--sentences is not available"
                                          in result.output), result.output
