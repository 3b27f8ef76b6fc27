"""Beer, the binary protocol of the newer select-then-predict papers (FR, Liu et al. 2022; DR, MGR,
Liu et al. 2023; MCD, Liu et al. 2023): each aspect's rating binarised, >= 0.6 positive and
<= 0.4 negative, the rest dropped; rationales at about the share of tokens people marked for
that aspect; precision, recall and F1 of the selected tokens against the annotation (micro, over
every test token), as those papers report them.

The papers' rows we compare with train on Lei et al.'s decorrelated aspect sets (tens of thousands
of reviews each), which are not available here; their heldout parts are. For each aspect we binarise
the 9,000 / 1,000 split of ``reviews.aspectN.heldout.txt.gz`` that ``beer.py`` uses (the same fixed
shuffle) and, as the papers' code does, balance both sides by keeping as many positive reviews as
there are negative ones (the first ones of the shuffle; ``--no-balance`` keeps every training
review): about 3,800 training and 420 validation reviews for appearance. The test reviews are those
of ``annotations.json`` whose rating for the aspect survives binarisation, every one scored, with
its spans or without (969 for appearance, 14 of them negative, 33 without spans). ``--train-size N``
trains on the first N/2 training reviews of each class (a learning curve; before, the first N of the
balanced reviews, in their shuffled order: 1,435 positive and 465 negative at 1,900 for appearance).
``--pooled`` adds every other heldout file's reviews to training, labelled with the aspect's rating
(as ``beer.py --pooled`` does): 6,582 balanced training reviews for appearance, whose negative
reviews are the scarce class. ``--labels score`` labels the same reviews with their ratings and
trains by regression, the epoch and the decoding chosen on validation MSE: a diagnostic of what the
binary label costs the rationale, outside the papers' protocol.

A configuration is chosen on the validation reviews (accuracy, the papers' choice of epoch and
setting); the test reviews are read once per configuration. With ``--decodings`` each run's
validation reviews are decoded each way given (``own``: the extractor's; ``rate``: each review
at the rate, ``evaluate --rate``; ``rate-corpus``: the reviews together at the rate, each as
much as its scores earn, ``evaluate --rate --rate-over corpus``; ``sentences``: in whole
sentences, ``evaluate --sentences``; ``rate-sentences``: both) and the test reviews the way of
best validation accuracy (the first given on a tie). Each run appends one row to
benchmarks/results/ with ``protocol: binary``.

    python benchmarks/beer_binary.py --extractor hardkuma --aspects 0 --seeds 0 1 2 \\
        --embeddings /tmp/beer-w2v-200d.txt.gz --runs /tmp/binary -- --dependent --epochs 20
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from common import (
    GLOVE,
    append_result,
    budget_options,
    device_name,
    git_commit,
    invocation,
    pooled_reviews,
    rationale,
    rationale_command,
    runs_folder,
    vectors_name,
    word_inputs,
)
from report import write_report

from rationale_cli.data.readers import read_records
from rationale_cli.runtime.devices import resolve_device
from rationale_cli.training.trainer import split_validation

POSITIVE, NEGATIVE = "positive", "negative"
# the share of tokens the papers' rationales hold per aspect: the human annotation's share, S in
# their dataset tables (MCD Table 7, MGR Table 8), which their decorrelated rows match within a point
PAPER_RATES = {0: 0.185, 1: 0.156, 2: 0.124}
# their published rows on the decorrelated beer sets (Lei et al.'s aspect files, whose heldout part
# is our data), GRU encoders and GloVe-100 vectors: (S, accuracy, precision, recall, F1) in % for
# appearance, aroma, palate. DR Table 3a (RNP re-run, FR, DR) and MGR Table 5a.
PUBLISHED = {
    "RNP": ((18.2, 83.3, 73.8, 72.7, 73.2), (16.0, 85.2, 64.1, 65.9, 64.9), (13.0, 85.2, 60.1, 63.1, 61.5)),
    "FR": ((18.4, 87.2, 82.9, 82.6, 82.8), (15.0, 88.6, 74.7, 72.1, 73.4), (12.1, 89.7, 67.8, 66.2, 67.0)),
    "MGR": ((18.4, 86.1, 83.9, 83.5, 83.7), (15.6, 86.6, 76.6, 76.5, 76.5), (12.4, 85.1, 66.6, 66.6, 66.6)),
    "DR": ((18.6, 85.3, 84.3, 84.8, 84.5), (15.6, 87.2, 77.2, 77.5, 77.3), (13.3, 85.7, 65.1, 69.8, 67.4)),
}


def binary(score: float) -> str | None:
    """The papers' class of a rating in [0, 1]: positive at 0.6 and above, negative at 0.4 and
    below, None (dropped) between."""
    if score >= 0.6 - 1e-9:
        return POSITIVE
    if score <= 0.4 + 1e-9:
        return NEGATIVE
    return None


def binarised(records, balance: bool, cap: int | None = None, score: bool = False) -> list[dict]:
    """The records whose score has a class, as JSONL rows (``label``, and ``rationale`` where the
    record has gold spans). ``balance``: as many rows of one class as of the other, the first ones
    (``cap`` of each where given, else as many as the smaller class has). ``score``: each row's
    ``score`` is its rating in place of its class ``label`` (the same rows)."""
    kept, seen = [], {POSITIVE: 0, NEGATIVE: 0}
    classes = [(record, binary(record.label)) for record in records]
    if balance:  # each class capped at the smaller one's size, the first rows of each kept
        cap = min([sum(label == c for _, label in classes) for c in (POSITIVE, NEGATIVE)]
                  + ([cap] if cap is not None else []))
    for record, label in classes:
        if label is None:
            continue
        seen[label] += 1
        if balance and seen[label] > cap:
            continue
        row = {"id": record.id, "tokens": record.tokens, **({"score": record.label} if score else {"label": label})}
        if record.rationale is not None:
            row["rationale"] = [list(span) for span in record.rationale]
        kept.append(row)
    return kept


def write_rows(rows: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return path


def row_class(row: dict) -> str:
    """A row's class: its label, or its rating's class."""
    return row["label"] if "label" in row else binary(row["score"])


def protocol_files(beer: Path, aspect: int, folder: Path, balance: bool, size: int | None,
                   pooled: bool = False, score: bool = False) -> dict:
    """The aspect's binary training, validation and test files in ``folder`` and their sizes;
    ``pooled``: the training side from every heldout file (:func:`common.pooled_reviews`); ``size``:
    the first ``size / 2`` training reviews of each class (balanced), else the first ``size``;
    ``score``: every file labelled with the rating, the reviews of the binary protocol kept."""
    if pooled:
        train, valid = pooled_reviews(beer, aspect)
    else:
        train, valid = split_validation(read_records(beer / f"reviews.aspect{aspect}.heldout.txt.gz", "beer",
                                                     aspect=aspect), 0.1)
    train_rows = binarised(train, balance, size // 2 if size and balance else None, score)
    valid_rows = binarised(valid, True, score=score)
    if size is not None:
        if not 0 < size <= len(train_rows):
            raise SystemExit(f"--train-size {size}: expected 1 to {len(train_rows):,}")
        train_rows = train_rows[:size]
    test_rows = binarised(read_records(beer / "annotations.json", "beer-annotations", aspect=aspect), False,
                          score=score)
    return {
        "train": write_rows(train_rows, folder / "train.jsonl"),
        "valid": write_rows(valid_rows, folder / "valid.jsonl"),
        "test": write_rows(test_rows, folder / "test.jsonl"),
        "sizes": {name: len(rows) for name, rows in (("train", train_rows), ("valid", valid_rows),
                                                       ("test", test_rows))},
        "negatives": {name: sum(row_class(r) == NEGATIVE for r in rows)
                      for name, rows in (("train", train_rows), ("valid", valid_rows), ("test", test_rows))},
    }


DECODINGS = {"own": (), "rate": ("--rate", "{rate}"), "rate-corpus": ("--rate", "{rate}", "--rate-over", "corpus"),
             "sentences": ("--sentences",), "rate-sentences": ("--rate", "{rate}", "--sentences")}


def decoded(name: str, rate: float) -> list[str]:
    """``evaluate``'s options for decoding ``name`` at ``rate``."""
    return [part.format(rate=rate) for part in DECODINGS[name]]


