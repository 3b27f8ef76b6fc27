"""The bag-of-n-grams encoder (bow): only the selected tokens and the rationale's own bigrams
count, the gate gets its gradient, and a run with a bow predictor trains, saves, loads and predicts."""

import json

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.models.encoders import BagEncoder, build_encoder
from rationale_cli.models.encoders.bow import BUCKET_NUMBERS, bigram_buckets, bucket_count
from rationale_cli.models.model import RationaleModel

V, H = 40, 6


def encoder(dropout=0.0, dtype=torch.float64):
    torch.manual_seed(0)
    return BagEncoder(V, H, dropout=dropout).to(dtype).eval()


def test_an_unselected_token_changes_nothing():
    enc = encoder()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 0, 0]])
    z = torch.tensor([[1.0, 1, 0, 1, 1, 0], [0, 1, 1, 0, 0, 0]], dtype=torch.float64)
    states, summary = enc(ids, z)
    changed = ids.clone()
    changed[0, 2], changed[0, 5], changed[1, 0], changed[1, 3] = 30, 31, 32, 33
    states2, summary2 = enc(changed, z)
    assert torch.equal(summary, summary2) and torch.equal(states, states2)
    assert torch.equal(enc.summary(changed, z), summary)
    assert torch.all(states[z == 0] == 0)


def test_a_bigram_across_the_rationales_edge_contributes_nothing():
    enc = encoder()
    ids = torch.tensor([[5, 6, 7, 8]])
    z = torch.tensor([[0.0, 1, 1, 0]], dtype=torch.float64)
    U, G = enc.unigrams.weight, enc.bigrams.weight
    inside = int(bigram_buckets(ids, enc.buckets)[0, 1])  # (6, 7): both selected
    expected = (U[6] + U[7] + G[inside]) / 3  # two words, one bigram; (5, 6) and (7, 8) are out
    states, summary = enc(ids, z)
    assert torch.allclose(summary[0], expected) and torch.allclose(enc.summary(ids, z)[0], expected)
    assert torch.allclose(states[0, 1], U[6] + G[inside]) and torch.allclose(states[0, 2], U[7] + G[inside])
    # a relaxed gate weighs a bigram by the product of its gates
    soft = torch.tensor([[0.0, 0.5, 0.25, 0.0]], dtype=torch.float64)
    weighted = (0.5 * U[6] + 0.25 * U[7] + 0.125 * G[inside]) / 1.0  # the count 0.875 is clamped at 1
    assert torch.allclose(enc.summary(ids, soft)[0], weighted)
    assert torch.all(enc.summary(ids, torch.zeros_like(soft)) == 0)  # an empty rationale


@pytest.mark.parametrize("training", [False, True])
def test_the_gate_gets_its_gradient(training):
    enc = encoder()
    enc.train(training)  # dropout 0: the embedding-bag path and the gathered rows alike
    ids = torch.tensor([[5, 6, 7, 8, 9], [11, 12, 13, 0, 0]])
    z = torch.rand(2, 5, dtype=torch.float64).mul(0.6).add(0.3).requires_grad_()
    assert torch.autograd.gradcheck(lambda g: enc.summary(ids, g), (z,))
    assert torch.autograd.gradcheck(lambda g: enc(ids, g)[0], (z,))
    assert torch.autograd.gradcheck(lambda g: enc(ids, g)[1], (z,))
    assert torch.allclose(enc(ids, z)[1], enc.summary(ids, z))


def test_dropout_acts_in_training_only():
    enc = encoder(dropout=0.5, dtype=torch.float32)
    ids, z = torch.tensor([[5, 6, 7, 8, 9]]), torch.ones(1, 5)
    kept = enc.summary(ids, z)
    enc.train()
    assert not torch.allclose(enc.summary(ids, z), kept)
    enc.eval()
    assert torch.equal(enc.summary(ids, z), kept)


def test_sizes_follow_the_vocabulary_and_are_capped():
    assert bucket_count(50, 16) == 1024
    assert bucket_count(3000, 16) == 16384
    assert bucket_count(40000, 200) == 32768 and 32768 * 200 <= BUCKET_NUMBERS
    enc = build_encoder("bow", 8, 16, vocab_size=3000)
    assert enc.unigrams.weight.shape == (3000, 16) and enc.bigrams.weight.shape == (16384, 16)
    assert enc.output_size == 16 and enc.reads_ids
    with pytest.raises(ValueError, match="vocabulary size"):
        build_encoder("bow", 8, 16)


def test_bow_on_both_sides_needs_no_embeddings_and_trains_the_selector():
    torch.manual_seed(0)
    model = RationaleModel(V, 8, H, 2, encoder="bow", extractor="hardkuma")
    assert model.embed is None and model.selector_encoder.reads_ids
    ids = torch.randint(1, V, (3, 9))
    mask = torch.ones(3, 9)
    mask[2, 6:] = 0
    _, outputs = model(ids, mask)
    outputs.sum().backward()
    assert model.selector_encoder.unigrams.weight.grad.abs().sum() > 0  # through the gates
    with pytest.raises(ValueError, match="read word ids"):
        RationaleModel(V, 8, H, 2, encoder="bow", embeddings=torch.zeros(V, 8))


def test_a_run_with_a_bow_predictor_saves_loads_and_predicts(tmp_path):
    runner = CliRunner()
    run = tmp_path / "bow"
    small = ["--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "100", "--extractor", "attention",
             "--budget", "0.2"]
    result = runner.invoke(app, ["train", "--data", "demo", "--out", str(run), "--epochs", "1",
                                 "--predictor-encoder", "bow", "--encoder", "cnn", *small])
    assert result.exit_code == 0, result.output
    assert "cnn selector, bow predictor" in result.output
    weights = load_file(run / "model.safetensors")
    assert weights["predictor_encoder.bigrams.weight"].shape[1] == 16
    out = tmp_path / "p.jsonl"
    result = runner.invoke(app, ["predict", str(run), "demo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 300 and all(line["rationale"] for line in lines)
    result = runner.invoke(app, ["explain", str(run), "The color is a hazy gold and the head is thick."])
    assert result.exit_code == 0 and "prediction" in result.output, result.output
    result = runner.invoke(app, ["evaluate", str(run), "demo", "--json", str(tmp_path / "e.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "e.json").read_text())
