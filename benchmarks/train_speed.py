"""Training throughput and memory: one epoch of each extractor's beer protocol (its encoder,
batch size and options from benchmarks/RESULTS.md, aspect 0), this checkout against the
commit ``--baseline`` run from a git worktree, side by side in one run.

    python benchmarks/train_speed.py --data-dir ../shared/data --baseline b645792
    python benchmarks/train_speed.py --extractors hardkuma bernoulli --reviews 3000 --repeats 2

Each epoch is ``rationale train --epochs 1`` in its own process (the baseline's and this
checkout's alternate, so both see the same machine); the time is the epoch's own
(``metrics.json``: its training steps and its validation pass, not the start-up), the
memory the process's peak resident size. ``--reviews N`` trains on the first N reviews of
the aspect-0 file (10% of them for validation; default all 10,000, as the protocol does),
with random 200-d embeddings, trained as ``train`` trains them without vectors, unless
``--embeddings`` names vectors, which stay fixed as in the beer protocols (their sizes, not
their values, set the cost; training the embeddings costs more). Prints reviews per second
and the ratio to the baseline, appends one row per commit to benchmarks/results/ and regenerates
RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import tempfile
from pathlib import Path

import torch
from common import ROOT, append_result, commit_tree, cpu_model, git_commit, invocation, measured, vectors_name
from report import write_report

from rationale_cli.data.readers.beer import iter_beer

# each extractor's beer protocol (aspect 0 where it has one): encoder and options
PROTOCOLS = {
    "hardkuma": ["--encoder", "rcnn", "--budget", "0.1", "--dependent", "--transitions", "0.02", "--batch-size", "64"],
    "hardkuma-independent": ["--extractor", "hardkuma", "--encoder", "rcnn", "--budget", "0.1", "--independent",
                             "--transitions", "0.02", "--batch-size", "64"],
    "bernoulli": ["--encoder", "rcnn", "--budget", "0.13", "--lagrangian", "--sparsity", "0", "--coherence", "0.0006",
                  "--lagrange-rho", "20", "--baseline", "loo", "--samples", "4", "--batch-size", "64"],
    "simple": ["--encoder", "l2x", "--budget", "10", "--batch-size", "100"],
    "corr-topk": ["--encoder", "sst-complex", "--budget", "10", "--batch-size", "100"],
    "topk": ["--encoder", "sst-complex", "--budget", "10", "--batch-size", "100"],
    "sparsemap": ["--encoder", "cnn", "--budget", "0.13", "--max-support", "4", "--batch-size", "16"],
    "topk-sparsemax": ["--encoder", "cnn", "--budget", "0.13", "--batch-size", "64"],
    "sparse-attention": ["--encoder", "cnn", "--hidden-size", "100", "--attention", "fusedmax", "--gamma", "0.1",
                         "--batch-size", "64"],
}


def training_file(beer: Path, reviews: int | None, path: Path) -> int:
    """The first ``reviews`` aspect-0 reviews with their scores as JSON lines; how many."""
    records = iter_beer(beer / "reviews.aspect0.heldout.txt.gz", aspect=0)
    count = 0
    with open(path, "w", encoding="utf-8") as target:
        for record in itertools.islice(records, reviews):
            target.write(json.dumps({"tokens": record.tokens, "score": record.label}) + "\n")
            count += 1
    return count


def epoch(name: str, data: Path, out: Path, tree: Path, args) -> tuple[float, float]:
    """Seconds of one epoch of ``name``'s protocol with the code of ``tree``, and the peak MB."""
    protocol = PROTOCOLS[name]
    extractor = [] if "--extractor" in protocol else ["--extractor", name]
    vectors = ["--embeddings", str(args.embeddings)] if args.embeddings else ["--embedding-dim", "200"]
    _, peak = measured(["train", "--data", str(data), "--valid-fraction", "0.1", *extractor, *protocol, *vectors,
                        "--lr", "0.001", "--epochs", "1", "--seed", "0", "--device", "cpu",
                        "--out", str(out), "--force"], tree)
    return json.loads((out / "metrics.json").read_text())["history"][0]["seconds"], peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--extractors", nargs="+", default=list(PROTOCOLS), choices=list(PROTOCOLS))
    parser.add_argument("--baseline", default=None, help="a commit whose training to measure beside")
    parser.add_argument("--reviews", type=int, default=None, help="train on the first N reviews (default all)")
    parser.add_argument("--embeddings", type=Path, default=None, help="word vectors (default random 200-d)")
    parser.add_argument("--repeats", type=int, default=1, help="epochs per extractor and commit (median kept)")
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        documents = training_file(args.data_dir / "beer", args.reviews, work / "train.jsonl")
        trained = documents - round(documents * 0.1)
        with commit_tree(args.baseline, work / "baseline-tree") as baseline:
            trees = {"baseline": baseline, "this": ROOT} if baseline else {"this": ROOT}
            for name in args.extractors:
                seconds: dict[str, list[float]] = {tree: [] for tree in trees}
                peaks: dict[str, list[float]] = {tree: [] for tree in trees}
                for _, (tree, path) in itertools.product(range(args.repeats), trees.items()):
                    took, peak = epoch(name, work / "train.jsonl", work / f"run-{tree}", path, args)
                    seconds[tree].append(took)
                    peaks[tree].append(peak)
                record(name, seconds, peaks, trained, args)


def record(name: str, seconds: dict, peaks: dict, trained: int, args) -> None:
    """Print an extractor's epochs and ratio; one row per commit in benchmarks/results/; RESULTS.md."""
    median = {tree: statistics.median(values) for tree, values in seconds.items()}
    for tree, took in median.items():
        ratio = median["baseline"] / took if "baseline" in median and tree == "this" else None
        print(f"{name:22s} {tree:8s} {took:7.1f} s/epoch  {trained / took:6.1f} reviews/s  "
              f"peak {max(peaks[tree]) / 1024:.2f} GB" + (f"  {ratio:.2f}x the baseline" if ratio else ""))
        append_result({"benchmark": "train_speed", "extractor": name, "protocol": " ".join(PROTOCOLS[name]),
                       "commit": args.baseline if tree == "baseline" else git_commit(),
                       "baseline": args.baseline if tree == "this" else None, "reviews": trained,
                       "epoch_seconds": [round(s, 1) for s in seconds[tree]],
                       "reviews_per_second": round(trained / took, 1), "peak_gb": round(max(peaks[tree]) / 1024, 2),
                       "speedup": ratio and round(ratio, 2), "threads": torch.get_num_threads(), "device": "cpu",
                       "cpu": cpu_model(),
                       "embeddings": vectors_name(args.embeddings) + " (fixed)" if args.embeddings else "random (trained)",
                       "command": invocation()})
    write_report()


if __name__ == "__main__":
    main()
