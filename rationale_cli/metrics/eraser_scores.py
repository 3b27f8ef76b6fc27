"""ERASER's metrics (DeYoung et al., 2020, section 4), with the definitions and the
layout of the benchmark's official scorer (``rationale_benchmark/metrics.py``), so a
score file from here and one from there can be compared key by key.

Agreement with a human rationale, from hard predictions (token and span sets):

- ``token_prf``: token precision/recall/F1. ``instance_micro`` counts tokens over all
  documents; ``instance_macro`` averages per-document P, R and F1 over the documents
  that have gold tokens or selected tokens, a document selecting nothing having P = 0
  and one with empty gold R = 0 (``rationale_cli.metrics.scores`` leaves such documents out
  instead: its ``precision_macro`` etc.).
- ``rationale_prf``: the same over whole spans, a predicted span counting only when it
  equals an annotated span exactly.
- ``iou_scores``: a predicted span is a true positive when its intersection over union
  with some annotated span is at least the threshold (0.5); micro P/R/F1 count spans
  over all documents, macro P and R are per-document averages and macro F1 their
  harmonic mean.

From soft scores (``token_scores``, one per token), per document with gold tokens:
``auprc`` (area under the precision-recall curve, trapezoids), ``average_precision``
and ``roc_auc_score`` (these two over documents whose tokens are not all of one class).

Faithfulness (classification), from the class probabilities of the full document
``p(y|x)``, of the document without its rationale and of the rationale alone, for the
predicted class y: ``comprehensiveness`` = mean p(y|x) - p(y|x without r),
``sufficiency`` = mean p(y|x) - p(y|r); their entropy differences and KL divergences;
and ``comprehensiveness_aopc``/``sufficiency_aopc``, the same differences averaged over
the bins of top-ranked tokens (``aopc_thresholds``), per bin in ``..._aopc_points``.

Everything is plain Python and numpy; a value the official scorer cannot compute (it
divides by zero) is None here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from rationale_cli.data.records import Span
from rationale_cli.metrics.scores import mean, ratio

IOU_THRESHOLDS = (0.5,)
AOPC_THRESHOLDS = (0.01, 0.05, 0.1, 0.2, 0.5)

__all__ = ["ScoredDocument", "IOU_THRESHOLDS", "AOPC_THRESHOLDS", "eraser_scores", "token_prf", "span_prf",
           "iou_scores", "soft_scores", "classification_scores", "pr_auc", "average_precision", "roc_auc"]


@dataclass
class ScoredDocument:
    """One document's gold and predictions, as scored.

    ``gold``: annotated spans (end exclusive; they may overlap or be empty), None when
    the document has no gold annotation. ``spans``: predicted hard spans. ``soft``: a
    score per token or None. ``prediction``: the predicted class (or score, for
    regression) and ``class_scores`` its probabilities; ``comprehensiveness`` and
    ``sufficiency``: the probabilities without the rationale and from the rationale
    alone; ``thresholded``: ``{"threshold", "comprehensiveness_classification_scores",
    "sufficiency_classification_scores"}`` per AOPC bin.
    """

    id: str
    length: int
    gold: list[Span] | None = None
    spans: list[Span] | None = None
    soft: list[float] | None = None
    label: str | float | None = None
    prediction: str | float | None = None
    class_scores: dict[str, float] | None = None
    comprehensiveness: dict[str, float] | None = None
    sufficiency: dict[str, float] | None = None
    thresholded: list[dict] | None = None


def tokens_of(spans: Iterable[Span]) -> set[int]:
    return {i for start, end in spans for i in range(start, end)}


def f1(p: float, r: float) -> float:
    """ERASER's F1: 0 when either side is 0."""
    return 0.0 if p == 0 or r == 0 else 2 * p * r / (p + r)


