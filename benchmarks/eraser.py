"""ERASER movies benchmark: train, write ERASER results for the test split, score them.

For each extractor: ``rationale train`` on the movies train split (validation: val), then
``rationale predict --output-format eraser`` on test, ``rationale score`` of that file and
``rationale evaluate`` (whose ``eraser`` block must equal the score's; the difference is
recorded). With ``--official DIR`` (a checkout of jayded/eraserbenchmark, which needs
scikit-learn and scipy) ERASER's own ``rationale_benchmark/metrics.py`` scores the same
file, and a file of random predictions (spans, tied soft scores, class and faithfulness
scores) as well, and the largest difference from ``rationale score`` is recorded.

    python benchmarks/eraser.py --data-dir ../shared/data --extractors attention hardkuma \\
        --official /path/to/eraserbenchmark -- --batch-size 32 --lr 0.001

Each extractor appends one line to benchmarks/results/eraser.jsonl;
RESULTS.md is then regenerated.

Test-time decoding chosen on validation: ``--decode-rate R`` holds each document's rationale at
that share, and ``--coherence-grid C1 C2 ...`` decodes the validation split with each cost per
transition (:mod:`rationale_cli.models.coherent`: the same tokens per document, placed in runs) and keeps the
one of lowest validation task loss for the test split, which is scored once. ``--full-text``
also trains the full-text model (extractor ``full``) with the same encoder, vectors and options,
the accuracy reference. Rows say what was chosen on validation (``chosen_on``). ``--decode-sentences``
decodes in whole sentences (a kind of rationale, set by hand), its files beside the others
(``test.results-sentences.jsonl``); ``--evaluate-only`` decodes and scores runs already trained in
``--runs`` with the same options.

    python benchmarks/eraser.py --extractors hardkuma --full-text --decode-rate 0.2 \
        --coherence-grid 0 0.1 0.3 1 --extractor-args '--coherence 0.002' -- --lr 0.001

A pretrained transformer on both sides (``--encoder hf --pretrained DIR``) reads no word vectors:

    python benchmarks/eraser.py --extractors hardkuma --encoder hf --pretrained ./minilm --decode-rate 0.2 \
        -- --lr 0.002 --pretrained-lr 5e-5 --freeze-layers 4
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import subprocess
import sys
from pathlib import Path

from common import (
    append_result,
    budget_options,
    git_commit,
    invocation,
    movies_inputs,
    rationale,
    rationale_command,
    runs_folder,
    vectors_name,
    word_inputs,
)
from report import write_report

from rationale_cli.data.readers import read_records


def largest_difference(official, ours, path: str = "") -> tuple[float, int, list[str]]:
    """The largest absolute difference between two score trees, the numbers compared, and
    the keys the official tree has that ours lacks (or holds differently)."""
    if isinstance(official, dict):
        worst, count, missing = 0.0, 0, []
        for key, value in official.items():
            if key not in (ours or {}):
                missing.append(f"{path}/{key}")
                continue
            w, c, m = largest_difference(value, ours[key], f"{path}/{key}")
            worst, count, missing = max(worst, w), count + c, missing + m
        return worst, count, missing
    if isinstance(official, list):
        if not isinstance(ours, list) or len(ours) != len(official):
            return 0.0, 0, [path]
        parts = [largest_difference(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(official, ours))]
        return (max((p[0] for p in parts), default=0.0), sum(p[1] for p in parts),
                [m for p in parts for m in p[2]])
    if isinstance(official, (int, float)) and not isinstance(official, bool):
        if not isinstance(ours, (int, float)):
            return 0.0, 0, [path]
        return abs(official - ours), 1, []
    return 0.0, 1, [] if official == ours else [path]


def official_scores(official: Path, data: Path, results: Path, out: Path) -> dict:
    subprocess.run([sys.executable, "-m", "rationale_benchmark.metrics", "--data_dir", str(data), "--split", "test",
                    "--results", str(results), "--score_file", str(out)], cwd=official, check=True,
                   capture_output=True)
    return json.loads(out.read_text())


def random_results(data: Path, out: Path, seed: int = 0) -> None:
    """Predictions that exercise every metric: several spans per document (some exact gold
    spans, some partial), soft scores with ties, class and faithfulness scores."""
    rng = random.Random(seed)
    lines = []
    for record in read_records(data, split="test"):
        n = len(record.tokens)
        spans, start = [], rng.randrange(5)
        while start < n:
            end = min(n, start + rng.randint(1, 30))
            spans.append((start, end))
            start = end + rng.randint(5, 80)
        for gold in rng.sample(record.evidence, min(2, len(record.evidence))):
            if gold[1] > gold[0] and all(gold[1] <= s or gold[0] >= e for s, e in spans):
                spans.append(gold)
        soft = [round(rng.random(), 1) for _ in range(n)]  # coarse: many ties

        def probs():
            p = rng.random()
            return {"NEG": p, "POS": 1 - p}
        scores = probs()
        line = {"annotation_id": record.id, "rationales": [{
            "docid": record.docid, "hard_rationale_predictions": [{"start_token": s, "end_token": e} for s, e in sorted(spans)],
            "soft_rationale_predictions": soft}],
            "classification": max(scores, key=scores.get), "classification_scores": scores,
            "comprehensiveness_classification_scores": probs(), "sufficiency_classification_scores": probs(),
            "thresholded_scores": [{"threshold": t, "comprehensiveness_classification_scores": probs(),
                                    "sufficiency_classification_scores": probs()}
                                   for t in (0.01, 0.05, 0.1, 0.2, 0.5)]}
        lines.append(json.dumps(line))
    out.write_text("\n".join(lines) + "\n")


def chosen_decoding(run: Path, data: Path, extractor: str, rate: str | None,
                    costs: list[float] | None) -> tuple[list[str], dict | None]:
    """The test-time decoding options (``--rate``, ``--coherence``) and, with a grid of costs, the
    validation task loss of each (the lowest chosen; gold rationales play no part)."""
    if extractor == "full":
        return [], None
    held = ["--rate", rate] if rate else []
    if not costs:
        return held, None
    losses = {}
    for cost in costs:
        out = run / f"val.coherence-{cost:g}.json"
        rationale("evaluate", str(run), str(data), "--split", "val", "--no-faithfulness", *held,
                  "--coherence", f"{cost:g}", "--json", str(out))
        losses[cost] = json.loads(out.read_text())["loss"]
    best = min(costs, key=lambda cost: (losses[cost], cost))
    return [*held, "--coherence", f"{best:g}"], {"coherence": best, "validation_loss": {f"{c:g}": losses[c] for c in costs}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", help="folder holding eraser_movies/ and glove_6B_50d_subset/")
    parser.add_argument("--extractors", nargs="+", default=["attention", "hardkuma"])
    parser.add_argument("--encoder", default="cnn")
    parser.add_argument("--vectors", type=Path, default=None, help="word vectors (default: the GloVe 6B 50-d subset)")
    parser.add_argument("--pretrained", type=Path, default=None,
                        help="with --encoder hf: the transformer's folder, read instead of word vectors")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--budget", default="0.2", help="--budget for extractors that take a rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--official", type=Path, default=None, help="a checkout of jayded/eraserbenchmark")
    parser.add_argument("--runs", default=None, help="keep run directories here (default: a temporary folder)")
    parser.add_argument("--full-text", action="store_true", help="also train the full-text model (extractor full)")
    parser.add_argument("--extractor-args", default="", help="options for the extractors' runs only, not the "
                        "full-text one (one string, e.g. '--coherence 0.002')")
    parser.add_argument("--decode-rate", default=None, help="decode each document at this share (--rate)")
    parser.add_argument("--decode-sentences", action="store_true",
                        help="decode in whole sentences (--sentences; with --decode-rate, that share of each document)")
    parser.add_argument("--evaluate-only", action="store_true",
                        help="decode and score the runs already trained in --runs with these options, no training")
    parser.add_argument("--coherence-grid", type=float, nargs="+", default=None, metavar="COST",
                        help="decode validation with each cost per transition, test with the lowest validation loss")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: extra options for `rationale train`")
    args = parser.parse_args()
    extra = [a for a in args.train_args if a != "--"]
    data, vectors = movies_inputs(args.data_dir, args.vectors)
    words = word_inputs(parser, args.encoder, args.pretrained, vectors)
    runs = runs_folder(args.runs, "eraser-runs-")
    commit = git_commit()
    checks = {}
    if args.official:
        rand = runs / "random.results.jsonl"
        random_results(data, rand)
        rationale("score", str(rand), str(data), "--json", str(runs / "random.score.json"))
        worst, count, missing = largest_difference(official_scores(args.official, data, rand, runs / "random.official.json"),
                                                   json.loads((runs / "random.score.json").read_text())["eraser"])
        checks["random_vs_official"] = {"max_abs_diff": worst, "values": count, "missing": missing}
        print(f"random predictions: {count} values, largest difference from the official scorer {worst:.2g}")
    for extractor in (["full"] if args.full_text else []) + args.extractors:
        run = runs / extractor
        budget = budget_options(extractor, args.budget)
        train_args = ("train", "--data", str(data), "--out", str(run), "--force", "--extractor", extractor,
                      "--encoder", args.encoder, *words, "--epochs", str(args.epochs), "--seed", str(args.seed), *budget,
                      *extra, *([] if extractor == "full" else shlex.split(args.extractor_args)))
        if args.evaluate_only:
            train_cmd, seconds = rationale_command(*train_args), json.loads((run / "metrics.json").read_text())["train_seconds"]
        else:
            train_cmd, seconds = rationale(*train_args)
        decoding, validation = chosen_decoding(run, data, extractor, args.decode_rate, args.coherence_grid)
        if args.decode_sentences and extractor != "full":
            decoding.append("--sentences")
        tag = "-sentences" if "--sentences" in decoding else ""
        results, score, evaluation = (run / f"{name}{tag}{ext}" for name, ext in
                                      (("test.results", ".jsonl"), ("score", ".json"), ("evaluate", ".json")))
        rationale("predict", str(run), str(data), "--output-format", "eraser", "--out", str(results), "--force",
                  *decoding)
        rationale("score", str(results), str(data), "--json", str(score))
        rationale("evaluate", str(run), str(data), "--json", str(evaluation), *decoding)
        scored = json.loads(score.read_text())
        evaluated = json.loads(evaluation.read_text())
        own = {"score_vs_evaluate": dict(zip(("max_abs_diff", "values", "missing"),
                                             largest_difference(evaluated["eraser"], scored["eraser"])))}
        if args.official:
            worst, count, missing = largest_difference(
                official_scores(args.official, data, results, run / "official.json"), scored["eraser"])
            own["official"] = {"max_abs_diff": worst, "values": count, "missing": missing}
        eraser, faith = scored["eraser"], evaluated["faithfulness"]
        cls = eraser["classification_scores"]
        append_result({
            "benchmark": "eraser", "dataset": "movies", "extractor": extractor, "encoder": args.encoder,
            "predictor_encoder": json.loads((run / "config.json").read_text()).get("predictor_encoder") or args.encoder,
            "vectors": (args.pretrained.name if args.pretrained else vectors_name(vectors)) if words else None,
            "budget": args.budget if budget else None, "epochs": args.epochs, "seed": args.seed,
            "accuracy": cls["accuracy"], "majority_accuracy": evaluated["majority_accuracy"],
            "reference_accuracy": evaluated.get("full_text_reference", {}).get("value"),
            "valid_accuracy": json.loads((run / "metrics.json").read_text())["valid"].get("accuracy"),
            "selection_rate": evaluated["selection_rate"], "gold_share": evaluated["gold_share"],
            "precision": evaluated["precision"], "recall": evaluated["recall"],
            "token_f1_micro": eraser["token_prf"]["instance_micro"]["f1"],
            "token_f1_macro": eraser["token_prf"]["instance_macro"]["f1"],
            "iou_f1_micro": eraser["iou_scores"][0]["micro"]["f1"], "iou_f1_macro": eraser["iou_scores"][0]["macro"]["f1"],
            "spans": evaluated.get("spans"), "decoding": " ".join(decoding) or None, "validation": validation,
            "chosen_on": "validation",
            "span_f1": eraser["rationale_prf"]["instance_micro"]["f1"],
            "auprc": eraser["token_soft_metrics"]["auprc"], "average_precision": eraser["token_soft_metrics"]["average_precision"],
            "roc_auc": eraser["token_soft_metrics"]["roc_auc_score"],
            "comprehensiveness": cls["comprehensiveness"], "sufficiency": cls["sufficiency"],
            "comprehensiveness_aopc": cls["comprehensiveness_aopc"], "sufficiency_aopc": cls["sufficiency_aopc"],
            "predictor_on_rationale": faith["predictor_on_rationale"],
            "predictor_on_complement": faith["predictor_on_complement"],
            "checks": {**checks, **own}, "train_seconds": round(seconds, 1),
            "command": train_cmd, "script": invocation(), "commit": commit,
        })
    write_report()


if __name__ == "__main__":
    main()
