"""FRESH with the full-text reference as its support, on ERASER movies and the beer aspects: a
linear predictor that reads only the tokens the reference's saliency ranks first (Jain et al., 2020, section 3: a
support model's feature importance selects, a new classifier learns from the selection alone).

The support is the run's full-text reference (:mod:`rationale_cli.runs.reference`, fitted on the
train split, chosen on validation); each token's saliency is the absolute value of its share of
the reference's decision (:meth:`~rationale_cli.runs.reference.Reference.token_contributions`;
with ``--saliency words``, the score ``train --support reference`` ranks by instead: its word's
saliency times ``(1 + log n) / n``, :mod:`rationale_cli.models.selectors.saliency`),
averaged over a window of ``w`` tokens (``w = 1``: the tokens alone; wider windows select phrases),
and a document keeps its top ``budget`` share of tokens (or, with ``--sentences``, its sentences
of highest mean saliency up to that share). The predictor is a new reference fitted on the
kept tokens of the training documents alone (its n-grams, penalty chosen on the validation
documents' kept tokens). Every setting of the grid is scored on validation; the best (the task metric,
then the narrower budget) is scored once on test, beside the full-text reference in the same run,
with ERASER's IOU and token F1 and the token precision against the test split's gold rationales
(whole sentences are one span each, as ``rationale`` gives them).
The splits are ``reference.py``'s (beer: 9,000 / 1,000 of the aspect's heldout reviews, tested on
the 994 annotated ones).

    python benchmarks/reference_saliency.py --data-dir ../shared/data --sentences
    python benchmarks/reference_saliency.py --data-dir ../shared/data --budgets 0.3 0.4 0.5 --sentences-only \
        --saliency words
    python benchmarks/reference_saliency.py --data-dir ../shared/data --datasets beer0 --budgets 0.1 0.13 0.2
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from collections import Counter
from pathlib import Path

import numpy as np
from common import append_result, git_commit, invocation
from reference import splits

from rationale_cli.data.records import Record, mask_to_spans
from rationale_cli.metrics.eraser_scores import ScoredDocument, iou_scores, token_prf
from rationale_cli.runs.reference import Reference, better, fit_reference, main_metric
from rationale_cli.runs.task import infer_task


def word_scores(reference: Reference, record: Record) -> np.ndarray:
    """Each token's saliency as ``train --support reference`` scores it: its word's times ``(1 + log n) / n``, ``n`` the
    word's count in the document (:mod:`rationale_cli.models.selectors.saliency`)."""
    seen = Counter(record.tokens)
    counts = np.array([seen[token] for token in record.tokens], dtype=np.float64)
    return reference.word_saliency(record.tokens) * (1 + np.log(counts)) / counts


def kept_tokens(reference: Reference, record: Record, budget: float, window: int, sentences: bool,
                words: bool = False) -> list[int]:
    """The token positions the reference's saliency keeps in ``record`` (see the module docstring)."""
    saliency = word_scores(reference, record) if words else np.abs(reference.token_contributions(record))
    if window > 1:
        saliency = np.convolve(saliency, np.ones(window) / window, mode="same")
    size = max(1, round(budget * len(saliency)))
    if not sentences:
        return sorted(np.argsort(-saliency, kind="stable")[:size].tolist())
    spans = record.sentence_spans()
    order = sorted(range(len(spans)), key=lambda i: -saliency[spans[i][0]:spans[i][1]].mean())
    kept: list[int] = []
    for i in order:
        start, end = spans[i]
        if kept and len(kept) + end - start > size:
            continue
        kept.extend(range(start, end))
    return sorted(kept)


def rationale_only(record: Record, positions: list[int]) -> Record:
    """The record reduced to its kept tokens (what the predictor reads)."""
    return dataclasses.replace(record, tokens=[record.tokens[i] for i in positions], rationale=None, text=None,
                               offsets=None, evidence=None, sentences=None, query=None)


def agreement(records: list[Record], kept: list[list[int]], sentences: bool) -> dict:
    """ERASER's IOU F1 (threshold 0.5) and token F1, macro and micro, against the gold evidence
    (None where the documents have none), and the share of tokens kept."""
    share = sum(map(len, kept)) / sum(len(r.tokens) for r in records)
    if all(r.gold_spans() is None for r in records):
        return {name: None for name in ("iou_f1_macro", "iou_f1_micro", "token_f1_macro", "token_f1_micro",
                                        "precision")} | {"selection_rate": share}
    docs = [ScoredDocument(r.id, len(r.tokens), gold=r.gold_spans(),
                           spans=mask_to_spans(np.isin(np.arange(len(r.tokens)), k),
                                               r.sentence_spans() if sentences else None))
            for r, k in zip(records, kept)]
    iou, tokens = iou_scores(docs)[0], token_prf(docs)
    return {"iou_f1_macro": iou["macro"]["f1"], "iou_f1_micro": iou["micro"]["f1"],
            "token_f1_macro": tokens["instance_macro"]["f1"], "token_f1_micro": tokens["instance_micro"]["f1"],
            "precision": tokens["instance_micro"]["p"], "selection_rate": share}


