"""FRESH with the full-text reference as its support, on ERASER movies: a linear predictor that
reads only the tokens the reference's saliency ranks first (Jain et al., 2020, section 3: a
support model's feature importance selects, a new classifier learns from the selection alone).

The support is the run's full-text reference (:mod:`rationale_cli.runs.reference`, fitted on the
train split, chosen on validation); each token's saliency is the absolute value of its share of
the reference's decision (:meth:`~rationale_cli.runs.reference.Reference.token_contributions`),
averaged over a window of ``w`` tokens (``w = 1``: the tokens alone; wider windows select phrases),
and a document keeps its top ``budget`` share of tokens (or, with ``--sentences``, its sentences
of highest mean saliency up to that share). The predictor is a new reference fitted on the
kept tokens of the training documents alone (its n-grams, penalty chosen on the validation
documents' kept tokens). Every setting of the grid is scored on validation; the best (accuracy,
then the narrower budget) is scored once on test, beside the full-text reference in the same run,
with ERASER's IOU and token F1 against the test split's gold evidence.

    python benchmarks/movies_saliency.py --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from pathlib import Path

import numpy as np
from common import append_result, git_commit, invocation

from rationale_cli.data import sources
from rationale_cli.data.records import Record, Span
from rationale_cli.metrics.eraser_scores import ScoredDocument, iou_scores, token_prf
from rationale_cli.runs.reference import Reference, fit_reference
from rationale_cli.runs.task import infer_task


def kept_tokens(reference: Reference, record: Record, budget: float, window: int, sentences: bool) -> list[int]:
    """The token positions the reference's saliency keeps in ``record`` (see the module docstring)."""
    saliency = np.abs(reference.token_contributions(record))
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


def spans_of(positions: list[int]) -> list[Span]:
    """Runs of consecutive positions as spans (end exclusive)."""
    spans: list[Span] = []
    for i in positions:
        if spans and spans[-1][1] == i:
            spans[-1] = (spans[-1][0], i + 1)
        else:
            spans.append((i, i + 1))
    return spans


def rationale_only(record: Record, positions: list[int]) -> Record:
    """The record reduced to its kept tokens (what the predictor reads)."""
    return dataclasses.replace(record, tokens=[record.tokens[i] for i in positions], rationale=None, text=None,
                               offsets=None, evidence=None, sentences=None, query=None)


def agreement(records: list[Record], kept: list[list[int]]) -> dict:
    """ERASER's IOU F1 (threshold 0.5) and token F1, macro and micro, against the gold evidence."""
    docs = [ScoredDocument(r.id, len(r.tokens), gold=r.gold_spans(), spans=spans_of(k)) for r, k in zip(records, kept)]
    iou, tokens = iou_scores(docs)[0], token_prf(docs)
    return {"iou_f1_macro": iou["macro"]["f1"], "iou_f1_micro": iou["micro"]["f1"],
            "token_f1_macro": tokens["instance_macro"]["f1"], "token_f1_micro": tokens["instance_micro"]["f1"],
            "selection_rate": sum(map(len, kept)) / sum(len(r.tokens) for r in records)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--budgets", nargs="+", type=float, default=[0.2, 0.3])
    parser.add_argument("--windows", nargs="+", type=int, default=[1, 3, 5, 9])
    parser.add_argument("--sentences", action="store_true", help="also try whole sentences at each budget")
    args = parser.parse_args()
    data = str(Path(args.data_dir) / "eraser_movies")
    train, valid, test = (sources.load(data, split) for split in ("train", "valid", "test"))
    task = infer_task([r.label for r in train])
    started = time.perf_counter()
    reference = fit_reference(train, valid, task)
    full_test = reference.score(test, task)
    print(f"full-text reference: {reference.setting}; validation {reference.valid['value']:.4f}, "
          f"test {full_test:.4f}", flush=True)
    grid = [(b, w, False) for b, w in itertools.product(args.budgets, args.windows)]
    grid += [(b, 1, True) for b in args.budgets] if args.sentences else []
    tried = []
    for budget, window, sentences in grid:
        kept_train = [kept_tokens(reference, r, budget, window, sentences) for r in train]
        kept_valid = [kept_tokens(reference, r, budget, window, sentences) for r in valid]
        predictor = fit_reference([rationale_only(r, k) for r, k in zip(train, kept_train)],
                                  [rationale_only(r, k) for r, k in zip(valid, kept_valid)], task)
        row = {"budget": budget, "window": window, "sentences": sentences, "accuracy": predictor.valid["value"],
               "predictor": predictor.setting, **agreement(valid, kept_valid)}
        tried.append(row)
        print(f"budget {budget:g}, window {window}{', sentences' if sentences else ''}: validation accuracy "
              f"{row['accuracy']:.3f} ({predictor.setting}), IOU F1 {row['iou_f1_macro']:.3f}, "
              f"token F1 {row['token_f1_macro']:.3f}", flush=True)
    best = max(tried, key=lambda row: (row["accuracy"], -row["budget"]))
    budget, window, sentences = best["budget"], best["window"], best["sentences"]
    kept_train = [kept_tokens(reference, r, budget, window, sentences) for r in train]
    kept_valid = [kept_tokens(reference, r, budget, window, sentences) for r in valid]
    kept_test = [kept_tokens(reference, r, budget, window, sentences) for r in test]
    predictor = fit_reference([rationale_only(r, k) for r, k in zip(train, kept_train)],
                              [rationale_only(r, k) for r, k in zip(valid, kept_valid)], task)
    accuracy = predictor.score([rationale_only(r, k) for r, k in zip(test, kept_test)], task)
    row = {"benchmark": "movies_saliency", "dataset": "movies", "chosen_on": "validation",
           "extractor": "reference saliency", "encoder": "linear (TF-IDF)", "predictor_encoder": "linear (TF-IDF)",
           "budget": budget, "window": window, "sentences": sentences, "predictor": predictor.setting,
           "accuracy": accuracy, "valid_accuracy": best["accuracy"], **agreement(test, kept_test),
           "reference_accuracy": full_test, "reference_setting": reference.setting,
           "difference": accuracy - full_test, "tried": tried, "seconds": round(time.perf_counter() - started),
           "command": invocation(), "commit": git_commit()}
    append_result(row)
    print(f"chosen on validation: budget {budget:g}, window {window}{', sentences' if sentences else ''}; test "
          f"accuracy {accuracy:.4f} (full-text reference {full_test:.4f}, {accuracy - full_test:+.4f}), "
          f"IOU F1 {row['iou_f1_macro']:.3f}, token F1 {row['token_f1_macro']:.3f}, "
          f"selected {row['selection_rate']:.1%}", flush=True)


if __name__ == "__main__":
    main()
