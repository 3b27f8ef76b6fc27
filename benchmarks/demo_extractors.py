"""Every extractor on the synthetic demo corpus at one rationale size, ``--budget 0.2``.

Trains each registered extractor with the demo's settings (examples/demo.toml: embedding
50, hidden 64, batch 20, lr 0.002, 12 epochs, no early stopping), the RCNN encoder for
all (so that differences come from the extractors), ``--budget 0.2`` where the extractor
takes a budget (a target, a cap, an exact share or a test-time size: see the README's
extractor table), evaluates on the demo's test split and appends one row per extractor
to benchmarks/results/ (``benchmark: demo_budget``); RESULTS.md is then regenerated.

    python benchmarks/demo_extractors.py [--extractors hardkuma simple] [--epochs 12] [--seed 0] [-- TRAIN OPTIONS]
    python benchmarks/demo_extractors.py --defaults [--extractors ...] [--seed 0]

With ``--defaults`` each extractor trains with nothing but ``--data demo --extractor X``
(its own defaults: encoder, budget, epochs, learning rate), as a new user would, and the rows
are ``benchmark: demo_defaults``.

Options after ``--`` go to every ``rationale train`` (e.g. ``-- --gamma 4`` for
sparse-attention, whose support grows with gamma).

``bernoulli`` takes the budget only with ``--lagrangian`` (here with the leave-one-out
baseline over 4 samples, the README's demo setting); ``hardkuma`` keeps the demo's
``--transitions 0.06``; ``sparse-attention`` has no budget (its support size follows
``--gamma``) and ``full`` selects every token.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from common import append_result, budget_options, git_commit, rationale
from report import write_report

from rationale_cli.models.selectors import SELECTORS

SIZES = ["--embedding-dim", "50", "--hidden-size", "64", "--batch-size", "20", "--lr", "0.002", "--patience", "0"]
OWN = {"hardkuma": ["--transitions", "0.06"], "bernoulli": ["--lagrangian", "--baseline", "loo", "--samples", "4"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extractors", nargs="+", default=list(SELECTORS), choices=list(SELECTORS))
    parser.add_argument("--budget", default="0.2")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--defaults", action="store_true", help="each extractor's own defaults, nothing else")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: extra options for `rationale train`")
    args = parser.parse_args()
    extra = [a for a in args.train_args if a != "--"]
    commit = git_commit()
    runs = Path(tempfile.mkdtemp(prefix="demo-extractors-"))
    for extractor in args.extractors:
        budget = () if args.defaults else budget_options(extractor, args.budget)
        own = [] if args.defaults else ["--encoder", "rcnn", *budget, *OWN.get(extractor, []), *SIZES,
                                        "--epochs", str(args.epochs)]
        run = runs / extractor
        train_cmd, seconds = rationale("train", "--data", "demo", "--out", str(run), "--extractor", extractor, *own,
                                       "--seed", str(args.seed), "--device", "cpu", *extra)
        config = json.loads((run / "config.json").read_text())
        metrics = run / "test.json"
        eval_cmd, _ = rationale("evaluate", str(run), "demo", "--json", str(metrics), "--device", "cpu")
        test = json.loads(metrics.read_text())
        append_result({
            "benchmark": "demo_defaults" if args.defaults else "demo_budget", "extractor": extractor,
            "budget": args.budget if budget else config.get("budget"), "encoder": config.get("encoder"),
            "options": " ".join(extra if args.defaults else OWN.get(extractor, []) + extra),
            "epochs": config.get("epochs") if args.defaults else args.epochs, "seed": args.seed, "precision": test["precision"], "recall": test["recall"],
            "f1": test["f1"], "selection_rate": test["selection_rate"], "mse": test["mse"],
            "transitions": test["transitions"], "spans": test.get("spans"), "train_seconds": round(seconds, 1),
            "command": f"{train_cmd} && {eval_cmd}", "commit": commit,
        })
        print(f"{extractor}: precision {100 * test['precision']:.1f}, selected {100 * test['selection_rate']:.1f}%",
              flush=True)
    write_report()


if __name__ == "__main__":
    main()
