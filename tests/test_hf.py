"""Pretrained transformer encoders (``--encoder hf``), offline: a tiny BERT and a WordPiece
tokenizer trained here on the demo text stand in for a downloaded model."""

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import rationale_cli as rationale  # noqa: E402
from rationale_cli.cli import app  # noqa: E402
from rationale_cli.data import sources  # noqa: E402
from rationale_cli.runs.config import from_values  # noqa: E402
from rationale_cli.runs.run_directory import load_run  # noqa: E402
from rationale_cli.training.trainer import train_config  # noqa: E402

BENCHMARKS = str(Path(__file__).resolve().parent.parent / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
from tiny_bert import build_tiny_bert  # noqa: E402


@pytest.fixture(scope="module")
def demo():
    train, valid, test = (sources.load("demo", split) for split in ("train", "valid", "test"))
    return train[:160], valid[:40], test[:40]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, demo):
    texts = [" ".join(r.tokens) for r in demo[0]]
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), texts)


def trained(demo, out, **options):
    config = from_values({"data": "demo", "epochs": 1, "batch_size": 40, "lr": 0.003, "embedding_dim": 16,
                          "hidden_size": 16, "budget": 0.2, "seed": 0, **options})
    return train_config(config, out, data=demo[:2])


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory, demo, tiny):
    """A run of a transformer on both sides, trained from a copy of the tiny model's folder."""
    folder = tmp_path_factory.mktemp("hf-run")
    shutil.copytree(tiny, folder / "pretrained")
    run = trained(demo, folder / "run", encoder="hf", pretrained=str(folder / "pretrained"), extractor="bernoulli")
    assert run.model.embed is None  # neither side reads word vectors
    return folder / "run", folder / "pretrained"


def test_hf_on_both_sides_trains_saves_and_predicts_offline(demo, hf_run):
    out, pretrained = hf_run
    assert (out / "transformer" / "config.json").is_file() and (out / "transformer" / "tokenizer.json").is_file()
    texts = [" ".join(r.tokens) for r in demo[2][:8]]
    before = rationale.load(out).frame(texts)
    shutil.rmtree(pretrained)  # the run keeps what it needs
    after = rationale.load(out).frame(texts)
    assert before["rationale_text"].tolist() == after["rationale_text"].tolist()
    assert before["prediction"].tolist() == after["prediction"].tolist()
    assert json.loads((out / "config.json").read_text())["encoder"] == "hf"
    assert "transformers" in json.loads((out / "versions.json").read_text())


def test_an_hf_selector_feeds_a_cnn_predictor_and_the_reverse(tmp_path, demo, tiny):
    mixed = trained(demo, None, encoder="cnn", selector_encoder="hf", pretrained=str(tiny), extractor="hardkuma")
    assert type(mixed.model.selector_encoder).__name__ == "HFEncoder"
    assert type(mixed.model.predictor_encoder).__name__ == "CNNEncoder" and mixed.model.embed is not None
    reverse = trained(demo, tmp_path / "reverse", encoder="rcnn", predictor_encoder="hf", pretrained=str(tiny),
                      extractor="simple", budget=8, guidance=0.5, predictor_lr=0.1)
    assert type(reverse.model.predictor_encoder).__name__ == "HFEncoder"
    loaded = load_run(tmp_path / "reverse")
    ids = torch.randint(2, 40, (3, 12))
    mask = torch.ones(3, 12)
    for a, b in zip(reverse.model.eval().decode(ids, mask), loaded.model.decode(ids, mask)):
        assert torch.allclose(a, b)


