"""Decoding is an argument: the same loaded model decodes at a rate, a threshold or a transition
cost when asked, and its own way otherwise; nothing is left on the model between calls."""

import pytest
import torch

import rationale_cli as rationale
from rationale_cli.annotation.engine import Job
from rationale_cli.annotation.windows import annotate_window
from rationale_cli.data import sources
from rationale_cli.models.budget import Budget
from rationale_cli.models.decoding import Decoding
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.run_directory import load_run

SMALL = dict(encoder="cnn", embedding_dim=16, hidden_size=16, batch_size=50, epochs=1, seed=0, reference=False)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("decoding") / "run"
    rationale.train("demo", out=out, extractor="sparsemap", **SMALL)
    return out


def test_a_decoding_holds_for_its_call_only():
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 1, encoder="cnn", extractor="hardkuma").eval()
    ids, mask = torch.randint(2, 30, (2, 8)), torch.ones(2, 8)
    own = model.decode(ids, mask)[0]
    assert model.decode(ids, mask, decoding=Decoding(rate=0.25))[0].sum(-1).tolist() == [2.0, 2.0]
    assert torch.equal(model.decode(ids, mask)[0], own)
    assert not any(name.startswith("test_") for name in vars(model))


def test_decoding_settings_are_checked():
    assert Decoding(rate="k=3").rate == Budget(count=3) and Decoding(rate=0.2).rate == Budget(0.2)
    with pytest.raises(ValueError, match="not both"):
        Decoding(rate=0.2, threshold=0.5)
    with pytest.raises(ValueError, match=">= 0"):
        Decoding(coherence=-1.0)


@pytest.mark.parametrize("extractor", ["hardkuma", "bernoulli", "simple", "attention"])
def test_a_transition_cost_places_each_documents_count_in_runs(extractor):
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 1, encoder="cnn", extractor=extractor).eval()
    ids, mask = torch.randint(2, 30, (6, 40)), torch.ones(6, 40)
    mask[2, 25:] = 0
    runs = lambda z: int(((z[:, 1:] > 0) & (z[:, :-1] == 0)).sum() + (z[:, 0] > 0).sum())  # noqa: E731
    own, _, _ = model.decode(ids, mask, decoding=Decoding(rate=0.3))
    placed, _, _ = model.decode(ids, mask, decoding=Decoding(rate=0.3, coherence=1.0))
    assert torch.equal(placed.sum(-1), (own > 0).float().sum(-1)) and placed[2, 25:].sum() == 0
    assert runs(placed) < runs(own)
    free, _, _ = model.decode(ids, mask, decoding=Decoding(rate=0.3, coherence=0.0))
    assert torch.equal(free, (own > 0).float())  # no cost: the same best-scored tokens


@pytest.mark.parametrize("extractor", ["hardkuma", "sparsemap"])
def test_sentences_take_each_documents_count_in_whole_sentences(extractor):
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 1, encoder="cnn", extractor=extractor).eval()
    ids, mask = torch.randint(2, 30, (4, 24)), torch.ones(4, 24)
    mask[1, 17:] = 0
    sentences = torch.arange(24).div(6, rounding_mode="floor").expand(4, 24)  # four sentences of 6
    with pytest.raises(ValueError, match="sentence index"):
        model.decode(ids, mask, decoding=Decoding(sentences=True))
    own, _, _ = model.decode(ids, mask, decoding=Decoding(rate=0.3))
    placed, _, outputs = model.decode(ids, mask, decoding=Decoding(rate=0.3, sentences=True), sentences=sentences)
    for row in range(4):
        for start in range(0, 24, 6):
            real = mask[row, start:start + 6] > 0
            assert placed[row, start:start + 6][real].unique().numel() <= 1  # a sentence whole or not at all
    counts, held = (own > 0).float().sum(-1), placed.sum(-1)
    assert bool((held >= counts).all() and (held - 6 < counts).all()) and placed[1, 17:].sum() == 0
    read = model.predict_masked(model.embedded(ids), mask, placed.unsqueeze(1), ids)[:, 0]
    assert torch.allclose(outputs, read)  # the predictor reads the sentences


def test_the_python_api_takes_a_decoding_and_keeps_none(run_dir):
    model = rationale.load(run_dir, device="cpu")
    docs = [r for r in sources.load("demo", "test")][:20]
    own = [r.selected for r in model.predict(docs)]
    rated = model.predict(docs, decoding=Decoding(rate="k=3"))
    assert all(sum(r.selected) <= 3 for r in rated) and any(sum(r.selected) == 3 for r in rated)
    costly = model.predict(docs, decoding=Decoding(coherence=5.0))
    assert [r.selected for r in model.predict(docs)] == own  # the model keeps no decoding
    spans = lambda results: sum(len(r.spans) for r in results)  # noqa: E731
    assert spans(costly) <= spans(model.predict(docs))  # a transition cost never adds spans here
    metrics = model.evaluate(docs, faithfulness=False, decoding=Decoding(rate=0.2))
    assert metrics["test_rate"] == 0.2 and abs(metrics["selection_rate"] - 0.2) < 0.05
    assert "test_rate" not in model.evaluate(docs, faithfulness=False)


def test_a_corpus_decoding_keeps_its_share_of_all_the_tokens(run_dir):
    model = rationale.load(run_dir, device="cpu")
    docs = [r for r in sources.load("demo", "test")][:40]
    decoding = model.corpus_decoding(docs, 0.1)
    assert decoding.threshold is not None and decoding.rate is None
    results = model.predict(docs, decoding=decoding)
    kept = sum(sum(r.selected) for r in results) / sum(len(r.tokens) for r in results)
    assert abs(kept - 0.1) < 0.02
    assert model.corpus_decoding(docs, 0.1, coherence=1.0).coherence == 1.0


def test_an_annotation_job_carries_its_decoding_to_windows_and_identity(run_dir):
    loaded = load_run(run_dir, "cpu")
    window = [r for r in sources.load("demo", "test")][:10]
    rated = Decoding(rate="k=2", coherence=0.5)
    outputs = annotate_window(loaded, window, 4, "cpu", decoding=rated)
    assert all(sum(out.selected) <= 2 for out in outputs)
    job = Job("demo", run_dir / "out.jsonl", "jsonl", {}, decoding=rated)
    assert job.identity(loaded)["options"]["rate"] == "k=2" and job.identity(loaded)["options"]["coherence"] == 0.5
    assert "rate" not in Job("demo", run_dir / "out.jsonl", "jsonl", {}).identity(loaded)["options"]
