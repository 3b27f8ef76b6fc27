"""The remedies for degeneration (rationale_cli.runs.remedies): decoupled learning rates (DR),
full-text guidance (MCD), one shared encoder (FR) and several generators (MGR)."""

from pathlib import Path

import pytest
import torch

from rationale_cli.data.batching import Batch
from rationale_cli.models.model import RationaleModel
from rationale_cli.models.selection import Selection
from rationale_cli.runs.config import TRAIN_SPECS, from_values
from rationale_cli.runs.remedies import REMEDIES
from rationale_cli.runs.run_directory import build_model
from rationale_cli.runs.task import Classification, Regression
from rationale_cli.runtime.errors import UserError
from rationale_cli.training.loop import training_loss, training_step
from rationale_cli.training.trainer import parameter_groups
from rationale_cli.tuning.space import search_space

ROOT = Path(__file__).resolve().parent.parent


def model_and_batch(extractor="hardkuma"):
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 2, encoder="cnn", extractor=extractor, dropout=0.0)
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
    plain, _, _ = training_loss(model, task, batch)
    torch.manual_seed(1)
    guided, _, _ = training_loss(model, task, batch, guidance=0.5)
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


# ----------------------------------------------------------------------------- MCD, FR, MGR

def test_mcds_kl_term_pulls_the_rationales_prediction_and_leaves_the_full_texts_alone():
    """MCD's term is KL(full || rationale) against the full text's detached output: its value by
    hand, its gradient softmax(rationale) - softmax(full) on the rationale's logits, none on the
    full text's, and, through the model, some on the selector's side."""
    task = Classification(list("abc"))
    rationale = torch.randn(4, 3, requires_grad=True)
    full = torch.randn(4, 3, requires_grad=True)
    kl = task.divergence(rationale, full.detach())
    p, q = torch.softmax(full, -1), torch.softmax(rationale, -1)
    assert torch.allclose(kl, (p * (p.log() - q.log())).sum(-1), atol=1e-6)
    kl.sum().backward()
    assert torch.allclose(rationale.grad, (q - p).detach(), atol=1e-6) and full.grad is None

    model, batch = model_and_batch()
    torch.manual_seed(1)
    plain, _, _ = training_loss(model, task, batch)
    torch.manual_seed(1)
    guided, _, _ = training_loss(model, task, batch, guidance=1.0)
    (guided - plain).backward()  # the guidance terms alone
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.selector_encoder.parameters())


def test_fr_reads_the_rationale_with_the_selectors_own_encoder_saved_once():
    torch.manual_seed(0)
    shared = RationaleModel(30, 8, 8, 2, encoder="rcnn", extractor="hardkuma", share_encoder=True)
    apart = RationaleModel(30, 8, 8, 2, encoder="rcnn", extractor="hardkuma")
    assert shared.predictor_encoder is shared.selector_encoder
    assert not any(k.startswith("predictor_encoder.") for k in shared.state_dict())
    size = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert size(apart) - size(shared) == size(apart.predictor_encoder)
    assert {id(p) for p in shared.predictor_parameters()} == {id(p) for p in shared.output.parameters()}
    _, batch = model_and_batch()
    selection, outputs = shared(batch.ids, batch.mask)
    Classification(["NEG", "POS"]).loss(outputs[:, 0], batch.targets).mean().backward()
    assert all(p.grad is not None for p in shared.selector_encoder.parameters())
    loaded = build_model(from_values({"data": "demo", "encoder": "rcnn", "share_encoder": True,
                                      "embedding_dim": 8, "hidden_size": 8}), 30, Classification(["a", "b"]))
    loaded.load_state_dict(shared.state_dict())  # strict: the same keys


def test_mgr_feeds_every_generators_rationale_to_the_one_predictor_and_decodes_with_the_first():
    torch.manual_seed(0)
    model = RationaleModel(30, 8, 8, 2, encoder="cnn", extractor="hardkuma", generators=3, dropout=0.0)
    _, batch = model_and_batch()
    assert len(model.generators) == 2
    selection, outputs = model(batch.ids, batch.mask)
    assert selection.masks.shape == (4, 3, 9) and outputs.shape == (4, 3, 2)
    assert torch.allclose(selection.weights, torch.full((4, 3), 1 / 3))
    model.eval()
    before = model.decode(batch.ids, batch.mask)
    with torch.no_grad():
        for p in model.generators.parameters():
            p.add_(1.0)
    after = model.decode(batch.ids, batch.mask)
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    groups = parameter_groups(model, from_values({"data": "demo", "lr": 0.01}))
    rates = {round(group.get("lr", 0.01), 6): {id(p) for p in group["params"]} for group in groups}
    for i, generator in enumerate(model.generators):
        assert {id(p) for p in generator.parameters()} == rates[round(0.01 * (i + 2), 6)]


