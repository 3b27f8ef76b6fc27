"""Long documents and large batches in bounded memory, and stops that come within seconds: a
document longer than the model reads is one error line, no batch holds more than its bound
whatever ``--batch-size``, a long text is tokenized in pieces (the same tokens), and a signal
stops ``predict`` in the middle of a window (:mod:`rationale_cli.runtime.signals`)."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from rationale_cli.annotation.engine import partial_path, state_path
from rationale_cli.cli import app
from rationale_cli.data import batching, tokenize
from rationale_cli.data.batching import capped_batches, length_batches, model_length
from rationale_cli.data.records import Record
from rationale_cli.models.budget import Budget
from rationale_cli.runtime.atomic import open_descriptor

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--no-reference", "--epochs", "1", "--embedding-dim", "8", "--hidden-size", "8"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def records_of(lengths):
    return [Record(id=str(i), tokens=["w"] * n) for i, n in enumerate(lengths)]


def test_a_long_text_is_tokenized_as_a_fresh_tokenizer_tokenizes_it_whole(monkeypatch):
    """Runs are tokenized alone and kept (at most RUNS_KEPT: the kept runs are dropped when
    full, a text's own new runs kept whatever their number): the whole text's tokens."""
    import spacy

    rng = random.Random(0)
    words = ["beer", "head,", "(white)", "don't", "U.S.", "!!", "  ", "\n", "x" * 40, ":p", "c'mon)"]
    text = " ".join(rng.choice(words) for _ in range(3000))
    fresh = spacy.blank("en").tokenizer(text)
    expected = ([t.text for t in fresh if not t.is_space], [(t.idx, t.idx + len(t)) for t in fresh if not t.is_space])
    monkeypatch.setattr(tokenize, "_runs", {})  # both restored after: the kept runs and their split ones agree
    monkeypatch.setattr(tokenize, "_split", set())
    monkeypatch.setattr(tokenize, "RUNS_KEPT", 4)
    assert tokenize.tokenize(text) == expected
    assert tokenize.tokenize(text) == expected
    assert tokenize.tokenize("beer") == (["beer"], [(0, 4)]) and len(tokenize._runs) <= 12
    monkeypatch.setattr(tokenize, "RUNS_KEPT", 2)  # kept runs emptied while a text's others are looked up
    assert tokenize.tokenize("a b")[0] == ["a", "b"] and tokenize.tokenize("a c!")[0] == ["a", "c", "!"]


def test_no_batch_holds_more_than_its_bound_whatever_the_batch_size(monkeypatch):
    monkeypatch.setattr(batching, "MAX_DOCUMENT_TOKENS", 1000)
    records = records_of([300, 200, 900, 5, 5, 5, 1000] * 5)
    for batch in capped_batches(records, 10**9):
        assert len(batch) * max(model_length(r) for r in batch) <= 1000
    assert sum(len(b) for b in capped_batches(records, 10**9)) == len(records)


def test_training_batches_are_cut_only_where_they_exceed_the_bound():
    records = records_of([random.Random(i).randrange(1, 400) for i in range(500)])
    plain = list(length_batches(records, 16, rng=random.Random(3)))
    bounded = list(length_batches(records, 16, rng=random.Random(3), budget=10**6))
    assert [[r.id for r in b] for b in plain] == [[r.id for r in b] for b in bounded]
    cut = list(length_batches(records, 16, rng=random.Random(3), budget=1200))
    assert all(len(b) * max(model_length(r) for r in b) <= 1200 for b in cut)
    assert sorted(r.id for b in cut for r in b) == sorted(r.id for r in records) and len(cut) > len(plain)


def test_an_extractors_tables_bound_its_training_batches(monkeypatch):
    """Top-k sparsemax keeps a table of length x budget x K entries per document, 8 bytes each: a
    batch holds at most MAX_TABLE_BYTES of it, padded (a document over it alone), and nothing else moves."""
    from rationale_cli.models.model import RationaleModel

    model = RationaleModel(100, 8, 8, 2, encoder="cnn", extractor="topk-sparsemax",
                           extractor_options={"budget": "0.2", "top_masks": 4})
    assert model.table_bytes(50) == 8 * 50 * 10 * 4 and model.table_bytes(7) == 8 * 7 * 1 * 4  # at least a token
    assert RationaleModel(100, 8, 8, 2, encoder="cnn", extractor="hardkuma").table_bytes(10**4) == 0
    monkeypatch.setattr(batching, "MAX_TABLE_BYTES", 400_000)
    records = records_of([random.Random(i).randrange(1, 400) for i in range(300)])
    cut = list(length_batches(records, 64, rng=random.Random(3), tables=model.table_bytes))
    widest = [max(model_length(r) for r in b) for b in cut]
    assert all(len(b) == 1 or len(b) * model.table_bytes(w) <= 400_000 for b, w in zip(cut, widest))
    assert sorted(r.id for b in cut for r in b) == sorted(r.id for r in records)
    assert any(len(b) == 1 and model.table_bytes(w) > 400_000 for b, w in zip(cut, widest))  # alone
    assert batching.documents_per_batch(100, model.table_bytes) == 400_000 // 64_000
    for budget in (Budget(0.2), Budget(0.13), Budget(count=7)):  # one document's count, as the tensors give it
        assert [budget.tokens_of(n) for n in range(40)] == [int(budget.tokens(torch.ones(1, n))[0]) for n in range(40)]
    free = list(length_batches(records, 64, rng=random.Random(3), tables=lambda length: 0))
    assert [[r.id for r in b] for b in free] == [[r.id for r in b] for b in length_batches(
        records, 64, rng=random.Random(3))]


def test_training_says_when_the_tables_hold_batches_under_the_batch_size(monkeypatch, tmp_path):
    monkeypatch.setattr(batching, "MAX_TABLE_BYTES", 200_000)
    result = invoke("train", "--data", "demo", "--out", tmp_path / "run", "--extractor", "topk-sparsemax",
                    "--encoder", "cnn", "--batch-size", "32", *SMALL)
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("long documents"))
    assert "topk-sparsemax" in line and "under --batch-size 32" in line
    plain = invoke("train", "--data", "demo", "--out", tmp_path / "plain", "--extractor", "hardkuma",
                   "--encoder", "cnn", *SMALL)
    assert plain.exit_code == 0 and "long documents" not in plain.output


def test_a_document_longer_than_the_model_reads_is_one_line_and_no_output(monkeypatch, tmp_path):
    monkeypatch.setattr(batching, "MAX_DOCUMENT_TOKENS", 50)
    data = tmp_path / "train.jsonl"
    lines = [{"tokens": ["good"] * 5, "label": "pos"}, {"tokens": ["bad"] * 5, "label": "neg"}] * 10
    data.write_text("".join(json.dumps(line) + "\n" for line in lines) + json.dumps(
        {"tokens": ["good"] * 51, "label": "pos"}) + "\n")
    result = invoke("train", "--data", data, "--out", tmp_path / "run", "--encoder", "cnn", *SMALL)
    assert result.exit_code == 2, result.output
    assert f"{data}:21: a document of 51 tokens; at most 50 are read" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def cnn_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "cnn"
    assert invoke("train", "--data", "demo", "--out", out, "--encoder", "cnn", *SMALL).exit_code == 0
    return out


def test_predict_refuses_a_file_without_line_breaks_in_one_line(cnn_run, tmp_path, monkeypatch):
    monkeypatch.setattr(batching, "MAX_DOCUMENT_TOKENS", 500)
    source = tmp_path / "one_line.txt"
    source.write_text("the head is white . " * 200 + "\n")
    out = tmp_path / "p.jsonl"
    result = invoke("predict", cnn_run, source, "--out", out)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert f"{source}:1: a document of 1,000 tokens; at most 500 are read" in result.output
    assert not out.exists() and not partial_path(out).exists() and not state_path(out).exists()


def test_an_open_descriptor_is_written_through_never_replaced(cnn_run, tmp_path):
    assert open_descriptor("/dev/stdout") and open_descriptor("/proc/self/fd/1")
    assert not open_descriptor(tmp_path / "file.jsonl")
    source = tmp_path / "reviews.txt"
    source.write_text("the head is white .\nthe taste is bitter .\n")
    kept = tmp_path / "kept.jsonl"
    kept.write_text("the user's line\n")
    command = (f"{sys.executable} -m rationale_cli predict {cnn_run} {source} --out /dev/stdout --force "
               f">> {kept}")
    done = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = kept.read_text().splitlines()
    assert lines[0] == "the user's line" and [json.loads(line)["id"] for line in lines[1:]] == ["1", "2"]


@pytest.mark.slow
def test_sigterm_stops_predict_within_seconds_in_a_long_document(tmp_path):
    """An RCNN over documents of 60,000 tokens, each a batch of its own (a fraction of a second
    to a few seconds, by the machine): SIGTERM in the middle of the corpus stops the command
    within 5 seconds, continuable."""
    run = tmp_path / "rcnn"
    assert invoke("train", "--data", "demo", "--out", run, "--encoder", "rcnn", *SMALL).exit_code == 0
    source = tmp_path / "long.jsonl"
    source.write_text("".join(json.dumps({"tokens": ["the", "head", "is", "white", "."] * 12000}) + "\n"
                              for _ in range(60)))
    out = tmp_path / "p.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "rationale_cli", "predict", str(run), str(source), "--out",
                                str(out), "--window", "2", "--threads", "1"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not partial_path(out).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)  # the partial output is opened once the signal handlers are in place
    time.sleep(2)  # in the middle of a batch
    assert process.poll() is None, "finished before it could be stopped"
    process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    _, err = process.communicate(timeout=60)
    assert time.monotonic() - signalled < 5, err
    assert process.returncode == 128 + signal.SIGTERM and "stopped by SIGTERM" in err and "Traceback" not in err
    assert not out.exists() and partial_path(out).exists()