def test_the_predictor_reads_the_selected_words_alone_renumbered(demo, tiny):
    """For a hard rationale the transformer reads exactly the selected words' subwords, as if they
    were the whole text: the same states as the transformer run on those words alone."""
    from transformers import AutoModel, AutoTokenizer

    from rationale_cli.data.vocab import Vocab
    from rationale_cli.models.encoders.hf import HFEncoder
    from rationale_cli.runs.pretrained import load_pretrained

    record = demo[0][0]
    vocab = Vocab.build([r.tokens for r in demo[0]])
    encoder = HFEncoder(load_pretrained(tiny, vocab.itos)).eval()
    ids = torch.tensor([vocab.encode(record.tokens)])
    gate = torch.zeros(ids.shape)
    chosen = [1, 2, 5, 9, 10, 11, len(record.tokens) - 1]
    gate[0, chosen] = 1.0
    read = encoder.subwords(ids, gate)
    with torch.no_grad():
        ours = encoder.hidden(read)[0]
        tokenizer, model = AutoTokenizer.from_pretrained(tiny), AutoModel.from_pretrained(tiny).eval()
        alone = tokenizer(" ".join(record.tokens[i].lower() for i in chosen), return_tensors="pt")
        theirs = model(**alone).last_hidden_state[0]
    assert read.ids[0].tolist() == alone["input_ids"][0].tolist()
    assert torch.allclose(ours, theirs, atol=1e-5)
    # a word's state is the mean of its subwords'; an unselected word reads nothing
    states, summary = encoder(ids, gate)
    with torch.no_grad():
        assert torch.allclose(summary[0], theirs[0], atol=1e-5)
        first = read.word[0] == chosen[0]
        assert torch.allclose(states[0, chosen[0]], theirs[first].mean(0), atol=1e-5)
        assert not states[0, 0].any()


def test_a_half_precision_checkpoint_trains_and_reloads_in_single_precision(tmp_path, demo, tiny):
    from safetensors.torch import load_file, save_file

    half = tmp_path / "half"
    shutil.copytree(tiny, half)
    weights = load_file(half / "model.safetensors")
    save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()}, half / "model.safetensors")
    config = json.loads((half / "config.json").read_text())
    (half / "config.json").write_text(json.dumps({**config, "dtype": "float16"}))  # as a half checkpoint says
    run = trained(demo, tmp_path / "run", encoder="hf", pretrained=str(half), extractor="bernoulli")
    assert {p.dtype for p in run.model.parameters()} == {torch.float32}
    again = load_run(tmp_path / "run")  # its saved configuration still names float16
    assert {p.dtype for p in again.model.parameters()} == {torch.float32}


def test_bad_pretrained_folders_get_one_line_and_exit_2(tmp_path, tiny):
    runner = CliRunner()
    common = ["train", "--data", "demo", "--epochs", "1"]
    for args, expected in (
        (["--encoder", "hf", "--pretrained", str(tmp_path / "missing"), "--out", str(tmp_path / "a")], "no such folder"),
        (["--encoder", "hf", "--pretrained", str(tmp_path), "--out", str(tmp_path / "b")], "not a transformer"),
        (["--encoder", "hf", "--out", str(tmp_path / "c")], "needs --pretrained"),
        (["--pretrained", str(tiny), "--out", str(tmp_path / "d")], "applies to an hf encoder only"),
    ):
        result = runner.invoke(app, common + args)
        assert result.exit_code == 2, result.output
        assert expected in result.output and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.parametrize("offline", [False, True])
def test_a_hub_name_neither_cached_nor_reachable_is_one_line_at_once(tmp_path, monkeypatch, offline):
    """No minute of retries: a hub that refuses the connection, or HF_HUB_OFFLINE, is one line."""
    import time

    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(key, raising=False)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--encoder", "hf", "--pretrained",
                                      "no-such-org/no-such-model", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and time.monotonic() - started < 20, result.output
    line = result.output.strip()
    assert len(line.splitlines()) == 1 and "not in the local cache of the hub" in line, line
    assert ("HF_HUB_OFFLINE is set" if offline else "http://127.0.0.1:9) cannot be reached") in line, line
    assert not (tmp_path / "run").exists()


def test_a_run_without_its_transformer_folder_gets_one_line(tmp_path, hf_run):
    out = tmp_path / "run"
    shutil.copytree(hf_run[0], out)
    shutil.rmtree(out / "transformer")
    result = CliRunner().invoke(app, ["predict", str(out), "-", "--out", str(tmp_path / "p.jsonl")], input="a head\n")
    assert result.exit_code == 2 and "transformer/config.json" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("max_length", [8, 10])  # windows 3 apart (where a piece can lie midway), or 4
