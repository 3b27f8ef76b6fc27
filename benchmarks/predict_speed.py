"""Annotation throughput and memory: ``rationale predict`` on beer review text, against the
loop it replaces, side by side in one run.

    python benchmarks/predict_speed.py --data-dir ../shared/data --documents 10000 100000
    python benchmarks/predict_speed.py --train-on demo --text --documents 10000

Builds a JSON-lines corpus of beer reviews (pre-tokenized, so tokenization is not
timed; the heldout files' reviews, 154 tokens on average, repeated to the size asked),
trains a HardKuma model with CNN and with RCNN encoders on the first ``--train-documents``
aspect-0 reviews with their scores, for ``--train-epochs`` epochs toward 13% selected
(by default the beer sizes, 200-d embeddings and hidden 200; the selected share matters:
the predictor reads only the rationale, and is reported), then per model and size runs,
each in its own process: ``baseline``, the ``predict`` command of the commit
``--baseline`` (checked out in a temporary git worktree; only up to ``--baseline-up-to``
documents), ``predict``, the command as it is with ``--threads``, and ``workers``, the
command with ``--workers`` processes of one thread each (only up to ``--workers-up-to``
documents). Reports documents per second and peak resident memory (of the largest
process); appends one row each to benchmarks/results/. ``--train-on demo`` trains the models on the
demo's synthetic corpus instead (``--data demo --config examples/demo.toml``, its epochs, at
these sizes), as a new user would: they leave many beer words unknown and many tokens in
HardKuma's continuous regime. ``--text`` gives ``predict`` the reviews as raw text lines, so
tokenizing is timed too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, append_result, commit_tree, git_commit, measured

from rationale_cli.data.readers.beer import iter_beer


def corpus(beer: Path, size: int, path: Path, text: bool = False) -> None:
    """``size`` beer reviews as JSON lines of tokens, or with ``text`` as lines of raw text."""
    reviews = [record.tokens for source in sorted(beer.glob("reviews.aspect*.heldout.txt.gz"))
               for record in iter_beer(source)]
    with open(path, "w", encoding="utf-8") as out:
        for index in range(size):
            tokens = reviews[index % len(reviews)]
            out.write(" ".join(tokens) + "\n" if text else json.dumps({"id": str(index), "tokens": tokens}) + "\n")


def train_demo(encoder: str, out: Path, sizes: list[str]) -> None:
    """A HardKuma model trained as the demo trains it, at these sizes."""
    subprocess.run([sys.executable, "-m", "rationale_cli", "train", "--data", "demo", "--config",
                    str(ROOT / "examples" / "demo.toml"), "--out", str(out), "--encoder", encoder, *sizes],
                   cwd=ROOT, check=True, capture_output=True)


def train(encoder: str, beer: Path, out: Path, documents: int, epochs: int, sizes: list[str]) -> None:
    """A HardKuma model on the first ``documents`` aspect-0 reviews."""
    train_file = out.with_suffix(".train.jsonl")
    with open(train_file, "w", encoding="utf-8") as target:
        for record in itertools.islice(iter_beer(beer / "reviews.aspect0.heldout.txt.gz", aspect=0), documents):
            target.write(json.dumps({"tokens": record.tokens, "score": record.label}) + "\n")
    subprocess.run([sys.executable, "-m", "rationale_cli", "train", "--data", str(train_file), "--out", str(out),
                    "--encoder", encoder, "--epochs", str(epochs), "--batch-size", "100", "--budget", "0.13",
                    *sizes], cwd=ROOT, check=True, capture_output=True)


def selected_share(path: Path) -> float:
    """The share of tokens in the rationales of a ``predict`` output."""
    selected = tokens = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            selected += sum(end - start for start, end in row["rationale"])
            tokens += len(row["token_scores"])
    return selected / tokens


def measure(command: list[str], tree: Path) -> tuple[float, float]:
    """Documents per second of the command's own loop (reading, model, writing; not the
    start-up) and its peak resident memory in MB, run with the code of ``tree``."""
    done, peak = measured(command, tree)
    rate = re.search(r"([\d,]+) documents/s", done.stderr)
    return float(rate.group(1).replace(",", "")), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--documents", type=int, nargs="+", default=[10000])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--encoders", nargs="+", default=["cnn", "rcnn"])
    parser.add_argument("--embedding-dim", type=int, default=200)
    parser.add_argument("--hidden-size", type=int, default=200)
    parser.add_argument("--models", type=Path, default=None,
                        help="keep the trained models here and reuse them when present (default: a temporary folder)")
    parser.add_argument("--train-on", choices=("beer", "demo"), default="beer",
                        help="train the models on beer reviews or on the demo's corpus")
    parser.add_argument("--text", action="store_true", help="give predict raw text lines (tokenizing timed)")
    parser.add_argument("--train-documents", type=int, default=3000)
    parser.add_argument("--train-epochs", type=int, default=3)
    parser.add_argument("--baseline", default=None, help="a commit whose predict command to measure beside")
    parser.add_argument("--baseline-up-to", type=int, default=100_000,
                        help="run the baseline only on corpora up to this size")
    parser.add_argument("--workers", type=int, default=2, help="processes of the workers variant")
    parser.add_argument("--workers-up-to", type=int, default=100_000,
                        help="run the workers variant only on corpora up to this size")
    args = parser.parse_args()
    command = "python benchmarks/predict_speed.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items()
        if k not in ("data_dir", "models"))
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        suffix = ".txt" if args.text else ".jsonl"
        corpus(args.data_dir / "beer", max(args.documents), work / f"all{suffix}", args.text)
        with commit_tree(args.baseline, work / "baseline-tree"):
            print(f"{platform.processor() or platform.machine()}, {args.threads} threads, "
                  f"torch {__import__('torch').__version__}")
            for encoder in args.encoders:
                run = (args.models or work) / f"{encoder}-{args.embedding_dim}-{args.hidden_size}-{args.train_on}"
                sizes = ["--embedding-dim", str(args.embedding_dim), "--hidden-size", str(args.hidden_size)]
                if not (run / "model.safetensors").is_file():
                    if args.train_on == "demo":
                        train_demo(encoder, run, sizes)
                    else:
                        train(encoder, args.data_dir / "beer", run, args.train_documents, args.train_epochs, sizes)
                for size in args.documents:
                    compare(args, encoder, run, size, work, command, suffix)


def compare(args, encoder: str, run: Path, size: int, work: Path, command: str, suffix: str) -> None:
    """The variants on the first ``size`` documents of the corpus, one process each."""
    data = work / f"corpus{size}{suffix}"
    with open(work / f"all{suffix}", encoding="utf-8") as source, open(data, "w", encoding="utf-8") as target:
        target.writelines(line for _, line in zip(range(size), source))
    predict = ["predict", str(run), str(data), "--force", "--device", "cpu"]
    variants = {"baseline": predict + ["--out", str(work / "baseline.jsonl"), "--threads", str(args.threads)],
                "predict": predict + ["--out", str(work / "new.jsonl"), "--threads", str(args.threads)],
                "workers": predict + ["--out", str(work / "workers.jsonl"), "--threads", "1",
                                      "--workers", str(args.workers)]}
    if not args.baseline or size > args.baseline_up_to:
        del variants["baseline"]
    if size > args.workers_up_to:
        del variants["workers"]
    rates = {}
    for name, argv in variants.items():
        rate, peak = measure(argv, work / "baseline-tree" if name == "baseline" else ROOT)
        rates[name] = rate
        share = selected_share(work / "new.jsonl") if name == "predict" else None
        append_result({"benchmark": "predict_speed", "variant": name, "encoder": encoder, "documents": size,
                       "embedding_dim": args.embedding_dim, "hidden_size": args.hidden_size,
                       "trained_on": args.train_on, "input": "text" if args.text else "tokens",
                       "threads": 1 if name == "workers" else args.threads,
                       "workers": args.workers if name == "workers" else 1, "docs_per_s": round(rate, 1),
                       "peak_mb": round(peak, 1), "selected": None if share is None else round(share, 4),
                       "device": "cpu", "baseline": args.baseline if name == "baseline" else None,
                       "command": command, "commit": git_commit()})
        print(f"{encoder:5} {size:>9,} {name:9} {rate:8,.0f} docs/s  peak {peak:7.0f} MB"
              + ("" if share is None else f"  selected {share:.1%}"))
    for name in ("predict", "workers"):
        if "baseline" in rates and name in rates:
            print(f"{encoder:5} {size:>9,} {name} / baseline: {rates[name] / rates['baseline']:.2f}x")


if __name__ == "__main__":
    main()
