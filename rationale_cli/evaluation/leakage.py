"""The leakage probe: how much a rationale's shape alone tells about the label.

A predictor may learn from where the gaps of a mask are, not from the selected words (through
position embeddings, an RNN stepping over zeroed tokens, a convolution seeing zero rows), so
that a prediction depends on what was not selected. The probe reads each document's 0/1 mask pattern and nothing of its words: per position the
selected and unselected indicators and the relative position, two width-5 convolutions,
max-pooling and a linear layer (:class:`rationale_cli.models.encoders.CNNEncoder`). It is trained (200 Adam
updates of 64 documents) on the run's decoded masks of its training documents and scored on the evaluated ones; beside chance
(the training majority class, or the training mean's squared error for scores) its score says
how much the masks' shape alone predicts. ``rationale score`` has masks but no model or training
split: there each fifth of the file's documents is probed by a probe trained on the other four
(:func:`cross_fitted_probe`).
"""

from __future__ import annotations

import random
from typing import Sequence

import torch
from torch import Tensor, nn

from rationale_cli.data.records import Record
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.models.encoders import CNNEncoder
from rationale_cli.runs.inference import decoded_batches
from rationale_cli.runs.task import Regression, Task, infer_task
from rationale_cli.runtime.errors import UserError

PROBE_UPDATES = 200  # Adam steps of PROBE_BATCH documents, however many documents there are
PROBE_BATCH = 64
PROBE_WIDTH = 32
FOLDS = 5  # without a training split (``rationale score``), each fifth is probed by the other four


def mask_features(rows: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """0/1 masks, one per document, as probe inputs ``[N, T, 3]`` (selected, unselected,
    relative position; zeros past its end) and their padding mask ``[N, T]``."""
    length = max((len(r) for r in rows), default=0) or 1
    features, padding = torch.zeros(len(rows), length, 3), torch.zeros(len(rows), length)
    for i, z in enumerate(rows):
        n = len(z)
        features[i, :n] = torch.stack((z, 1 - z, torch.arange(n) / max(n, 1)), -1)
        padding[i, :n] = 1.0
    return features, padding


def decoded_masks(records: Sequence[Record], run, batch_size: int, device, decoding: Decoding) -> list[Tensor]:
    """The run's decoded 0/1 mask of each document, on the CPU."""
    rows = []
    for chunk, batch, z, _, _ in decoded_batches(run.model, run.vocab, records, batch_size, device,
                                                 decoding=decoding):
        rows += [(z[row, : len(record.tokens)] > 0).float().cpu() for row, record in enumerate(chunk)]
    return rows


def fitted_probe(task: Task, masks: Sequence[Tensor], targets: Tensor, updates: int, seed: int):
    """The probe trained on ``masks`` and their ``targets``: ``masks -> outputs``."""
    torch.manual_seed(seed)
    x, pad = mask_features(masks)
    encoder = CNNEncoder(3, PROBE_WIDTH, kernel_size=5, layers=2)
    head = nn.Linear(PROBE_WIDTH, task.outputs)
    params = [*encoder.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(params, lr=0.01)
    rng, order = random.Random(seed), []
    for _ in range(updates):
        if len(order) < min(PROBE_BATCH, len(masks)):  # a new pass over the documents, shuffled
            order = list(range(len(masks)))
            rng.shuffle(order)
        rows, order = torch.tensor(order[:PROBE_BATCH]), order[PROBE_BATCH:]
        loss = task.loss(head(encoder(x[rows], pad[rows])[1]), targets[rows]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    encoder.eval()

    @torch.no_grad()
    def probe(tested: Sequence[Tensor]) -> Tensor:
        return head(encoder(*mask_features(tested))[1])
    return probe


def probe_scores(task: Task, outputs: Tensor, truth: Tensor, chance: Tensor, trained_on: int) -> dict:
    """The probe's score beside chance, ``chance`` being each document's prediction without
    the masks (the training majority class, or the training mean)."""
    if isinstance(task, Regression):
        return {"leakage_mse": float(task.loss(outputs, truth).mean()),
                "leakage_mse_of_mean": float(((truth - chance) ** 2).mean()), "leakage_documents": trained_on}
    return {"leakage_accuracy": float((outputs.argmax(-1) == truth).float().mean()),
            "leakage_majority_accuracy": float((truth == chance).float().mean()), "leakage_documents": trained_on}


def without_masks(task: Task, targets: Tensor) -> Tensor:
    """What chance predicts from ``targets`` alone: their mean, or their majority class."""
    if isinstance(task, Regression):
        return targets.mean()
    return torch.bincount(targets, minlength=task.outputs).argmax()


def leakage_probe(run, train: Sequence[Record], records: Sequence[Record], *, batch_size: int, device,
                  decoding: Decoding = OWN, updates: int = PROBE_UPDATES, seed: int = 0) -> dict:
    """The probe's score on ``records`` after training on ``train`` (both labelled; the run's
    masks decoded as ``decoding`` says), beside chance: ``leakage_accuracy`` and
    ``leakage_majority_accuracy`` (``leakage_mse`` and ``leakage_mse_of_mean`` for scores), and
    ``leakage_documents``, how many it was trained on."""
    task, targets = run.task, run.task.targets(train)
    probe = fitted_probe(task, decoded_masks(train, run, batch_size, device, decoding), targets, updates, seed)
    outputs = probe(decoded_masks(records, run, batch_size, device, decoding))
    return probe_scores(task, outputs, task.targets(records), without_masks(task, targets), len(train))


def cross_fitted_probe(masks: Sequence[Tensor], labels: Sequence, *, folds: int = FOLDS,
                       updates: int = PROBE_UPDATES, seed: int = 0) -> dict:
    """The probe on masks without a model or training split (``rationale score``): each of
    ``folds`` parts of the documents is predicted by a probe trained on the others, beside the
    others' chance; ``leakage_documents`` is how many each probe was trained on at least."""
    task = infer_task(labels)
    records = [Record(id=str(i), tokens=[], label=label) for i, label in enumerate(labels)]
    targets = task.targets(records)
    order = list(range(len(masks)))
    random.Random(seed).shuffle(order)
    parts = [order[i::folds] for i in range(folds) if order[i::folds]]
    if len(parts) < 2:
        raise UserError(f"the leakage probe needs at least 2 documents with labels, found {len(masks)}")
    outputs, chance = [None] * len(masks), torch.zeros_like(targets)
    for part in parts:
        held_out = set(part)
        rest = [i for i in order if i not in held_out]
        probe = fitted_probe(task, [masks[i] for i in rest], targets[rest], updates, seed)
        for i, out in zip(part, probe([masks[i] for i in part])):
            outputs[i] = out
        chance[part] = without_masks(task, targets[rest])
    return probe_scores(task, torch.stack(outputs), targets, chance, min(len(order) - len(p) for p in parts))
