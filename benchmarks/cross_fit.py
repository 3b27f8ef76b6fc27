"""Choosing a decoding setting on gold rationales without testing on the same reviews.

The beer test reviews are the only ones with gold rationales, so a decoding setting chosen
by its precision on them (e.g. ``evaluate --coherence``) is not a blind test figure. Two-fold
cross-fitting keeps it blind per review: the annotated reviews are split in two halves by a
fixed shuffle; each half is decoded with the setting most precise on the *other* half (among
those that keep the selection rate asked for), and the scores are pooled over both halves from
``evaluate --per-document`` rows.
"""

from __future__ import annotations

import random
from typing import Hashable, Sequence

from rationale_cli.metrics.scores import RationaleScores, RegressionScores, mean


def halves(ids: Sequence[str], seed: int = 0) -> tuple[set[str], set[str]]:
    """The two folds: the sorted ids shuffled with ``seed`` and cut in the middle."""
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    middle = len(order) // 2
    return set(order[:middle]), set(order[middle:])


def laid_out(row: dict) -> tuple[list[int], list[int] | None]:
    """A selection and gold mask (None without gold) with a per-document row's counts
    (``tokens``, ``selected``, ``gold``, ``overlap``): what :class:`RationaleScores` pools."""
    tokens, selected = row["tokens"], row["selected"]
    chosen = [1] * selected + [0] * (tokens - selected)
    if row.get("gold") is None:
        return chosen, None
    overlap, missed = row["overlap"], row["gold"] - row["overlap"]
    return chosen, [1] * overlap + [0] * (selected - overlap) + [1] * missed + [0] * (tokens - selected - missed)


def pooled(rows: Sequence[dict]) -> dict:
    """Token precision, recall, F1 and selection rate (pooled over the documents by ``evaluate``'s
    own accumulators), the task's MSE and the mean faithfulness drops of per-document rows, keyed
    as in ``evaluate --json``."""
    rationale, task = RationaleScores(), RegressionScores()
    for row in rows:
        rationale.add(*laid_out(row))
        task.add(row["prediction"], row["label"])
    scores = rationale.result()
    drops = {key: [r[key] for r in rows if r.get(key) is not None] for key in ("comprehensiveness", "sufficiency")}
    return {
        **{key: scores[key] for key in ("precision", "recall", "f1", "selection_rate")},
        "mse": task.result()["mse"],
        "faithfulness": {key: mean(values) for key, values in drops.items()},
        "documents": len(rows),
    }


def cross_fit(rows_by_setting: dict[Hashable, list[dict]], rate: float | None = None, tolerance: float = 0.01,
              seed: int = 0) -> tuple[dict, list[Hashable]]:
    """Pooled scores of both halves, each decoded with the setting of the highest precision
    on the other half (the first listed setting on ties), and the setting each half got.

    ``rows_by_setting`` maps each setting to its per-document rows (with ``id``) over the same
    documents. With a ``rate``, only settings whose selection rate on the other half is within
    ``tolerance`` of it compete (precision rises as the selection shrinks, so a setting that
    fills less of the budget must not win on that), and the first setting where none is."""
    settings = list(rows_by_setting)
    folds = halves([row["id"] for row in rows_by_setting[settings[0]]], seed)
    chosen, rows = [], []
    for fold, other in (folds, folds[::-1]):
        scores = {s: pooled([r for r in rows_by_setting[s] if r["id"] in other]) for s in settings}
        fair = [s for s in settings if rate is None or abs(scores[s]["selection_rate"] - rate) <= tolerance]
        best = max(fair, key=lambda s: scores[s]["precision"] or 0.0) if fair else settings[0]  # the first of equals
        chosen.append(best)
        rows += [r for r in rows_by_setting[best] if r["id"] in fold]
    return pooled(rows), chosen