def set_prf(pairs: Sequence[tuple[set, set]]) -> dict:
    """Micro and per-document macro P/R/F1 of (gold set, predicted set) pairs; documents
    where both sets are empty take no part in the macro averages."""
    overlap = sum(len(g & p) for g, p in pairs)
    n_pred, n_gold = sum(len(p) for _, p in pairs), sum(len(g) for g, _ in pairs)
    micro_p, micro_r = ratio(overlap, n_pred), ratio(overlap, n_gold)
    per_doc = []
    for g, p in pairs:
        if g or p:
            dp = len(g & p) / len(p) if p else 0.0
            dr = len(g & p) / len(g) if g else 0.0
            per_doc.append((dp, dr, f1(dp, dr)))
    macro = [mean([row[i] for row in per_doc]) for i in range(3)]
    return {
        "instance_micro": {"p": micro_p, "r": micro_r,  # F1 0 when either side is 0 or undefined
                           "f1": None if micro_p is None and micro_r is None else f1(micro_p or 0.0, micro_r or 0.0)},
        "instance_macro": {"p": macro[0], "r": macro[1], "f1": macro[2]},
    }


def token_prf(docs: Sequence[ScoredDocument]) -> dict:
    """Token-level P/R/F1 (``token_prf``) over documents with gold."""
    return set_prf([(tokens_of(d.gold), tokens_of(d.spans or [])) for d in docs if d.gold is not None])


def span_prf(docs: Sequence[ScoredDocument]) -> dict:
    """Exact span match P/R/F1 (``rationale_prf``)."""
    return set_prf([(set(d.gold), set(d.spans or [])) for d in docs if d.gold is not None])


def iou(a: Span, b: Span) -> float:
    """Intersection over union of two token spans (0 when both are empty)."""
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union if union > 0 else 0.0


def iou_scores(docs: Sequence[ScoredDocument], thresholds: Sequence[float] = IOU_THRESHOLDS) -> list[dict]:
    """Partial-match P/R/F1 at each IOU threshold (``iou_scores``)."""
    rows = []  # (distinct gold spans, best IOU of each distinct predicted span)
    for d in docs:
        if d.gold is None:
            continue
        gold = set(d.gold)
        best = [max((iou(p, g) for g in gold), default=0.0) for p in set(d.spans or [])]
        rows.append((len(gold), best))
    out = []
    for threshold in thresholds:
        hits = [sum(b >= threshold for b in best) for _, best in rows]
        n_gold, n_pred = sum(n for n, _ in rows), sum(len(best) for _, best in rows)
        micro_r = sum(hits) / n_gold if n_gold else 0.0
        micro_p = sum(hits) / n_pred if n_pred else 0.0
        macro_r = mean([h / n for h, (n, _) in zip(hits, rows) if n]) or 0.0
        macro_p = mean([h / len(best) for h, (_, best) in zip(hits, rows) if best]) or 0.0
        out.append({"threshold": threshold,
                    "micro": {"p": micro_p, "r": micro_r, "f1": f1(micro_r, micro_p)},
                    "macro": {"p": macro_p, "r": macro_r, "f1": f1(macro_r, macro_p)}})
    return out


def ranked_counts(truth: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """True and false positives above each distinct score, highest score first (tied
    tokens enter together)."""
    order = np.argsort(-scores, kind="stable")
    s, t = scores[order], truth[order]
    last = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1]
    tps = np.cumsum(t)[last]
    return tps, last + 1 - tps


def pr_auc(truth: Sequence[bool], scores: Sequence[float]) -> float:
    """Area under the precision-recall curve by trapezoids, from (recall 0, precision 1)
    through one point per distinct score (as sklearn's ``auc(recall, precision)`` on
    ``precision_recall_curve``). Needs at least one gold token."""
    tps, fps = ranked_counts(np.asarray(truth, dtype=float), np.asarray(scores, dtype=float))
    recall = np.r_[0.0, tps / tps[-1]]
    precision = np.r_[1.0, tps / (tps + fps)]
    return float(np.sum(np.diff(recall) * (precision[1:] + precision[:-1]) / 2))


