"""ERASER movies, two-stage: ``rationale train --support RUN`` with each predictor, beside the
full-text reference (:mod:`rationale_cli.training.support`, FRESH: Jain et al., 2020, section 3).

For each predictor of ``--predictors`` (bow, cnn, hf, ...), a run is trained on the support's
rationales of the train split, decoded at the support's budget in whole sentences and, with
``--tokens``, also as its best tokens (``--no-support-sentences``), at each learning rate of
``--lrs``; the decoding and rate of lowest validation loss are chosen for that predictor (gold rationales play no part;
for the ``linear`` predictor, fitted in one pass, the highest validation accuracy, then the lowest loss: its
regularisation is chosen on accuracy, so its losses at different strengths are not comparable). Only then is the
chosen run evaluated once on the test split: its accuracy (from the rationale alone), ERASER's
token and IOU F1 of its rationales, and the run's full-text reference on the same documents.
One row per predictor (``benchmark: eraser_support``) in benchmarks/results/; RESULTS.md is
regenerated. ``--support reference``: each run's own full-text reference selects (the
``saliency`` extractor; its best tokens, or with ``--tokens`` also whole sentences; its budget and
window among the options after ``--``, or the budget chosen on validation among ``--budgets``).
``--budgets`` with a support run: the sizes its rationales are decoded at (``--support-budget``),
each tried, the support's own budget among them only if listed.

    python benchmarks/eraser_support.py --support RUN --predictors bow cnn --runs /tmp/support -- --epochs 20
    python benchmarks/eraser_support.py --support reference --predictors bow -- --budget 0.3 --epochs 30
    python benchmarks/eraser_support.py --support reference --decodings sentences --predictors bow \
        --budgets 0.3 0.4 0.5 -- --epochs 30
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import (
    append_result,
    device_name,
    git_commit,
    invocation,
    movies_inputs,
    rationale,
    rationale_command,
    runs_folder,
)
from report import write_report

from rationale_cli.runtime.devices import resolve_device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--support", required=True, help="a trained run on ERASER movies, or 'reference'")
    parser.add_argument("--data-dir", default="../shared/data", help="folder holding eraser_movies/")
    parser.add_argument("--predictors", nargs="+", default=["bow", "cnn"], help="the new runs' predictor encoders")
    parser.add_argument("--tokens", action="store_true",
                        help="also try the other decoding: a run's best tokens, the reference's sentences")
    parser.add_argument("--decodings", nargs="+", choices=("sentences", "tokens"), default=None,
                        help="the decodings to try (instead of the support's usual one, or both with --tokens)")
    parser.add_argument("--lrs", nargs="+", default=["0.001"], help="learning rates to try (each with each decoding)")
    parser.add_argument("--freezes", nargs="+", default=None,
                        help="with an hf predictor: how many of its lowest layers to keep fixed, each tried")
    parser.add_argument("--budgets", nargs="+", default=None,
                        help="budgets to try (each with each decoding and rate): the reference's, or the sizes a "
                             "support run's rationales are decoded at")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-test", action="store_true",
                        help="train the grid and stop (no test split, no row): part of a grid run elsewhere")
    parser.add_argument("--reuse", action="store_true",
                        help="read a run that finished training in --runs (and its test scores, if any) "
                             "instead of training (and testing) it again; a test read back is not recorded again")
    parser.add_argument("--runs", default=None, help="keep the new runs here (default: a temporary folder)")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: options for the new runs' training")
    args = parser.parse_args()
    extra = [a for a in args.train_args if a != "--"]
    data, _ = movies_inputs(args.data_dir)
    runs = runs_folder(args.runs, "eraser-support-")
    reference = args.support == "reference"
    if args.budgets and {"--budget", "--support-budget"} & set(extra):
        parser.error("--budgets or a --budget or --support-budget after --, not both")
    if "--lr" in extra:  # the runs' names and rows carry the rate of --lrs; a later --lr would win unseen
        parser.error("learning rates go in --lrs, not after --")
    if args.freezes and "--freeze-layers" in extra:
        parser.error("--freezes or a --freeze-layers after --, not both")
    if reference:
        given = dict(zip(extra, extra[1:]))
        support = {"extractor": "saliency", "encoder": "reference (TF-IDF linear)",
                   "budget": float(given.get("--budget", 0.3)), "window": int(given.get("--window", 1))}
        usual, other = ("tokens", ["--no-support-sentences"]), ("sentences", ["--support-sentences"])
    else:
        support = json.loads((Path(args.support) / "config.json").read_text())
        usual, other = ("sentences", ["--support-sentences"]), ("tokens", ["--no-support-sentences"])
    decodings = dict([usual, other] if args.tokens else [usual])
    if args.decodings:
        decodings = {name: flags for name, flags in (usual, other) if name in args.decodings}
    for predictor in args.predictors:
        tried = {}
        grid = ((d, lr, b, f) for d in decodings for lr in args.lrs for b in args.budgets or [None]
                for f in args.freezes or [None])
        for decoding, lr, budget, freeze in grid:
            out = runs / (f"{predictor}-{decoding}-lr{lr}" + ("" if budget is None else f"-b{budget}")
                          + ("" if freeze is None else f"-f{freeze}"))
            sized = "--budget" if reference else "--support-budget"
            flags = (decodings[decoding] + ([] if budget is None else [sized, budget])
                     + ([] if freeze is None else ["--freeze-layers", freeze]))
            train = ("train", "--data", str(data), "--support", str(args.support), "--predictor-encoder", predictor,
                     *flags, "--lr", lr, "--seed", str(args.seed), "--out", str(out), "--force", *extra)
            if not (args.reuse and (out / "metrics.json").exists()):
                rationale(*train)
            command = rationale_command(*train)
            metrics = json.loads((out / "metrics.json").read_text())
            name = (f"{decoding}, lr {lr}" + ("" if budget is None else f", budget {budget}")
                    + ("" if freeze is None else f", {freeze} layers fixed"))
            tried[name] = {"decoding": decoding, "lr": float(lr), "budget": budget, "freeze_layers": freeze,
                           "validation_loss": metrics["valid"]["loss"],
                           "validation_accuracy": metrics["valid"]["accuracy"], "run": out, "command": command,
                           "train_seconds": round(metrics["train_seconds"], 1), "epochs": len(metrics["history"]),
                           "setting": metrics["history"][0].get("predictor"),  # a fitted predictor's
                           "device": json.loads((out / "config.json").read_text())["device"]}
        for name, row in tried.items():
            print(f"{predictor} predictor, {name}: validation loss {row['validation_loss']:.4f}, accuracy "
                  f"{row['validation_accuracy']:.3f}", flush=True)
        if args.no_test:
            continue
        by_accuracy = predictor == "linear"
        best = min(tried, key=lambda name: (-tried[name]["validation_accuracy"] if by_accuracy else 0.0,
                                            tried[name]["validation_loss"]))
        chosen = tried[best]
        result = chosen["run"] / "test.json"  # the test split, once
        tested = args.reuse and result.exists()  # with --reuse, a test already scored is read, not run again
        if not tested:
            rationale("evaluate", str(chosen["run"]), str(data), "--split", "test", "--no-faithfulness",
                      "--json", str(result))
        test = json.loads(result.read_text())
        eraser, full_text = test["eraser"], test.get("full_text_reference", {})
        row = {
            "benchmark": "eraser_support", "dataset": "movies", "support": str(args.support),
            "extractor": support["extractor"], "encoder": support.get("selector_encoder") or support["encoder"],
            "predictor_encoder": predictor, "budget": float(chosen["budget"]) if chosen["budget"] else support.get("budget"),
            "decoding": chosen["decoding"],
            **({"window": support["window"]} if reference else {}),
            "lr": chosen["lr"],
            **({"freeze_layers": int(chosen["freeze_layers"])} if chosen["freeze_layers"] is not None else {}),
            "chosen_on": "validation", "chosen_by": "accuracy, then loss" if by_accuracy else "loss",
            "validation_loss": {name: row["validation_loss"] for name, row in tried.items()},
            "validation_accuracy": {name: row["validation_accuracy"] for name, row in tried.items()},
            "accuracy": test["accuracy"], "reference_accuracy": full_text.get("value"),
            "reference_setting": full_text.get("setting"), "selection_rate": test["selection_rate"],
            "precision": test.get("precision"), "spans": test.get("spans"),
            "token_f1_micro": eraser["token_prf"]["instance_micro"]["f1"],
            "token_f1_macro": eraser["token_prf"]["instance_macro"]["f1"],
            "iou_f1_micro": eraser["iou_scores"][0]["micro"]["f1"], "iou_f1_macro": eraser["iou_scores"][0]["macro"]["f1"],
            **({"predictor_setting": chosen["setting"]} if chosen["setting"] else {}),
            "seed": args.seed, "device": device_name(resolve_device(chosen["device"])), "epochs": chosen["epochs"],
            "command": chosen["command"],
            "train_seconds": chosen["train_seconds"], "script": invocation(), "commit": git_commit(),
        }
        if not tested:  # a test read back was recorded when it ran
            append_result(row)
        print(f"{predictor} predictor, {best} chosen on validation: accuracy {test['accuracy']:.3f} (full-text "
              f"reference {full_text.get('value')}), IOU F1 {eraser['iou_scores'][0]['macro']['f1']:.3f}, "
              f"token F1 {eraser['token_prf']['instance_macro']['f1']:.3f}", flush=True)
    write_report()


if __name__ == "__main__":
    main()
