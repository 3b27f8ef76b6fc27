"""The leakage probe: how much a rationale's shape alone tells about the label.

A predictor may learn from where the gaps of a mask are, not from the selected words (through
position embeddings, an RNN stepping over zeroed tokens, a convolution seeing zero rows), so
that a prediction depends on what was not selected. The probe reads each document's 0/1 mask pattern and nothing of its words: per position the
selected and unselected indicators and the relative position, two width-5 convolutions,
max-pooling and a linear layer (:class:`models.encoders.CNNEncoder`). It is trained (200 Adam
updates of 64 documents) on the run's decoded masks of its training documents and scored on the evaluated ones; beside chance
(the training majority class, or the training mean's squared error for scores) its score says
how much the masks' shape alone predicts.
"""

from __future__ import annotations

import random
from typing import Sequence

import torch
from torch import Tensor, nn

from models.decoding import OWN, Decoding
from models.encoders import CNNEncoder
from rationale_cli.data.records import Record
from rationale_cli.runs.inference import decoded_batches
from rationale_cli.runs.task import Regression

PROBE_UPDATES = 200  # Adam steps of PROBE_BATCH documents, however many documents there are
PROBE_BATCH = 64
PROBE_WIDTH = 32


def mask_features(records: Sequence[Record], run, batch_size: int, device, decoding: Decoding) -> tuple[Tensor, Tensor]:
    """Each document's decoded mask as probe inputs ``[N, T, 3]`` (selected, unselected,
    relative position; zeros past its end) and its padding mask ``[N, T]``, on the CPU."""
    rows = []
    for chunk, batch, z, _, _ in decoded_batches(run.model, run.vocab, records, batch_size, device,
                                                 decoding=decoding):
        for row, record in enumerate(chunk):
            rows.append((z[row, : len(record.tokens)] > 0).float().cpu())
    length = max((len(r) for r in rows), default=0) or 1
    features, padding = torch.zeros(len(rows), length, 3), torch.zeros(len(rows), length)
    for i, z in enumerate(rows):
        n = len(z)
        features[i, :n] = torch.stack((z, 1 - z, torch.arange(n) / max(n, 1)), -1)
        padding[i, :n] = 1.0
    return features, padding


def leakage_probe(run, train: Sequence[Record], records: Sequence[Record], *, batch_size: int, device,
                  decoding: Decoding = OWN, updates: int = PROBE_UPDATES, seed: int = 0) -> dict:
    """The probe's score on ``records`` after training on ``train`` (both labelled; the run's
    masks decoded as ``decoding`` says), beside chance: ``leakage_accuracy`` and
    ``leakage_majority_accuracy`` (``leakage_mse`` and ``leakage_mse_of_mean`` for scores), and
    ``leakage_documents``, how many it was trained on."""
    task = run.task
    torch.manual_seed(seed)
    x, pad = mask_features(train, run, batch_size, device, decoding)
    targets = task.targets(train)
    encoder = CNNEncoder(3, PROBE_WIDTH, kernel_size=5, layers=2)
    head = nn.Linear(PROBE_WIDTH, task.outputs)
    params = [*encoder.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(params, lr=0.01)
    rng, order = random.Random(seed), []
    for _ in range(updates):
        if len(order) < min(PROBE_BATCH, len(train)):  # a new pass over the documents, shuffled
            order = list(range(len(train)))
            rng.shuffle(order)
        rows, order = torch.tensor(order[:PROBE_BATCH]), order[PROBE_BATCH:]
        loss = task.loss(head(encoder(x[rows], pad[rows])[1]), targets[rows]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    test_x, test_pad = mask_features(records, run, batch_size, device, decoding)
    truth = task.targets(records)
    with torch.no_grad():
        outputs = head(encoder.eval()(test_x, test_pad)[1])
    if isinstance(task, Regression):
        return {"leakage_mse": float(task.loss(outputs, truth).mean()),
                "leakage_mse_of_mean": float(((truth - targets.mean()) ** 2).mean()), "leakage_documents": len(train)}
    majority = int(torch.bincount(targets, minlength=task.outputs).argmax())
    return {"leakage_accuracy": float((outputs.argmax(-1) == truth).float().mean()),
            "leakage_majority_accuracy": float((truth == majority).float().mean()), "leakage_documents": len(train)}