def test_joined_selections_average_the_losses_and_give_each_surrogate_its_own_masks():
    seen = []

    def own(loss):
        seen.append(loss.clone())
        return loss.sum()

    first = Selection.single(torch.ones(2, 5), penalty=torch.tensor(1.0), rate=torch.tensor(0.5))
    second = Selection(torch.zeros(2, 2, 5), torch.full((2, 2), 0.5), torch.tensor(3.0), surrogate=own)
    joined = Selection.joined([first, second])
    assert joined.masks.shape == (2, 3, 5) and joined.penalty.item() == pytest.approx(2.0)
    assert torch.allclose(joined.weights, torch.tensor([[0.5, 0.25, 0.25]] * 2))
    assert joined.stats == {"rate": torch.tensor(0.5)}
    loss = torch.arange(6.0).view(2, 3)
    assert joined.surrogate(loss).item() == pytest.approx(loss[:, 1:].sum().item() / 2)
    assert torch.equal(seen[0], loss[:, 1:])


@pytest.mark.parametrize("values, expected", [
    ({"share_encoder": True, "generators": 2}, "do not go together"),
    ({"share_encoder": True, "extractor": "full"}, "full has no encoder"),
    ({"generators": 2, "extractor": "full"}, "full has no encoder"),
    ({"share_encoder": True, "predictor_encoder": "bow"}, "one kind of encoder"),
    ({"share_encoder": True, "encoder": "l2x"}, "one kind of encoder"),
    ({"separate_guidance": True}, "give --guidance"),
])
def test_fr_and_mgr_are_refused_where_they_cannot_be(values, expected):
    with pytest.raises(UserError, match=expected):
        from_values({"data": "demo", **values})


def test_every_remedy_is_a_training_option_with_its_value_among_its_searched_ones():
    for name, remedy in REMEDIES.items():
        spec = TRAIN_SPECS[remedy.option]
        assert spec.check(remedy.value) == remedy.value, name
        assert remedy.search.name == remedy.option
        values = remedy.search.values()
        assert all(spec.check(v) == v for v in values)
        assert getattr(remedy.search, "choices", None) is None or remedy.value in remedy.search.choices
    space = search_space("bernoulli", ROOT / "examples" / "degeneration.toml")
    from_file = {entry.name: entry for entry in space.entries if entry.name in space.from_file}
    assert from_file == {r.option: r.search for r in REMEDIES.values() if r.option != "generators"}



def separated(extractor, targets, guidance=1.0):
    """A fresh model, its batch, and each parameter's gradient after one step of MCD's separation
    (a step of size 0), the selector's and the predictor's apart."""
    model, batch = model_and_batch(extractor)
    batch = Batch([], batch.ids, batch.mask, torch.tensor(targets))
    torch.manual_seed(1)
    training_step(model, Classification(["NEG", "POS"]), batch, torch.optim.SGD(model.parameters(), lr=0.0), 0.0,
                  guidance, separate=True)
    predictor = {id(p) for p in model.predictor_parameters()}
    grads = [{n: p.grad for n, p in model.named_parameters() if (id(p) in predictor) == side} for side in (False, True)]
    return model, batch, *grads


@pytest.mark.parametrize("extractor", ["hardkuma", "bernoulli"])
def test_mcds_separation_keeps_the_label_from_the_selector_and_the_divergence_from_the_predictor(extractor):
    """The selector's gradient is the same whatever the labels (it learns from the divergence and
    its penalty alone: through its samples for HardKuma, as REINFORCE's cost for Bernoulli); the
    predictor's is that of the task losses alone, on the rationale and on the full text."""
    model, batch, selector, predictor = separated(extractor, [0, 1, 1, 0])
    _, _, relabelled, _ = separated(extractor, [1, 0, 0, 1])
    assert any(g is not None and g.abs().sum() > 0 for g in selector.values())
    for name, grad in selector.items():
        assert (grad is None and relabelled[name] is None) or torch.allclose(grad, relabelled[name], atol=1e-6), name
    task = Classification(["NEG", "POS"])
    torch.manual_seed(1)
    selection, outputs = model(batch.ids, batch.mask, full_text=True)
    targets = batch.targets.unsqueeze(1).expand(selection.weights.shape)
    rationale_loss = (selection.weights * task.loss(outputs[:, :-1], targets)).sum(-1)
    losses = rationale_loss + task.loss(outputs[:, -1], batch.targets)
    names = [n for n, p in model.named_parameters() if n in predictor]
    expected = torch.autograd.grad(losses.mean(), [dict(model.named_parameters())[n] for n in names])
    for name, grad in zip(names, expected):
        assert torch.allclose(predictor[name], grad, atol=1e-6), name
