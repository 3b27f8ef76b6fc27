"""The remedies for degeneration: decoupled learning rates and full-text guidance."""

import pytest
import torch

from rationale_cli.data.batching import Batch
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.config import from_values
from rationale_cli.runs.task import Classification, Regression
from rationale_cli.training.loop import training_loss
from rationale_cli.training.trainer import parameter_groups


def model_and_batch():
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 2, encoder="cnn", extractor="hardkuma", dropout=0.0)
    model.eval()  # the Lagrange multiplier stays as it is
    ids, mask = torch.randint(2, 30, (4, 9)), torch.ones(4, 9)
    mask[1, 6:] = 0
    return model, Batch([], ids * mask.long(), mask, torch.tensor([0, 1, 1, 0]))


def test_the_predictor_learns_at_its_own_rate():
    model, _ = model_and_batch()
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert parameter_groups(model, from_values({"data": "demo"})) == [{"params": trainable}]
    rest, predictor = parameter_groups(model, from_values({"data": "demo", "lr": 0.01, "predictor_lr": 0.1}))
    assert predictor["lr"] == pytest.approx(0.001) and "lr" not in rest
    assert {id(p) for p in predictor["params"]} == {id(p) for p in model.predictor_parameters()}
    assert len(rest["params"]) + len(predictor["params"]) == len(trainable)
    assert {id(p) for p in model.selector.parameters()} <= {id(p) for p in rest["params"]}


def test_guidance_adds_the_full_texts_loss_and_its_pull_on_the_rationale():
    model, batch = model_and_batch()
    task = Classification(["NEG", "POS"])
    torch.manual_seed(1)
    plain, _ = training_loss(model, task, batch)
    torch.manual_seed(1)
    guided, _ = training_loss(model, task, batch, guidance=0.5)
    torch.manual_seed(1)
    selection, outputs = model(batch.ids, batch.mask, full_text=True)
    rationale, full = outputs[:, :-1], outputs[:, -1]
    p, q = torch.softmax(full, -1).unsqueeze(1), torch.softmax(rationale, -1)
    kl = (p * (p.log() - q.log())).sum(-1)
    extra = task.loss(full, batch.targets) + (selection.weights * kl).sum(-1)
    assert guided.item() == pytest.approx(plain.item() + 0.5 * extra.mean().item(), rel=1e-5)


def test_the_divergences_vanish_on_equal_outputs_only():
    outputs = torch.randn(3, 2, 4)
    for task, width in ((Classification(list("abcd")), 4), (Regression(), 1)):
        x = outputs[..., :width]
        assert torch.allclose(task.divergence(x, x), torch.zeros(3, 2), atol=1e-6)
        assert (task.divergence(x, x + 1 + torch.arange(width)) > 0).all()