def average_precision(truth: Sequence[bool], scores: Sequence[float]) -> float:
    """Sum over distinct scores of the recall gained times the precision there (no
    interpolation, as sklearn's ``average_precision_score``)."""
    tps, fps = ranked_counts(np.asarray(truth, dtype=float), np.asarray(scores, dtype=float))
    recall = np.r_[0.0, tps / tps[-1]]
    return float(np.sum(np.diff(recall) * tps / (tps + fps)))


def roc_auc(truth: Sequence[bool], scores: Sequence[float]) -> float:
    """Area under the ROC curve: the chance that a gold token outscores another token,
    ties counting one half (Mann-Whitney). Needs both classes."""
    truth = np.asarray(truth, dtype=bool)
    scores = np.asarray(scores, dtype=float)
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    s = scores[order]
    starts = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1]
    ends = np.r_[starts[1:], len(s)]
    for a, b in zip(starts, ends):  # tied scores share their mean rank
        ranks[order[a:b]] = (a + b + 1) / 2
    pos, neg = int(truth.sum()), int((~truth).sum())
    return float((ranks[truth].sum() - pos * (pos + 1) / 2) / (pos * neg))


def soft_scores(docs: Sequence[ScoredDocument]) -> dict | None:
    """``auprc`` over documents with gold tokens, ``average_precision`` and
    ``roc_auc_score`` over those with both gold and other tokens; None without soft
    scores."""
    auprc, ap, auc = [], [], []
    for d in docs:
        if d.soft is None or d.gold is None:
            continue
        gold = tokens_of(d.gold)
        truth = [i in gold for i in range(d.length)]
        if not gold:
            continue
        auprc.append(pr_auc(truth, d.soft))
        if len(gold) < d.length:
            ap.append(average_precision(truth, d.soft))
            auc.append(roc_auc(truth, d.soft))
    if not any(d.soft is not None for d in docs):
        return None
    return {"auprc": mean(auprc), "average_precision": mean(ap), "roc_auc_score": mean(auc)}


def entropy(p: Iterable[float]) -> float:
    """Shannon entropy (nats) of ``p`` normalized to sum 1."""
    p = np.asarray(list(p), dtype=float)
    p = p / p.sum()
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def kl(p: dict[str, float], q: dict[str, float]) -> float:
    """KL(p || q) over q's classes, both normalized to sum 1."""
    keys = list(q)
    pv = np.array([p[k] for k in keys], dtype=float)
    qv = np.array([q[k] for k in keys], dtype=float)
    pv, qv = pv / pv.sum(), qv / qv.sum()
    terms = [a * math.log(a / b) if b > 0 else math.inf for a, b in zip(pv, qv) if a > 0]
    return float(sum(terms))


def label_prf(docs: Sequence[ScoredDocument]) -> dict:
    """Per-class precision, recall, F1 and support, with macro and support-weighted
    averages and accuracy (the layout of sklearn's ``classification_report``)."""
    labels = sorted({str(d.label) for d in docs} | {str(d.prediction) for d in docs})
    out: dict = {}
    for label in labels:
        tp = sum(str(d.label) == label and str(d.prediction) == label for d in docs)
        n_pred = sum(str(d.prediction) == label for d in docs)
        n_gold = sum(str(d.label) == label for d in docs)
        p, r = ratio(tp, n_pred) or 0.0, ratio(tp, n_gold) or 0.0
        out[label] = {"precision": p, "recall": r, "f1-score": f1(p, r), "support": n_gold}
    rows = [out[label] for label in labels]
    keys = ("precision", "recall", "f1-score")
    out["accuracy"] = sum(str(d.label) == str(d.prediction) for d in docs) / len(docs)
    out["macro avg"] = {**{k: mean([row[k] for row in rows]) for k in keys}, "support": len(docs)}
    out["weighted avg"] = {**{k: sum(row[k] * row["support"] for row in rows) / len(docs) for k in keys},
                           "support": len(docs)}
    return out


