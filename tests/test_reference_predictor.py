"""``--predictor-encoder linear`` without ``--support``: the full-text reference itself reads the
rationale, fixed, while the selector learns by gradients through its TF-IDF features."""

import json
import random

import numpy as np
import pytest
import torch
from helpers import trained_on_part_of_demo

from rationale_cli.data.records import Record
from rationale_cli.data.vocab import Vocab
from rationale_cli.models.encoders.tfidf import CLIP, TfidfLinear
from rationale_cli.runs import reference as reference_module
from rationale_cli.runs.reference import fit_reference
from rationale_cli.runs.run_directory import load_reference, load_run
from rationale_cli.runs.task import Classification, infer_task
from rationale_cli.training.linear_predictor import from_reference

WORDS = "good bad fine awful great poor dull bright not very really quite the a".split()


def documents(n: int, labels: list, seed: int) -> list[Record]:
    """Random documents whose label follows which of the first words they hold, mixed case."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        tokens = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
        tokens = [t.upper() if rng.random() < 0.2 else t for t in tokens]
        label = labels[sum(WORDS.index(t.lower()) for t in tokens) % len(labels)] if isinstance(labels[0], str) \
            else rng.random()
        records.append(Record(id=str(i), tokens=tokens, label=label))
    return records


@pytest.mark.parametrize("labels", [["neg", "pos"], ["a", "b", "c"], [0.0]])
def test_the_predictor_made_from_the_reference_computes_its_decision_values(labels, monkeypatch):
    """Every document read whole (a vocabulary word the reference never saw included): the
    encoder's outputs are the reference's decision values (words and bigrams), rows in the task's
    class order (a two-class model's one row as the second class's logit), and for a score the
    logit of its value clipped to [0.001, 0.999]."""
    monkeypatch.setattr(reference_module, "NGRAMS", (2,))  # bigrams in every reference
    train, valid = documents(120, labels, 0), documents(30, labels, 1)
    task = infer_task([r.label for r in train], "auto")
    reference = fit_reference(train, valid, task)
    assert reference.longest == 2
    vocab = Vocab.build([[*r.tokens, "unseen"] for r in train])
    encoder = TfidfLinear(len(vocab), task.outputs)
    from_reference(encoder, reference, vocab, task)
    test = documents(40, labels, 2)
    test[0].tokens.append("unseen")
    ids = [vocab.encode(r.tokens) for r in test]
    width = max(map(len, ids))
    rows = torch.tensor([row + [0] * (width - len(row)) for row in ids])
    got = encoder.summary(rows, (rows > 0).float()).numpy()
    decision = np.asarray(reference.features(test) @ reference.weights.T) + reference.bias
    if not isinstance(task, Classification):
        assert torch.sigmoid(torch.from_numpy(got[:, 0])).numpy() == pytest.approx(
            np.clip(decision[:, 0], CLIP, 1 - CLIP), abs=1e-5)
    elif len(labels) == 2:
        assert got[:, task.index[reference.classes[1]]] - got[:, task.index[reference.classes[0]]] == \
            pytest.approx(decision[:, 0], abs=1e-5)
    else:
        order = [task.index[c] for c in reference.classes]
        assert got[:, order] == pytest.approx(decision, abs=1e-5)


def two_class_reference(labels: list[str]):
    """The task, vocabulary and predictor made from a reference fitted on two-class documents."""
    train = documents(120, labels, 0)
    task = infer_task([r.label for r in train], "auto")
    reference = fit_reference(train, documents(30, labels, 1), task)
    vocab = Vocab.build([r.tokens for r in train])
    encoder = TfidfLinear(len(vocab), task.outputs)
    from_reference(encoder, reference, vocab, task)
    return task, vocab, encoder


def test_the_selector_learns_through_the_fixed_reference():
    """A relaxed gate's gradient reaches every selected token's gate, none of it the predictor's."""
    labels = ["neg", "pos"]
    task, vocab, encoder = two_class_reference(labels)
    rows = torch.tensor([vocab.encode(r.tokens[:4]) for r in documents(8, labels, 3)])
    gate = torch.full(rows.shape, 0.5, requires_grad=True)
    task.loss(encoder.summary(rows, gate), task.targets(documents(8, labels, 3))).sum().backward()
    assert torch.isfinite(gate.grad).all() and (gate.grad != 0).float().mean() > 0.5
    assert not list(encoder.parameters())


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reads") / "run"
    trained_on_part_of_demo(out, predictor_encoder="linear", budget=0.13)
    return out


def test_a_run_keeps_its_reference_as_the_predictor_and_trains_the_selector(reference_run):
    """After training, the run's predictor is still its saved reference made a predictor, and
    what trained (the selector side) is all the model's trainable weights."""
    run = load_run(reference_run, torch.device("cpu"))
    fresh = TfidfLinear(len(run.vocab), run.task.outputs)
    from_reference(fresh, load_reference(reference_run), run.vocab, run.task)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(),
                                                run.model.predictor_encoder.state_dict().values()))
    trainable = {id(p) for p in run.model.parameters() if p.requires_grad}
    assert trainable and trainable == {id(p) for part in run.model.selector_side() for p in part.parameters()}
    metrics = json.loads((reference_run / "metrics.json").read_text())
    assert metrics["history"][0]["train_loss"] > 0


def test_an_unselected_word_s_gate_has_the_gradient_of_selecting_it():
    """With a gradient (a selector learning), a hard gate's every word has one, unselected words
    too (what a straight-through estimator reads): central finite differences of the same outputs
    agree; the outputs are those computed without a gradient; an empty rationale's is finite."""
    labels = ["neg", "pos"]
    task, vocab, encoder = two_class_reference(labels)
    rows = torch.tensor([vocab.encode(r.tokens[:4]) for r in documents(6, labels, 4)])
    hard = (torch.rand(rows.shape, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    hard[:, 0], hard[-1] = 1.0, 0.0  # every row selects a word, but the last selects none
    weights = torch.randn(rows.shape[0], task.outputs, generator=torch.Generator().manual_seed(1))

    def loss(gate):
        return (encoder.summary(rows, gate) * weights).sum()

    gate = hard.clone().requires_grad_()
    loss(gate).backward()
    assert torch.isfinite(gate.grad).all() and (gate.grad[:-1][hard[:-1] == 0] != 0).any()
    assert torch.allclose(encoder.summary(rows, gate).detach(), encoder.summary(rows, hard))
    step = 1e-3
    for i in range(rows.shape[0] - 1):
        for t in range(rows.shape[1]):
            up, down = hard.clone(), hard.clone()
            up[i, t] += step
            down[i, t] -= step
            numeric = (loss(up.requires_grad_()) - loss(down.requires_grad_())).item() / (2 * step)
            assert gate.grad[i, t].item() == pytest.approx(numeric, rel=1e-2, abs=1e-3)
