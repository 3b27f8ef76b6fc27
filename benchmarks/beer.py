"""Beer benchmark (Lei et al., 2016 setup, with the data available here).

The original beer training files are not available: for each aspect we train on
9,000 reviews of ``reviews.aspectN.heldout.txt.gz`` and validate on the other
1,000 (a fixed shuffle, the same for every seed and extractor), then test on the
994 reviews of ``annotations.json`` with their gold rationales. Vectors: the
GloVe 6B 50-d subset, or ``--embeddings FILE`` (the papers used 200-d vectors trained
on beer reviews, not available; ``beer_vectors.py`` trains such vectors here).
With ``--pooled`` the training side also gets the other aspects' heldout reviews
(about 29,000 more, each labelled with this aspect's score; the 1,000 validation
reviews and repeats left out); validation and test stay as they are. With
``--train-size N`` it trains on the first N of the aspect's 9,000 (a learning curve). A pretrained
transformer on both sides (``--encoder hf --pretrained DIR``) reads no word vectors;
``--no-faithfulness`` skips evaluate's faithfulness reruns (hours for a transformer on a CPU).
With ``--test-rate corpus`` the test reviews are decoded at the training target held
over the whole test corpus (``evaluate --rate-over corpus``; ``--test-share S`` at S instead of
the target), and ``--evaluate-only``
evaluates runs trained before with the same options instead of training them again.
With ``--test-coherence LAMBDA`` a sparsemap or topk-sparsemax run's test reviews are
decoded with that cost per 0/1 transition (``evaluate --coherence``); with
``--tune-coherence L1 L2 ...`` with each, and the row reports the cross-fit
(``cross_fit.py``): each half of the test reviews decoded with the cost most precise on the
other half among those selecting within 1 point of the target, so no review is scored under
a cost chosen on its own gold rationale.

    python benchmarks/beer.py --extractor full --aspects 0 1 2 --seeds 0

Each run appends one JSON line to benchmarks/results/beer.jsonl; RESULTS.md is then
regenerated from it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from common import (
    GLOVE,
    append_result,
    device_name,
    git_commit,
    invocation,
    pooled_reviews,
    rationale,
    rationale_command,
    runs_folder,
    word_inputs,
)
from cross_fit import cross_fit
from report import write_report

from rationale_cli.data.readers import read_records
from rationale_cli.models.budget import Budget, BudgetUse
from rationale_cli.models.selectors import option_specs
from rationale_cli.runtime.devices import resolve_device
from rationale_cli.training.trainer import split_validation

# the architectures of the papers' beer experiments (the toolkit's default is rcnn for every extractor)
PAPER_ENCODERS = {"simple": "l2x", "topk": "sst-complex", "corr-topk": "sst-complex"}


def write_jsonl(records, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps({"id": record.id, "tokens": record.tokens, "score": record.label}) + "\n")


def pooled_split(beer: Path, aspect: int, folder: Path) -> tuple[Path, Path, int]:
    """The aspect's own 9,000 / 1,000 split with the other heldout files' reviews added to
    training (:func:`common.pooled_reviews`). Returns the training and validation JSONL files
    and the number of training reviews."""
    return write_split(*pooled_reviews(beer, aspect), folder)


def subset_split(beer: Path, aspect: int, size: int, folder: Path) -> tuple[Path, Path, int]:
    """The first ``size`` reviews of the aspect's 9,000 / 1,000 training split, and its
    validation reviews; returns the training and validation JSONL files and the size."""
    own = read_records(beer / f"reviews.aspect{aspect}.heldout.txt.gz", "beer", aspect=aspect)
    train, valid = split_validation(own, 0.1)
    if not 0 < size <= len(train):
        raise SystemExit(f"--train-size {size}: expected 1 to {len(train):,}")
    return write_split(train[:size], valid, folder)


def write_split(train, valid, folder: Path) -> tuple[Path, Path, int]:
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(train, folder / "train.jsonl")
    write_jsonl(valid, folder / "valid.jsonl")
    return folder / "train.jsonl", folder / "valid.jsonl", len(train)


def tuned_coherence(evaluate: tuple[str, ...], run: Path, decoding: str, costs: list[float],
                    rate: float | None) -> tuple[dict, str, list[float]]:
    """The test reviews decoded with each transition cost, cross-fitted (``cross_fit``, among
    the costs that select within 1 point of ``rate``): the pooled scores, the evaluate
    commands and the cost each half got. A cost's per-document scores written since the run
    was trained are read again rather than recomputed."""
    rows, commands = {}, []
    for cost in costs:
        name = f"{decoding}-coherence-{cost:g}"
        documents = run / f"test_documents{name}.jsonl"
        command = (*evaluate, "--coherence", str(cost), "--json", str(run / f"test_metrics{name}.json"),
                   "--per-document", str(documents))
        if documents.is_file() and documents.stat().st_mtime > (run / "metrics.json").stat().st_mtime:
            commands.append(rationale_command(*command))
        else:
            commands.append(rationale(*command)[0])
        rows[cost] = [json.loads(line) for line in documents.read_text().splitlines()]
    test, chosen = cross_fit(rows, rate)
    return test, " && ".join(commands), chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", help="folder holding beer/ and glove_6B_50d_subset/")
    parser.add_argument("--extractor", default="full")
    parser.add_argument("--encoder", default=None, help="architecture (default: the extractor's paper's, "
                        "PAPER_ENCODERS, else rcnn)")
    parser.add_argument("--aspects", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budget", "--selection", nargs="+", default=None,
                        help="--budget per aspect, a share or a count (default for extractors with a rate: "
                             "0.13 0.07 0.07 for aspects 0 1 2; the k-subset extractors' own k otherwise)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--pooled", action="store_true",
                        help="also train on the other aspects' heldout reviews (labelled with this aspect's score)")
    parser.add_argument("--train-size", type=int, default=None,
                        help="train on the first N of the aspect's 9,000 training reviews (validation unchanged)")
    parser.add_argument("--embeddings", default=None,
                        help="word vectors (default: the GloVe 6B 50-d subset in --data-dir; "
                             "benchmarks/beer_vectors.py makes beer-domain ones)")
    parser.add_argument("--pretrained", type=Path, default=None,
                        help="with --encoder hf: the transformer's folder (no word vectors are read)")
    parser.add_argument("--runs", default=None, help="keep run directories here (default: a temporary folder)")
    parser.add_argument("--test-rate", choices=("document", "corpus"), default=None,
                        help="decode the test reviews at the training target (`evaluate --rate`): each review "
                             "at that share, or one threshold holding it over the corpus (default: the "
                             "extractor's own decoding)")
    parser.add_argument("--test-share", type=float, default=None, metavar="SHARE",
                        help="with --test-rate: decode at this share instead of the training target")
    parser.add_argument("--test-coherence", type=float, default=None, metavar="LAMBDA",
                        help="decode the test reviews with this cost per 0/1 transition (`evaluate "
                             "--coherence`; sparsemap and topk-sparsemax)")
    parser.add_argument("--tune-coherence", type=float, nargs="+", default=None, metavar="LAMBDA",
                        help="decode the test reviews with each of these costs and report the cross-fit: "
                             "each half of them decoded with the cost most precise on the other half among "
                             "those selecting within 1 point of the target there")
    parser.add_argument("--search", default=None, metavar="NAME",
                        help="these runs are one configuration of the hyperparameter search NAME: of its "
                             "configurations, RESULTS.md's summary shows only the one of lowest mean validation "
                             "MSE (a choice made without the test reviews)")
    parser.add_argument("--no-faithfulness", action="store_true",
                        help="skip evaluate's faithfulness reruns (hours for a transformer on a CPU)")
    parser.add_argument("--evaluate-only", action="store_true",
                        help="evaluate the runs these options trained before (in --runs) without training")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: extra options for `rationale train`")
    args = parser.parse_args()
    if args.pooled and args.train_size:
        parser.error("--pooled and --train-size do not go together")
    if args.evaluate_only and not args.runs:
        parser.error("--evaluate-only needs the --runs folder the runs were trained in")
    if args.test_share is not None and not args.test_rate:
        parser.error("--test-share goes with --test-rate")
    if args.test_coherence is not None and args.tune_coherence:
        parser.error("--test-coherence and --tune-coherence do not go together")
    data = Path(args.data_dir)
    commit = git_commit()  # the code the runs start from (the checkout may move on while they train)
    default_targets = {0: 0.13, 1: 0.07, 2: 0.07, 3: 0.07, 4: 0.07}
    vectors = args.embeddings or str(data / GLOVE)
    words = word_inputs(parser, args.encoder, args.pretrained, vectors)
    runs = runs_folder(args.runs, "beer-runs-")
    extra = [a for a in args.train_args if a != "--"]
    # runs with other options (or other vectors, or a transformer) apart
    options = hashlib.sha1(" ".join(extra + ([vectors] if args.embeddings else []) + (words if args.pretrained else []))
                           .encode()).hexdigest()[:8]
    data_suffix = "-pooled" if args.pooled else f"-n{args.train_size}" if args.train_size else ""
    encoder = ["--encoder", args.encoder or PAPER_ENCODERS.get(args.extractor, "rcnn")]
    size = option_specs(args.extractor).get("budget")
    # a default rate for the extractors whose size is no exact count: held, a cap or the test-time size
    # (bernoulli only with --lagrangian)
    rated = size is not None and size.use is not BudgetUse.EXACT and (
        size.requires is None or f"--{size.requires}" in extra)
    if args.test_rate and not rated:
        parser.error(f"--test-rate: {args.extractor} holds no selection rate here")
    for i, aspect in enumerate(args.aspects):
        target = args.budget[i] if args.budget else default_targets[aspect] if rated else None
        budget = ["--budget", str(target)] if target is not None else []
        if args.pooled:
            train_file, valid_file, train_size = pooled_split(data / "beer", aspect, runs / f"pooled-a{aspect}")
            split = ["--data", str(train_file), "--valid", str(valid_file)]
        elif args.train_size:
            train_file, valid_file, train_size = subset_split(data / "beer", aspect, args.train_size,
                                                              runs / f"subset-a{aspect}-{args.train_size}")
            split = ["--data", str(train_file), "--valid", str(valid_file)]
        else:
            train_size = 9000
            split = ["--data", str(data / "beer" / f"reviews.aspect{aspect}.heldout.txt.gz"),
                     "--aspect", str(aspect), "--valid-fraction", "0.1"]
        for seed in args.seeds:
            run = runs / f"{args.extractor}-{args.encoder or 'default'}-a{aspect}-t{target}-s{seed}-{options}{data_suffix}"
            train_args = ("train", *split, *words, *encoder, "--extractor", args.extractor, *budget,
                          "--epochs", str(args.epochs), "--seed", str(seed), "--out", str(run), "--force", *extra)
            if args.evaluate_only:
                if not (run / "metrics.json").is_file():
                    sys.exit(f"{run}: no trained run there for --evaluate-only")
                train_cmd = rationale_command(*train_args)
                seconds = json.loads((run / "metrics.json").read_text())["train_seconds"]
            else:
                train_cmd, seconds = rationale(*train_args)
            config = json.loads((run / "config.json").read_text())
            trained = json.loads((run / "metrics.json").read_text())
            history = trained["history"]
            supports = [epoch["support"] for epoch in history if "support" in epoch]
            saved = Budget.parse(config["budget"]) if "budget" in config else None
            test_share = args.test_share if args.test_share is not None else target
            decoding = ([f"-{args.test_rate}-rate"] if args.test_rate else []) + (
                [f"-{test_share:g}"] if args.test_share is not None else []) + (
                [f"-coherence-{args.test_coherence:g}"] if args.test_coherence is not None else [])
            at_rate = ["--rate", str(test_share), "--rate-over", args.test_rate] if args.test_rate else []
            evaluate = ("evaluate", str(run), str(data / "beer" / "annotations.json"), "--aspect", str(aspect), *at_rate,
                        *(["--no-faithfulness"] if args.no_faithfulness else []))
            if args.tune_coherence:  # the share decoding holds, to compare costs at
                held = (args.test_share if args.test_share is not None else saved.share) if rated and saved else None
                test, eval_cmd, chosen = tuned_coherence(evaluate, run, "".join(decoding), args.tune_coherence,
                                                        held)
            else:
                metrics_file = run / f"test_metrics{''.join(decoding)}.json"
                coherence = ["--coherence", str(args.test_coherence)] if args.test_coherence is not None else []
                eval_cmd, _ = rationale(*evaluate, *coherence, "--json", str(metrics_file))
                test, chosen = json.loads(metrics_file.read_text()), None
            append_result({
                "benchmark": "beer", "extractor": args.extractor, "encoder": config["encoder"], "data": "beer",
                "aspect": aspect, "selection_target": saved.share if rated and saved else None,
                "k": saved.count if saved else None, "device": device_name(resolve_device(config["device"])),
                "support": sum(supports) / len(supports) if supports else None,
                "attention": config["attention"] if args.extractor == "sparse-attention" else None,
                "seed": seed, "precision": test["precision"], "recall": test["recall"], "f1": test["f1"],
                "selection_rate": test["selection_rate"], "mse": test["mse"], "train_seconds": round(seconds, 1),
                # the run's full-text reference (TF-IDF ridge regression) on the same test reviews
                "reference_mse": test.get("full_text_reference", {}).get("value"),
                # the kept epoch on the validation reviews: what a blind choice between configurations reads
                "valid_mse": trained["valid"]["mse"], "valid_rate": trained["valid"]["selection_rate"],
                **({"search": args.search} if args.search else {}),
                "test_rate_over": args.test_rate, "test_share": args.test_share, "test_coherence": args.test_coherence,
                "coherence_cross_fit": {"costs": args.tune_coherence, "chosen": chosen, "rate": held} if chosen else None,
                # absolute change of the predicted score without the rationale / from it alone (evaluate's reruns)
                **{key: test.get("faithfulness", {}).get(key) for key in ("comprehensiveness", "sufficiency")},
                "train_size": train_size, "vectors": (args.pretrained.name if args.pretrained
                            else f"{Path(vectors).name.split('.')[0]} {config['embedding_dim']}d"),
                "command": f"{train_cmd} && {eval_cmd}",
                "script": invocation(), "commit": commit,
            })
    write_report()


if __name__ == "__main__":
    main()