def chosen_decoding(run: Path, valid: Path, names: list[str], rate: float, reuse: bool,
                    metric: str = "accuracy") -> tuple[str, dict]:
    """The decoding of ``names`` whose validation ``metric`` is best (the highest accuracy or the
    lowest MSE; the first on a tie), and each one's validation metric and selection rate; with
    ``reuse``, a decoding this run was evaluated with before is read back (evaluate refuses to
    replace a file in a run directory)."""
    scores = {}
    for name in names:
        out = run / f"valid_metrics-{name}.json"
        if not (reuse and out.is_file()):
            rationale("evaluate", str(run), str(valid), "--no-faithfulness", *decoded(name, rate), "--json", str(out))
        metrics = json.loads(out.read_text())
        scores[name] = {metric: metrics[metric], "selection_rate": metrics["selection_rate"]}
    sign = 1 if metric == "accuracy" else -1
    best = max(names, key=lambda name: (sign * scores[name][metric], -names.index(name)))
    return best, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data", help="folder holding beer/ and glove_6B_50d_subset/")
    parser.add_argument("--extractor", default="hardkuma")
    parser.add_argument("--encoder", default="rcnn")
    parser.add_argument("--aspects", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budget", nargs="+", type=float, default=None,
                        help="--budget per aspect (default: the papers' rates, PAPER_RATES)")
    parser.add_argument("--no-balance", action="store_true",
                        help="train on every binarised training review (validation stays balanced)")
    parser.add_argument("--train-size", type=int, default=None,
                        help="train on the first N/2 training reviews of each class (the first N with --no-balance)")
    parser.add_argument("--pooled", action="store_true",
                        help="train on every heldout file's reviews (the aspect's rating), for a learning curve "
                             "past the aspect's own 9,000")
    parser.add_argument("--labels", choices=("class", "score"), default="class",
                        help="train on the binary class (the protocol) or on the same reviews' ratings, by "
                             "regression (a diagnostic of what the label costs the rationale; chosen on MSE)")
    parser.add_argument("--embeddings", default=None, help="word vectors (default: the GloVe 6B 50-d subset)")
    parser.add_argument("--pretrained", type=Path, default=None, help="with --encoder hf: the transformer's folder")
    parser.add_argument("--runs", default=None, help="keep run directories here (default: a temporary folder)")
    parser.add_argument("--search", default=None, metavar="NAME",
                        help="these runs are one configuration of the search NAME (the docs' table keeps, of "
                             "its configurations, the one of best mean validation accuracy)")
    parser.add_argument("--decodings", nargs="+", choices=tuple(DECODINGS), default=["own"],
                        help="test-time decodings to choose from on validation accuracy")
    parser.add_argument("--no-test", action="store_true",
                        help="train and record the validation figures only: a configuration not yet chosen")
    parser.add_argument("--evaluate-only", action="store_true",
                        help="test the runs these options trained before (in --runs), without training; "
                             "their validation figures are read back, and a run tested before is refused")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: extra options for `rationale train`")
    args = parser.parse_args()
    data = Path(args.data_dir)
    commit = git_commit()
    vectors = args.embeddings or str(data / GLOVE)
    words = word_inputs(parser, args.encoder, args.pretrained, vectors)
    runs = runs_folder(args.runs, "beer-binary-")
    extra = [a for a in args.train_args if a != "--"]
    options = hashlib.sha1(" ".join(extra + [vectors]).encode()).hexdigest()[:8]
    balance, score = not args.no_balance, args.labels == "score"
    metric = "mse" if score else "accuracy"
    for i, aspect in enumerate(args.aspects):
        rate = args.budget[i] if args.budget else PAPER_RATES[aspect]
        variant = (f"{'' if balance else '-all'}{'-pooled' if args.pooled else ''}{'-score' if score else ''}"
                   f"{f'-n{args.train_size}' if args.train_size else ''}")
        files = protocol_files(data / "beer", aspect, runs / f"binary-a{aspect}{variant}", balance, args.train_size,
                               args.pooled, score)
        budget = budget_options(args.extractor, rate)
        for seed in args.seeds:
            run = runs / f"{args.extractor}-{args.encoder}-a{aspect}-r{rate:g}-s{seed}-{options}{variant}"
            train_args = ("train", "--data", str(files["train"]), "--valid", str(files["valid"]), *words,
                          "--encoder", args.encoder, "--extractor", args.extractor, *budget,
                          "--seed", str(seed), "--out", str(run), "--force", *extra)
            if args.evaluate_only:
                if not (run / "metrics.json").is_file():
                    raise SystemExit(f"{run}: no trained run there for --evaluate-only")
                train_cmd = rationale_command(*train_args)
                seconds = json.loads((run / "metrics.json").read_text())["train_seconds"]
            else:
                train_cmd, seconds = rationale(*train_args)
            config = json.loads((run / "config.json").read_text())
            trained = json.loads((run / "metrics.json").read_text())
            decoding, by_decoding = ("own", None) if args.decodings == ["own"] else \
                chosen_decoding(run, files["valid"], args.decodings, rate, args.evaluate_only, metric)
            metrics_file = run / f"test_metrics-{decoding}.json"
            if args.no_test:
                eval_cmd, test = None, {}
            elif args.evaluate_only and metrics_file.is_file():
                raise SystemExit(f"{metrics_file}: this run was tested before; its row is in benchmarks/results/")
            else:
                eval_cmd, _ = rationale("evaluate", str(run), str(files["test"]), "--no-faithfulness",
                                        *decoded(decoding, rate), "--json", str(metrics_file))
                test = json.loads(metrics_file.read_text())
            append_result({
                "benchmark": "beer_binary", "protocol": "binary", "dataset": f"beer{aspect}", "aspect": aspect,
                "extractor": args.extractor,
                **{key: config[key] for key in ("estimator", "lagrange_rho") if key in config},
                "encoder": config["encoder"], "predictor_encoder": config.get("predictor_encoder") or config["encoder"],
                "remedies": {key: config.get(key) for key in ("share_encoder", "generators", "guidance",
                                                               "separate_guidance", "predictor_lr")},
                "selection_target": rate, "seed": seed, "chosen_on": "validation",
                **{key: test.get(key) for key in ("selection_rate", "precision", "recall", "f1", metric)},
                f"reference_{metric}": test.get("full_text_reference", {}).get("value"),
                f"valid_{metric}": trained["valid"][metric], "valid_rate": trained["valid"]["selection_rate"],
                **({"labels": "score"} if score else {}),
                "decoding": decoding, "valid_by_decoding": by_decoding,
                "epochs_run": len(trained["history"]), "train_seconds": round(seconds, 1),
                "sizes": files["sizes"], "negatives": files["negatives"], "balanced": balance,
                **({"pooled": True} if args.pooled else {}),
                **({"balance_classes": True} if config.get("balance_classes") else {}),
                "vectors": args.pretrained.name if args.pretrained else vectors_name(Path(vectors)),
                "device": device_name(resolve_device(config["device"])),
                **({"search": args.search} if args.search else {}),
                "command": train_cmd if eval_cmd is None else f"{train_cmd} && {eval_cmd}", "script": invocation(), "commit": commit,
            })
    write_report()


if __name__ == "__main__":
    main()
