"""Named architectures: the papers' selector/predictor pairings, padding, defaults."""

import pytest
import torch

from rationale_cli.models.architectures import ARCHITECTURES, build_architecture
from rationale_cli.models.encoders import CNNEncoder, L2XEncoder, RCNNEncoder
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.config import TrainConfig


@pytest.mark.parametrize("architecture", ["l2x", "sst-simple", "sst-complex"])
@pytest.mark.parametrize("extractor", ["simple", "topk", "corr-topk", "attention"])
def test_padding_never_changes_the_rationale_or_the_prediction(architecture, extractor):
    torch.manual_seed(0)
    model = RationaleModel(30, 6, 8, 1, encoder=architecture, extractor=extractor, dropout=0.0,
                           extractor_options={"budget": 2}).eval()
    ids = torch.tensor([[3, 4, 5, 6, 7, 0, 0], [3, 4, 5, 6, 7, 8, 9]])
    mask = (ids != 0).float()
    z, scores, out = model.decode(ids, mask)
    z1, scores1, out1 = model.decode(ids[:1, :5], mask[:1, :5])
    assert torch.allclose(out[0], out1[0], atol=1e-5)
    assert torch.equal(z[0, :5], z1[0]) and torch.all(z[0, 5:] == 0)
    assert torch.allclose(scores[0, :5], scores1[0], atol=1e-5)


def test_parts_follow_the_papers():
    l2x = build_architecture("l2x", 6, 8, 1, dropout=0.1, needs_selector=True)
    assert isinstance(l2x.selector_encoder, L2XEncoder)
    assert isinstance(l2x.predictor_encoder, CNNEncoder) and len(l2x.predictor_encoder.convs) == 2
    # D.6 head: dropout, a hidden ReLU layer, the output layer
    assert [type(m).__name__ for m in l2x.output] == ["Dropout", "Linear", "ReLU", "Linear"]
    simple = build_architecture("sst-simple", 6, 8, 1, dropout=0.1, needs_selector=True)
    assert len(simple.selector_encoder.convs) == 0 and simple.selector_encoder.output_size == 6
    complex_ = build_architecture("sst-complex", 6, 8, 1, dropout=0.1, needs_selector=True)
    assert len(complex_.selector_encoder.convs) == 2 and complex_.selector_encoder.convs[0].kernel_size == (3,)
    plain = build_architecture("rcnn", 6, 8, 1, dropout=0.1, needs_selector=False)
    assert plain.selector_encoder is None and [type(m).__name__ for m in plain.output] == ["Dropout", "Linear"]
    with pytest.raises(ValueError, match="unknown encoder"):
        build_architecture("gru", 6, 8, 1, dropout=0.1, needs_selector=True)
    assert set(ARCHITECTURES) >= {"rcnn", "lstm", "cnn", "l2x", "sst-simple", "sst-complex"}


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_every_architecture_has_a_help_line_and_runs(name):
    assert ARCHITECTURES[name].help.strip() and "\n" not in ARCHITECTURES[name].help
    torch.manual_seed(0)
    parts = build_architecture(name, 6, 8, 3, dropout=0.1, needs_selector=True, vocab_size=20)
    x, mask = torch.randn(2, 5, 6), torch.tensor([[1.0, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    ids = torch.randint(1, 20, (2, 5))
    states, _ = parts.selector_encoder(ids if parts.selector_encoder.reads_ids else x, mask)
    _, summary = parts.predictor_encoder(ids if parts.predictor_encoder.reads_ids else x, mask)
    assert states.shape[:2] == (2, 5) and parts.output(summary).shape == (2, 3)


def test_unknown_architecture_names_the_known_ones():
    with pytest.raises(ValueError, match="expected one of rcnn, lstm, cnn, l2x, sst-simple, sst-complex, bow, hf$"):
        build_architecture("gru", 6, 8, 1, dropout=0.1, needs_selector=True)


def test_the_two_sides_may_have_different_encoders():
    parts = build_architecture("rcnn", 6, 8, 3, dropout=0.1, needs_selector=True, predictor="cnn")
    assert isinstance(parts.selector_encoder, RCNNEncoder) and isinstance(parts.predictor_encoder, CNNEncoder)
    assert parts.output[-1].in_features == 8 and parts.reads_vectors
    with pytest.raises(ValueError, match="each side is one of rcnn, lstm, cnn, bow, hf"):
        build_architecture("l2x", 6, 8, 3, dropout=0.1, needs_selector=True, predictor="cnn")
    with pytest.raises(ValueError, match="needs a pretrained transformer"):
        build_architecture("cnn", 6, 8, 3, dropout=0.1, needs_selector=True, selector="hf")


def test_l2x_global_branch_sees_only_real_tokens():
    torch.manual_seed(0)
    encoder = L2XEncoder(4, 5).eval()
    x = torch.randn(1, 6, 4)
    mask = torch.tensor([[1.0, 1, 1, 0, 0, 0]])
    noisy = x.clone()
    noisy[0, 3:] = 100.0  # huge values at padding must not reach the max-pool
    states, summary = encoder(x, mask)
    states_noisy, summary_noisy = encoder(noisy, mask)
    assert torch.allclose(states, states_noisy) and torch.allclose(summary, summary_noisy)
    assert torch.all(states[0, 3:] == 0)


def test_embedding_states_summary_is_the_masked_max():
    encoder = CNNEncoder(3, 7, layers=0)
    x = -torch.rand(2, 4, 3) - 1  # all negative: a plain max would pick the padding zeros
    mask = torch.tensor([[1.0, 1, 0, 0], [0, 0, 0, 0]])
    states, summary = encoder(x, mask)
    assert torch.allclose(summary[0], x[0, :2].max(0).values)
    assert torch.all(summary[1] == 0) and torch.all(states[0, 2:] == 0)


def test_default_architecture_per_extractor():
    assert TrainConfig(extractor="simple").encoder == "rcnn"  # measured best on the demo, over the papers' own
    assert TrainConfig(extractor="corr-topk").encoder == "rcnn"
    assert TrainConfig(extractor="topk").encoder == "rcnn"
    assert TrainConfig(extractor="hardkuma").encoder == "rcnn"
    assert TrainConfig(extractor="simple", encoder="lstm").encoder == "lstm"