def drop(full, altered, prediction) -> float:
    """How far the prediction falls on an altered document: p(y|x) - p(y|x') for the
    predicted class y, or the absolute change of a regression score."""
    if isinstance(full, dict):
        return full[prediction] - altered[prediction]
    return abs(full - altered)


def drops(docs: Sequence[ScoredDocument], field: str) -> list[float] | None:
    """Each document's drop on its ``comprehensiveness`` or ``sufficiency`` document;
    None when a document lacks it."""
    if any(getattr(d, field) is None for d in docs):
        return None
    return [drop(d.class_scores, getattr(d, field), d.prediction) for d in docs]


def aopc(docs: Sequence[ScoredDocument], thresholds: Sequence[float], field: str) -> tuple[float, list[float]]:
    """The mean drop over documents and bins, and per bin, for ``field`` (comprehensiveness
    or sufficiency)."""
    key = f"{field}_classification_scores"
    table = []
    for d in docs:
        by_threshold = {row["threshold"]: row[key] for row in d.thresholded}
        table.append([drop(d.class_scores, by_threshold[t], d.prediction) for t in thresholds])
    array = np.array(table)
    return float(array.mean()), array.mean(axis=0).tolist()


def bins(docs: Sequence[ScoredDocument]) -> list[float] | None:
    """The AOPC thresholds to average over: ERASER's when the documents have them all (as
    its scorer, which reads no others), else the documents' own (None if one has none)."""
    if not docs or any(d.thresholded is None for d in docs):
        return None
    own = [row["threshold"] for row in docs[0].thresholded]
    return list(AOPC_THRESHOLDS) if set(AOPC_THRESHOLDS) <= set(own) else own


def classification_scores(docs: Sequence[ScoredDocument]) -> dict:
    """Accuracy, per-class P/R/F1 and the faithfulness scores (``classification_scores``),
    AOPC over the documents' own bins; faithfulness entries are None when the documents
    lack the scores they need."""
    prf = label_prf(docs)
    out: dict = {"accuracy": prf["accuracy"], "prf": prf}
    for name in ("comprehensiveness", "sufficiency"):
        values = drops(docs, name)
        out[name] = mean(values) if values is not None else None
        if values is None:
            out[f"{name}_entropy"] = out[f"{name}_kl"] = None
        else:
            out[f"{name}_entropy"] = mean([entropy(d.class_scores.values()) - entropy(getattr(d, name).values())
                                           for d in docs])
            out[f"{name}_kl"] = mean([kl(getattr(d, name), d.class_scores) for d in docs])
    thresholds = bins(docs)
    if thresholds:
        out["aopc_thresholds"] = thresholds
        for name in ("comprehensiveness", "sufficiency"):
            out[f"{name}_aopc"], out[f"{name}_aopc_points"] = aopc(docs, thresholds, name)
    else:
        out["aopc_thresholds"] = None
        for name in ("comprehensiveness", "sufficiency"):
            out[f"{name}_aopc"] = out[f"{name}_aopc_points"] = None
    return out


def eraser_scores(docs: Sequence[ScoredDocument], *, iou_thresholds: Sequence[float] = IOU_THRESHOLDS,
                  hard: bool = True) -> dict:
    """Every ERASER score the documents allow, keyed as in the official score file:
    ``iou_scores``, ``rationale_prf``, ``token_prf`` (with hard predictions),
    ``token_soft_metrics`` (with soft scores), ``classification_scores`` (with classes)."""
    out: dict = {}
    if hard:
        out["iou_scores"] = iou_scores(docs, iou_thresholds)
        out["rationale_prf"] = span_prf(docs)
        out["token_prf"] = token_prf(docs)
    soft = soft_scores(docs)
    if soft is not None:
        out["token_soft_metrics"] = soft
    if docs and all(d.class_scores is not None and isinstance(d.prediction, str) for d in docs):
        out["classification_scores"] = classification_scores(docs)
    return out