def test_a_text_longer_than_the_models_positions_is_read_in_overlapping_windows(demo, tiny, max_length):
    """Windows of the model's positions, each half a window after the last; each subword's state
    from the window whose middle is nearest, the summary the mean of the windows' [CLS]; a text
    that fits reads as one window; every word of a long text gets a state and a gradient."""
    import warnings

    from transformers import AutoModel, AutoTokenizer

    from rationale_cli.models.encoders.hf import HFEncoder
    from rationale_cli.runs.pretrained import load_pretrained

    pretrained = load_pretrained(tiny, ["<pad>", "<unk>", "head", "white", "lacing"])
    pretrained.max_length = max_length
    encoder = HFEncoder(pretrained).eval()
    ids = torch.tensor([[2, 3, 4, 2, 3, 4, 2, 3, 4, 2], [2, 3, 0, 0, 0, 0, 0, 0, 0, 0]])
    gate = (ids > 0).float()
    gate[0, 4] = 0.0  # an unselected word: its subwords are not read
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = encoder.subwords(ids, gate)
        states, summary = encoder(ids, gate)
    tokenizer, model = AutoTokenizer.from_pretrained(tiny), AutoModel.from_pretrained(tiny).eval()
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    words = [w for w, g in zip(ids[0].tolist(), gate[0].tolist()) if g > 0]
    positions = [i for i, g in enumerate(gate[0].tolist()) if g > 0]
    pieces = [(p, int(q)) for p, w in zip(positions, words) for q in pretrained.pieces[w] if q >= 0]
    room = max_length - 2  # between [CLS] and [SEP]
    stride = room // 2
    count = len(pieces)
    windows = max(1, -(-(count - room) // stride) + 1)
    assert count > room and read.row.tolist() == [0] * windows + [1]
    with torch.no_grad():
        hidden = [model(torch.tensor([[cls, *[q for _, q in pieces[w * stride: w * stride + room]], sep]]))
                  .last_hidden_state[0] for w in range(windows)]
        for w in range(windows):
            length = min(room, count - w * stride) + 2
            assert read.ids[w, :length].tolist() == [cls, *[q for _, q in pieces[w * stride: w * stride + room]], sep]
        # brute force: each piece from the covering window whose middle is nearest (ties: the later)
        given = {}
        for k, (position, _) in enumerate(pieces):
            covering = [w for w in range(windows) if w * stride <= k < w * stride + room]
            best = min(covering, key=lambda w: (abs(k - (w * stride + (room - 1) / 2)), -w))
            given.setdefault(position, []).append(hidden[best][1 + k - best * stride])
        for position in range(ids.shape[1]):
            if position in given:
                assert torch.allclose(states[0, position], torch.stack(given[position]).mean(0), atol=1e-5)
            else:
                assert not states[0, position].any()
        assert torch.allclose(summary[0], torch.stack([h[0] for h in hidden]).mean(0), atol=1e-5)
        short = model(torch.tensor([[cls, *[int(q) for w in (2, 3) for q in pretrained.pieces[w] if q >= 0], sep]]))
        assert torch.allclose(summary[1], short.last_hidden_state[0, 0], atol=1e-5)
    gate.requires_grad_()
    states = encoder(ids, gate)[0]
    torch.manual_seed(0)
    (states * torch.randn_like(states)).sum().backward()  # (a plain sum is flat under LayerNorm)
    assert gate.grad[0, positions].abs().min() > 1e-4


def test_every_parameter_of_an_hf_model_gets_a_gradient(demo, tiny):
    """Distributed training needs a gradient for every parameter: BERT's unused pooler is dropped."""
    from rationale_cli.data.batching import make_batch
    from rationale_cli.data.vocab import Vocab
    from rationale_cli.models.model import RationaleModel
    from rationale_cli.runs.pretrained import load_pretrained
    from rationale_cli.runs.task import Regression

    vocab = Vocab.build([r.tokens for r in demo[0]])
    model = RationaleModel(len(vocab), 8, 8, 1, encoder="hf", extractor="hardkuma",
                           pretrained=load_pretrained(tiny, vocab.itos))
    batch = make_batch(demo[0][:4], vocab, Regression())
    selection, outputs = model(batch.ids, batch.mask)
    (outputs.sum() + selection.penalty).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_frozen_layers_keep_their_weights_and_the_transformer_learns_at_its_own_rate(demo, tiny):
    from transformers import AutoModel

    from rationale_cli.training.trainer import parameter_groups

    original = AutoModel.from_pretrained(tiny).state_dict()
    run = trained(demo, None, encoder="hf", pretrained=str(tiny), extractor="hardkuma", freeze_layers=1,
                  pretrained_lr=1e-4, predictor_lr=0.5)
    for encoder in (run.model.selector_encoder, run.model.predictor_encoder):
        weights = encoder.transformer.state_dict()
        for name in ("embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight",
                     "encoder.layer.0.attention.self.query.weight"):
            assert torch.equal(weights[name], original[name]), name
        assert not torch.equal(weights["encoder.layer.1.attention.self.query.weight"],
                               original["encoder.layer.1.attention.self.query.weight"])
    rates = {}
    for group in parameter_groups(run.model, run.config):
        for p in group["params"]:
            rates[id(p)] = group.get("lr", run.config.lr)
    model = run.model
    assert rates[id(model.selector_encoder.transformer.encoder.layer[1].output.dense.weight)] == pytest.approx(1e-4)
    assert rates[id(model.predictor_encoder.transformer.encoder.layer[1].output.dense.weight)] == pytest.approx(5e-5)
    assert rates[id(model.output[-1].weight)] == pytest.approx(0.0015)
    assert all(rates[id(p)] == pytest.approx(0.003) for p in model.selector.parameters() if p.requires_grad)
    assert id(model.selector_encoder.transformer.encoder.layer[0].output.dense.weight) not in rates

    whole = trained(demo, None, encoder="cnn", selector_encoder="hf", pretrained=str(tiny), freeze_layers=-1)
    assert not any(p.requires_grad for p in whole.model.selector_encoder.parameters())
    assert all(p.requires_grad for p in whole.model.selector.parameters())


def test_transformer_options_without_a_transformer_are_refused(tmp_path):
    for args in (["--freeze-layers", "2"], ["--pretrained-lr", "1e-5"]):
        result = CliRunner().invoke(app, ["train", "--data", "demo", "--epochs", "1", "--out", str(tmp_path / "x"),
                                          *args])
        assert result.exit_code == 2 and "applies to an hf encoder only" in result.output, result.output


@pytest.mark.parametrize("specials", [True, False])
def test_an_empty_rationale_is_read_in_one_row_and_in_a_whole_batch(demo, tiny, specials):
    """A rationale that selects nothing, in one row or in every row of a batch, reads the specials
    alone (a tokenizer without any: one padding position): finite states, summaries and gradients,
    no "cannot reshape a tensor of 0 elements" in the self-attention."""
    import dataclasses

    from rationale_cli.data.vocab import Vocab
    from rationale_cli.models.encoders.hf import HFEncoder
    from rationale_cli.runs.pretrained import load_pretrained

    vocab = Vocab.build([r.tokens for r in demo[0]])
    pretrained = load_pretrained(tiny, vocab.itos)
    if not specials:
        pretrained = dataclasses.replace(pretrained, prefix=[], suffix=[])
    encoder = HFEncoder(pretrained)
    ids = torch.tensor([vocab.encode(r.tokens[:10]) for r in demo[0][:3]])
    one_row = torch.ones(ids.shape)
    one_row[1] = 0.0
    for gate in (one_row, torch.zeros(ids.shape)):
        gate.requires_grad_(True)
        states, summary = encoder(ids, gate)
        (states.sum() + summary.sum()).backward()
        assert states.shape == (3, 10, encoder.output_size) and summary.shape == (3, encoder.output_size)
        assert torch.isfinite(states).all() and torch.isfinite(summary).all() and torch.isfinite(gate.grad).all()
        assert not states[1].any()  # nothing read, no word state
        if not specials:
            assert not summary[1].any()


def test_a_transformer_predictor_learns_from_a_support_s_rationales_alone(demo, tiny, tmp_path):
    """FRESH (train --support RUN --predictor-encoder hf): the support's selector, fixed, and a
    transformer predictor that reads the rationale's words alone."""
    from rationale_cli.models.decoding import Decoding
    from rationale_cli.models.encoders.hf import HFEncoder

    support = trained(demo, tmp_path / "support", encoder="cnn", extractor="hardkuma", reference=False)
    second = trained(demo, tmp_path / "second", support=str(tmp_path / "support"), predictor_encoder="hf",
                     pretrained=str(tiny), reference=False)
    assert isinstance(second.model.predictor_encoder, HFEncoder)
    assert second.model.selector_encoder is not None and not isinstance(second.model.selector_encoder, HFEncoder)
    loaded = rationale.load(tmp_path / "second")
    theirs = rationale.Model(support.model, support.vocab, support.task, support.config)
    asked = theirs.predict(demo[2], decoding=Decoding(rate=0.2, sentences=True))
    assert [r.selected for r in loaded.predict(demo[2])] == [r.selected for r in asked]
