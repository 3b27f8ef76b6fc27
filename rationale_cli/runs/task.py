"""Prediction tasks: how labels become targets, the loss and the task metric.

Regression is the beer setup of Lei et al. (2016) and Bastings et al. (2019,
section 6.1): a score in [0, 1], a sigmoid output and squared error.
Classification uses softmax cross-entropy.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from rationale_cli.data.records import Record
from rationale_cli.metrics.scores import ClassificationScores, RegressionScores
from rationale_cli.runtime.errors import UserError


class Task:
    name: str
    outputs: int

    def targets(self, records: Sequence[Record]) -> Tensor:
        """The records' labels as targets; one error line naming the document for a label
        this task cannot take (a class name for a regression model, or the reverse)."""
        raise NotImplementedError

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """Per-example loss; ``outputs [..., outputs]``, ``targets [...]``."""
        raise NotImplementedError

    def divergence(self, outputs: Tensor, reference: Tensor) -> Tensor:
        """How far each prediction ``outputs [..., outputs]`` is from ``reference`` (same shape),
        ``[...]``: full-text guidance's divergence."""
        raise NotImplementedError

    def describe(self, outputs: Tensor) -> list[tuple[float | str, dict]]:
        """User-facing predictions from output vectors ``[B, outputs]``, each with extra fields."""
        raise NotImplementedError

    def scores(self):
        raise NotImplementedError

    def to_dict(self) -> dict:
        raise NotImplementedError


class Regression(Task):
    name = "regression"
    outputs = 1

    def targets(self, records):
        for r in records:
            if r.label is None:
                raise UserError(f"{r.where}: no score; expected a 'score' in [0, 1] per document")
            if not isinstance(r.label, (int, float)) or isinstance(r.label, bool):
                raise UserError(f"{r.where}: label {r.label!r} is a class name, but this model predicts a score "
                                "in [0, 1] (a regression run); give 'score' values")
        return torch.tensor([float(r.label) for r in records], dtype=torch.float32)

    def loss(self, outputs, targets):
        return (torch.sigmoid(outputs.squeeze(-1)) - targets) ** 2

    def divergence(self, outputs, reference):
        """The squared difference of the scores (the loss with the reference's score as target)."""
        return self.loss(outputs, torch.sigmoid(reference.squeeze(-1)))

    def describe(self, outputs):
        return [(round(score, 6), {}) for score in torch.sigmoid(outputs[:, 0]).tolist()]

    def scores(self):
        return RegressionScores()

    def to_dict(self):
        return {"task": self.name}


class Classification(Task):
    name = "classification"

    def __init__(self, labels: Sequence[str]):
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}
        self.outputs = len(self.labels)

    def targets(self, records):
        for r in records:
            if r.label is None:
                raise UserError(f"{r.where}: no label; expected a 'label' (a class name) per document")
            if str(r.label) in self.index:
                continue
            if isinstance(r.label, float):
                raise UserError(f"{r.where}: score {r.label:g} given, but this model predicts classes "
                                f"({', '.join(self.labels)}); give 'label' values")
            raise UserError(f"{r.where}: unknown label {r.label!r}; this model knows {', '.join(self.labels)}")
        return torch.tensor([self.index[str(r.label)] for r in records], dtype=torch.long)

    def loss(self, outputs, targets):
        flat = outputs.reshape(-1, outputs.shape[-1])
        return F.cross_entropy(flat, targets.reshape(-1), reduction="none").view(targets.shape)

    def divergence(self, outputs, reference):
        """KL(reference || outputs) of the class distributions."""
        return F.kl_div(F.log_softmax(outputs, -1), F.log_softmax(reference, -1), reduction="none",
                        log_target=True).sum(-1)

    def describe(self, outputs):
        probs = torch.softmax(outputs, -1)
        return [(self.labels[best], {"probabilities": {label: round(p, 6) for label, p in zip(self.labels, row)}})
                for best, row in zip(probs.argmax(-1).tolist(), probs.tolist())]

    def scores(self):
        return ClassificationScores(self.labels)

    def to_dict(self):
        return {"task": self.name, "labels": self.labels}


def infer_task(labels: Sequence, requested: str = "auto") -> Task:
    """Regression when every label is a float, classification when they are strings."""
    present = [x for x in labels if x is not None]
    if not present:
        raise UserError("the training data has no labels: expected a 'label' or 'score' per document")
    kind = requested
    if kind == "auto":
        kind = "regression" if all(isinstance(x, float) for x in present) else "classification"
    if kind == "regression":
        if not all(isinstance(x, (float, int)) for x in present):
            raise UserError("--task regression needs numeric scores in [0, 1]")
        return Regression()
    if kind == "classification":
        names = sorted({str(x) for x in present})
        if len(names) < 2:
            raise UserError(f"classification needs at least two labels, found only {names}")
        return Classification(names)
    raise UserError(f"unknown task {requested!r}: expected auto, regression or classification")


def task_from_dict(data: dict, source: str = "task.json") -> Task:
    if data.get("task") == "regression":
        return Regression()
    labels = data.get("labels")
    if data.get("task") == "classification":
        if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, str) for x in labels):
            raise UserError(f"{source}: a classification run needs its labels, a list of two or more names")
        return Classification(labels)
    raise UserError(f"{source}: unknown task {data.get('task')!r}; expected regression or classification")