def shown(value: float | None) -> str:
    """A score for a line, '-' where the documents have no gold rationales."""
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--datasets", nargs="+", default=["movies"], help="movies, beer0, beer1, beer2")
    parser.add_argument("--budgets", nargs="+", type=float, default=[0.2, 0.3])
    parser.add_argument("--windows", nargs="+", type=int, default=[1, 3, 5, 9])
    parser.add_argument("--sentences", action="store_true", help="also try whole sentences at each budget")
    parser.add_argument("--sentences-only", action="store_true", help="whole sentences alone at each budget")
    parser.add_argument("--saliency", choices=("contributions", "words"), default="contributions",
                        help="each token's n-gram shares of the decision, or train --support reference's per-word saliency")
    args = parser.parse_args()
    for name in args.datasets:
        measure(name, *splits(name, Path(args.data_dir)), args)


def measure(name: str, train: list[Record], valid: list[Record], test: list[Record], args: argparse.Namespace) -> None:
    """The grid on validation, the chosen setting once on test, one results row."""
    task = infer_task([r.label for r in train])
    metric = main_metric(task)
    started = time.perf_counter()
    reference = fit_reference(train, valid, task)
    full_test = reference.score(test, task)
    print(f"{name}: full-text reference: {reference.setting}; validation {metric} {reference.valid['value']:.4f}, "
          f"test {full_test:.4f}", flush=True)

    def fitted(budget: float, window: int, sentences: bool, *splits: list[Record]):
        kept = [[kept_tokens(reference, r, budget, window, sentences, args.saliency == "words") for r in split]
                for split in splits]
        predictor = fit_reference([rationale_only(r, k) for r, k in zip(splits[0], kept[0])],
                                  [rationale_only(r, k) for r, k in zip(splits[1], kept[1])], task)
        return predictor, kept

    grid = [] if args.sentences_only else [(b, w, False) for b, w in itertools.product(args.budgets, args.windows)]
    grid += [(b, 1, True) for b in args.budgets] if args.sentences or args.sentences_only else []
    tried = []
    for budget, window, sentences in grid:
        predictor, (_, kept_valid) = fitted(budget, window, sentences, train, valid)
        row = {"budget": budget, "window": window, "sentences": sentences, metric: predictor.valid["value"],
               "predictor": predictor.setting, **agreement(valid, kept_valid, sentences)}
        tried.append(row)
        print(f"budget {budget:g}, window {window}{', sentences' if sentences else ''}: validation {metric} "
              f"{row[metric]:.4f} ({predictor.setting}), IOU F1 {shown(row['iou_f1_macro'])}, "
              f"token F1 {shown(row['token_f1_macro'])}", flush=True)
    best = tried[0]
    for row in tried[1:]:
        if better(metric, row[metric], best[metric]) or (row[metric] == best[metric] and row["budget"] < best["budget"]):
            best = row
    budget, window, sentences = best["budget"], best["window"], best["sentences"]
    predictor, (_, _, kept_test) = fitted(budget, window, sentences, train, valid, test)
    value = predictor.score([rationale_only(r, k) for r, k in zip(test, kept_test)], task)
    row = {"benchmark": "reference_saliency", "dataset": name, "chosen_on": "validation",
           "extractor": "reference saliency" + (" (words)" if args.saliency == "words" else ""), "encoder": "linear (TF-IDF)", "predictor_encoder": "linear (TF-IDF)",
           "budget": budget, "window": window, "sentences": sentences, "predictor": predictor.setting,
           "metric": metric, metric: value, f"valid_{metric}": best[metric], **agreement(test, kept_test, sentences),
           f"reference_{metric}": full_test, "reference_setting": reference.setting,
           "difference": value - full_test, "tried": tried, "seconds": round(time.perf_counter() - started),
           "documents": {"train": len(train), "valid": len(valid), "test": len(test)},
           "command": invocation(), "commit": git_commit()}
    append_result(row)
    print(f"{name}, chosen on validation: budget {budget:g}, window {window}{', sentences' if sentences else ''}; "
          f"test {metric} {value:.4f} (full-text reference {full_test:.4f}, {value - full_test:+.4f}), "
          f"IOU F1 {shown(row['iou_f1_macro'])}, token F1 {shown(row['token_f1_macro'])}, precision "
          f"{shown(row['precision'])}, selected {row['selection_rate']:.1%}", flush=True)


if __name__ == "__main__":
    main()
