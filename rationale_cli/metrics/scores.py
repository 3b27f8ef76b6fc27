"""Scores for rationales and for the task prediction.

Rationale scores are token-level, as in Lei et al. (2016) and Bastings et al.
(2019, Table 2 "% Precision"): *precision* is the share of selected tokens that
lie inside the gold rationale, *recall* the share of gold tokens that were
selected. Both come in two flavours:

- micro: token counts summed over all documents with gold, then divided
  (this is the number the papers report);
- macro: the score per document, averaged over documents where it is defined.

Everything here is plain Python/numpy so evaluation needs no torch. Values are
floats in [0, 1], or None where the quantity is undefined (no gold anywhere,
nothing selected, no documents). Results are plain dicts, ready for JSON.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

__all__ = [
    "ratio",
    "mean",
    "document_scores",
    "RationaleScores",
    "TaskScores",
    "RegressionScores",
    "ClassificationScores",
]


def _as_mask(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one flat sequence per document, got shape {array.shape}")
    return array.astype(bool)


def ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den else None


def mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def document_scores(selected: Sequence[int | bool], gold: Sequence[int] | None) -> dict:
    """Scores of one document.

    ``selected`` and ``gold`` hold one entry per token (nonzero = in the set).
    Returns ``tokens``, ``selected`` (count), ``gold`` (count or None),
    ``overlap`` (selected and gold, or None), ``transitions`` (number of
    0/1 switches, sum of |z_i - z_{i-1}|), ``spans`` (maximal runs of selected tokens), and ``precision``, ``recall``,
    ``f1``. Precision is None when nothing is selected, recall None when
    the gold is empty, and all three None without gold. F1 is the Dice
    score ``2|S & G| / (|S| + |G|)``: equal to the harmonic mean where both are
    defined, 0 when exactly one of the sets is empty, None when both are.
    """
    sel = _as_mask(selected, "selected")
    n_sel = int(sel.sum())
    result: dict = {
        "tokens": int(sel.size),
        "selected": n_sel,
        "transitions": int(np.count_nonzero(sel[1:] != sel[:-1])) if sel.size > 1 else 0,
        "spans": int(np.count_nonzero(sel[1:] & ~sel[:-1])) + int(sel[0]) if sel.size else 0,
        "gold": None,
        "overlap": None,
        "precision": None,
        "recall": None,
        "f1": None,
    }
    if gold is None:
        return result
    gld = _as_mask(gold, "gold")
    if gld.shape != sel.shape:
        raise ValueError(
            f"selected has {sel.size} tokens but gold has {gld.size}; they must have one entry per token"
        )
    n_gold = int(gld.sum())
    overlap = int(np.count_nonzero(sel & gld))
    result.update(
        gold=n_gold,
        overlap=overlap,
        precision=ratio(overlap, n_sel),
        recall=ratio(overlap, n_gold),
        f1=ratio(2 * overlap, n_sel + n_gold),
    )
    return result


class RationaleScores:
    """Accumulates token-level rationale scores over documents.

    Call :meth:`add` once per document, then :meth:`result`, which returns:

    ``selection_rate``
        selected tokens / all tokens, over all documents (with or without gold).
    ``precision``, ``recall``, ``f1``
        micro: selected-and-gold tokens / selected tokens (resp. / gold tokens),
        summed over documents with gold; ``f1`` is the harmonic mean of the two
        (the Dice score, so 0 rather than undefined when nothing is selected).
        This is the token precision of Lei et al. (2016) and Bastings et al.
        (2019).
    ``gold_share``
        gold tokens / tokens, over documents with gold: the expected precision of
        a selection made at random, whatever its rate (the chance level).
    ``precision_macro``, ``recall_macro``, ``f1_macro``
        per-document values averaged over documents with gold. A document that
        selects nothing has no precision and is left out of ``precision_macro``
        (it still counts for recall, with recall 0). A document with empty gold
        has no recall and is left out of ``recall_macro``. Per-document F1 is
        the Dice score (see :func:`document_scores`); documents where both the
        selection and the gold are empty are left out of ``f1_macro``.
    ``transitions``
        mean over all documents of the number of 0/1 switches inside a document
        (sum of |z_i - z_{i-1}| for i >= 1), the quantity Bastings et al.
        penalize to get contiguous rationales.
    ``spans``
        mean over all documents of the number of maximal runs of selected tokens
        (what span-level scores such as ERASER's IOU F1 match against gold spans, except
        that a rationale decoded in whole sentences gives them one span per sentence).
    ``documents``, ``documents_with_gold``
        counts; a document whose gold is empty (annotated, nothing marked) counts for
        precision but not in ``documents_with_gold``.

    Scores are None where undefined (no gold anywhere, nothing selected, no
    documents).
    """

    def __init__(self) -> None:
        self.documents = 0
        self.documents_with_gold = 0
        self.tokens = 0
        self.selected = 0
        self.transitions = 0
        self.spans = 0
        self.gold_selected = 0  # selected tokens in documents with gold
        self.gold_tokens = 0
        self.tokens_with_gold = 0  # all tokens of documents with gold
        self.overlap = 0
        self._precisions: list[float] = []
        self._recalls: list[float] = []
        self._f1s: list[float] = []

    def add(self, selected: Sequence[int | bool], gold: Sequence[int] | None = None) -> dict:
        """Add one document; returns its own scores (see :func:`document_scores`).

        ``gold`` None means the document has no gold annotation: it counts for
        the selection rate and transitions only.
        """
        doc = document_scores(selected, gold)
        self.documents += 1
        self.tokens += doc["tokens"]
        self.selected += doc["selected"]
        self.transitions += doc["transitions"]
        self.spans += doc["spans"]
        if gold is not None:
            self.documents_with_gold += doc["gold"] > 0
            self.tokens_with_gold += doc["tokens"]
            self.gold_selected += doc["selected"]
            self.gold_tokens += doc["gold"]
            self.overlap += doc["overlap"]
            for key, values in (("precision", self._precisions), ("recall", self._recalls), ("f1", self._f1s)):
                if doc[key] is not None:
                    values.append(doc[key])
        return doc

    def result(self) -> dict:
        precision = ratio(self.overlap, self.gold_selected)
        recall = ratio(self.overlap, self.gold_tokens)
        return {
            "selection_rate": ratio(self.selected, self.tokens),
            "precision": precision,
            "recall": recall,
            "f1": ratio(2 * self.overlap, self.gold_selected + self.gold_tokens),
            "gold_share": ratio(self.gold_tokens, self.tokens_with_gold),
            "precision_macro": mean(self._precisions),
            "recall_macro": mean(self._recalls),
            "f1_macro": mean(self._f1s),
            "transitions": ratio(self.transitions, self.documents),
            "spans": ratio(self.spans, self.documents),
            "documents": self.documents,
            "documents_with_gold": self.documents_with_gold,
        }


class TaskScores:
    """Base of the task-score accumulators: ``add(pred, gold)`` then ``result()``."""

    def __init__(self) -> None:
        self.documents = 0

    def add(self, pred, gold) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def result(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError


class RegressionScores(TaskScores):
    """Mean squared and mean absolute error (the beer aspects' scores, Bastings et al. Table 2).

    ``result()``: ``mse``, ``mae`` (None without documents), ``mse_of_mean`` (the chance
    level: the MSE of always predicting the mean gold score, i.e. its variance),
    ``documents``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._squared = 0.0
        self._absolute = 0.0
        self._gold: list[float] = []

    def add(self, pred: float, gold: float) -> None:
        error = float(pred) - float(gold)
        self.documents += 1
        self._squared += error * error
        self._absolute += abs(error)
        self._gold.append(float(gold))

    def result(self) -> dict:
        return {
            "mse": ratio(self._squared, self.documents),
            "mae": ratio(self._absolute, self.documents),
            "mse_of_mean": float(np.var(self._gold)) if self._gold else None,
            "documents": self.documents,
        }


class ClassificationScores(TaskScores):
    """Accuracy and macro F1 over class labels.

    ``labels`` fixes the order of ``f1_per_label``; labels outside it that turn
    up in predictions or gold are scored too. ``result()``: ``accuracy``,
    ``macro_f1`` (mean over the labels that occur in gold or predictions of the
    per-label F1 ``2tp / (2tp + fp + fn)``; 0 where undefined), ``f1_per_label``,
    ``majority_accuracy`` (the chance level: the share of the most frequent gold
    label) and ``documents``. Accuracy and macro F1 are None without documents.
    """

    def __init__(self, labels: Sequence[str]) -> None:
        super().__init__()
        self.labels = list(labels)
        self._tp: Counter[str] = Counter()
        self._fp: Counter[str] = Counter()
        self._fn: Counter[str] = Counter()
        self._correct = 0
        self._gold: Counter[str] = Counter()

    def add(self, pred: str, gold: str) -> None:
        pred, gold = str(pred), str(gold)
        self.documents += 1
        self._gold[gold] += 1
        if pred == gold:
            self._correct += 1
            self._tp[gold] += 1
        else:
            self._fp[pred] += 1
            self._fn[gold] += 1

    def result(self) -> dict:
        seen = set(self._tp) | set(self._fp) | set(self._fn)
        order = [label for label in self.labels if label in seen]
        order += sorted(seen - set(order))
        per_label = {}
        for label in order:
            tp, fp, fn = self._tp[label], self._fp[label], self._fn[label]
            per_label[label] = ratio(2 * tp, 2 * tp + fp + fn) or 0.0
        return {
            "accuracy": ratio(self._correct, self.documents),
            "macro_f1": mean(list(per_label.values())),
            "f1_per_label": per_label,
            "majority_accuracy": ratio(max(self._gold.values(), default=0), self.documents),
            "documents": self.documents,
        }

