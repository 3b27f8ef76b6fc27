"""Which kept epoch gives the better test rationales: the lowest validation loss
(``--keep best-loss``) or the lowest among epochs near the rate target
(``--keep best-loss-at-rate``, at a few tolerances)?

It reads a run trained with ``--save-epochs`` (and ``--patience 0``, so that no rule
stops it early: every rule then sees the same epochs), evaluates every saved epoch on
the test documents, and looks up the epoch each rule keeps, as ``fit`` chooses it
(``rationale_cli.training.loop.Keep``, the earliest of equals).

    python benchmarks/keep_rules.py RUN ../shared/data/beer/annotations.json --aspect 1
    python benchmarks/keep_rules.py RUN annotations.json --aspect 0 --tolerances 0.02 0.01 0.005 --rate-over corpus

Prints each epoch's validation loss and rate beside its test precision and rate, then
the rules' choices; appends one row per run to benchmarks/results/ and
regenerates RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from common import append_result, git_commit, invocation
from report import pct, write_report

from rationale_cli.data import sources
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.runs.inference import corpus_threshold, evaluate
from rationale_cli.runs.keep import Keep
from rationale_cli.runs.run_directory import epoch_weights, load_run, read_json


def chosen_epoch(history: list[dict], keep: Keep) -> int:
    """The epoch ``keep`` ranks first (the earliest of equals, as training keeps it)."""
    return min(history, key=lambda h: keep.key({"loss": h["valid_loss"],
                                                "selection_rate": h["valid_selection_rate"]}))["epoch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run directory trained with --save-epochs")
    parser.add_argument("data", help="test documents with gold rationales")
    parser.add_argument("--aspect", type=int, default=None)
    parser.add_argument("--tolerances", type=float, nargs="+", default=[0.02, 0.01, 0.005])
    parser.add_argument("--rate-over", choices=("own", "corpus"), default="own",
                        help="decode each epoch's test documents its own way, or at the run's target held "
                             "over the corpus (evaluate --rate-over corpus)")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    run = Path(args.run)
    history = read_json(run / "metrics.json")["history"]
    saved = [h for h in history if epoch_weights(run, h["epoch"]).is_file()]
    if len(saved) < len(history):
        sys.exit(f"{run}: {len(history) - len(saved)} of {len(history)} epochs have no saved weights "
                 "(train with --save-epochs)")
    first = load_run(run, "cpu")
    target = first.config.rate_target()
    if target is None:
        sys.exit(f"{run}: the extractor holds no selection rate, so the rules cannot differ")
    records = list(sources.run_documents(args.data, first.config, aspect=args.aspect))
    curve = []
    print(f"{'epoch':>5} {'valid loss':>10} {'valid rate %':>12} {'test P %':>8} {'test rate %':>11}")
    for h in history:
        loaded = load_run(run, "cpu", h["epoch"])
        decoding = OWN
        if args.rate_over == "corpus":
            decoding = Decoding(threshold=corpus_threshold(loaded.model, loaded.vocab, records, target))
        test = evaluate(loaded.model, loaded.vocab, loaded.task, records, decoding=decoding)
        curve.append({"epoch": h["epoch"], "valid_loss": h["valid_loss"], "valid_rate": h["valid_selection_rate"],
                      "precision": test["precision"], "selection_rate": test["selection_rate"]})
        print(f"{h['epoch']:>5} {h['valid_loss']:>10.5f} {pct(h['valid_selection_rate']):>12} "
              f"{pct(test['precision']):>8} {pct(test['selection_rate']):>11}", flush=True)
    rules = [("best-loss", None)] + [("best-loss-at-rate", t) for t in args.tolerances]
    choices = []
    for rule, tolerance in rules:
        epoch = chosen_epoch(history, Keep() if tolerance is None else Keep(target, tolerance))
        point = next(c for c in curve if c["epoch"] == epoch)
        choices.append({"rule": rule, "tolerance": tolerance, "epoch": epoch, "precision": point["precision"],
                        "selection_rate": point["selection_rate"]})
        shown = rule if tolerance is None else f"{rule} ±{tolerance:g}"
        print(f"{shown:>26}: epoch {epoch}, test precision {pct(point['precision'])}% "
              f"at {pct(point['selection_rate'])}%")
    config = read_json(run / "config.json")
    append_result({
        "benchmark": "keep_rule", "run": run.name, "extractor": config["extractor"], "aspect": config.get("aspect"),
        "target": target, "dependent": config.get("dependent"), "rate_over": args.rate_over, "curve": curve,
        "choices": choices, "command": invocation(),
        "commit": git_commit(),
    })
    write_report()


if __name__ == "__main__":
    main()
