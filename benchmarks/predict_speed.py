"""Annotation throughput and memory: ``rationale predict`` on beer review text, against the
loop it replaces, side by side in one run.

    python benchmarks/predict_speed.py --data-dir ../shared/data --documents 10000 100000

Builds a JSON-lines corpus of beer reviews (pre-tokenized, so tokenization is not
timed; the heldout files' reviews, 154 tokens on average, repeated to the size asked),
trains a HardKuma model with CNN and with RCNN encoders on the first ``--train-documents``
aspect-0 reviews with their scores, for ``--train-epochs`` epochs toward 13% selected
(by default the beer sizes, 200-d embeddings and hidden 200; the selected share matters:
the predictor reads only the rationale, and is reported), then per model and size runs,
each in its own process: ``reference``, the loop ``predict`` had before windows (batches
in input order, autograd's no-grad mode, per-row tensor reads; only up to
``--reference-up-to`` documents), and ``predict``, the command as it is. Reports
documents per second and peak resident memory; appends one row each to results.jsonl.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, append_result, git_commit  # noqa: E402

REFERENCE = """
import json, sys, time, resource, torch
from rationale_cli import datasets
from rationale_cli.batching import make_batch
from rationale_cli.inference import chunks
from rationale_cli.output import to_json_line
from rationale_cli.rundir import load_run
torch.set_num_threads({threads})
run = load_run(sys.argv[1])
started = time.perf_counter()
count = 0
with open(sys.argv[3], "w") as out:
    for chunk in chunks(datasets.stream(sys.argv[2], label_col=None), 64):
        batch = make_batch(chunk, run.vocab, None, "cpu")
        with torch.no_grad():
            z, scores, outputs = run.model.decode(batch.ids, batch.mask)
        for row, record in enumerate(chunk):
            n = len(record.tokens)
            prediction, extra = run.task.describe(outputs[row].cpu())
            spans, start = [], None
            selected = [int(v != 0) for v in z[row, :n].tolist()]
            line = {{"id": record.id, "prediction": prediction, **extra,
                     "selected_tokens": [t for t, s in zip(record.tokens, selected) if s],
                     "token_scores": [round(float(v), 4) for v in scores[row, :n].tolist()]}}
            out.write(to_json_line(line))
            count += 1
print(json.dumps({{"seconds": time.perf_counter() - started, "documents": count,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def corpus(beer: Path, size: int, path: Path) -> None:
    reviews = []
    for source in sorted(beer.glob("reviews.aspect*.heldout.txt.gz")):
        with gzip.open(source, "rt", encoding="utf-8") as handle:
            reviews += [line.split("\t", 1)[1].split() for line in handle if "\t" in line]
    with open(path, "w", encoding="utf-8") as out:
        for index in range(size):
            out.write(json.dumps({"id": str(index), "tokens": reviews[index % len(reviews)]}) + "\n")


def train(encoder: str, beer: Path, out: Path, documents: int, epochs: int, sizes: list[str]) -> None:
    train_file = out.with_suffix(".train.jsonl")
    with gzip.open(beer / "reviews.aspect0.heldout.txt.gz", "rt", encoding="utf-8") as source, \
            open(train_file, "w", encoding="utf-8") as target:
        for _, line in zip(range(documents), source):
            scores, text = line.split("\t", 1)
            target.write(json.dumps({"tokens": text.split(), "score": float(scores.split()[0])}) + "\n")
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


# the command in-process, then its peak memory: its own summary line gives the rate
PREDICT = """
import json, resource, sys
from rationale_cli.cli import app
try:
    app(sys.argv[1:])
except SystemExit as stop:
    assert not stop.code, stop.code
print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(command: list[str]) -> tuple[float, float]:
    """Documents per second of the command's own loop (reading, model, writing; not the
    start-up) and its peak resident memory in MB."""
    done = subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    if "seconds" in data:
        return data["documents"] / data["seconds"], data["peak_mb"]
    rate = re.search(r"([\d,]+) documents/s", done.stderr)
    return float(rate.group(1).replace(",", "")), data["peak_mb"]


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
    parser.add_argument("--train-documents", type=int, default=3000)
    parser.add_argument("--train-epochs", type=int, default=3)
    parser.add_argument("--reference-up-to", type=int, default=100_000,
                        help="run the reference loop only on corpora up to this size (it is slow)")
    args = parser.parse_args()
    command = "python benchmarks/predict_speed.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in vars(args).items()
        if k not in ("data_dir", "models"))
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        biggest = max(args.documents)
        corpus(args.data_dir / "beer", biggest, work / "all.jsonl")
        print(f"{platform.processor() or platform.machine()}, {args.threads} threads, torch {__import__('torch').__version__}")
        for encoder in args.encoders:
            run = (args.models or work) / f"{encoder}-{args.embedding_dim}-{args.hidden_size}"
            if not (run / "model.safetensors").is_file():
                train(encoder, args.data_dir / "beer", run, args.train_documents, args.train_epochs,
                      ["--embedding-dim", str(args.embedding_dim), "--hidden-size", str(args.hidden_size)])
            for size in args.documents:
                data = work / f"corpus{size}.jsonl"
                with open(work / "all.jsonl", encoding="utf-8") as source, open(data, "w", encoding="utf-8") as target:
                    target.writelines(line for _, line in zip(range(size), source))
                variants = {
                    "reference": [sys.executable, "-c", REFERENCE.format(threads=args.threads), str(run), str(data),
                                  str(work / "ref.jsonl")],
                    "predict": [sys.executable, "-c", PREDICT, "predict", str(run), str(data), "--out",
                                str(work / "new.jsonl"), "--force", "--threads", str(args.threads), "--device", "cpu"],
                }
                if size > args.reference_up_to:
                    del variants["reference"]
                rates = {}
                for name, argv in variants.items():
                    rate, peak = measure(argv)
                    rates[name] = rate
                    share = selected_share(work / "new.jsonl") if name == "predict" else None
                    row = {"benchmark": "predict_speed", "variant": name, "encoder": encoder, "documents": size,
                           "embedding_dim": args.embedding_dim, "hidden_size": args.hidden_size,
                           "threads": args.threads, "docs_per_s": round(rate, 1), "peak_mb": round(peak, 1),
                           "selected": None if share is None else round(share, 4), "device": "cpu",
                           "command": command, "commit": git_commit()}
                    append_result(row)
                    print(f"{encoder:5} {size:>8,} {name:10} {rate:8,.0f} docs/s  peak {peak:7.0f} MB"
                          + ("" if share is None else f"  selected {share:.1%}"))
                if "reference" in rates:
                    print(f"{encoder:5} {size:>8,} predict / reference: {rates['predict'] / rates['reference']:.2f}x")


if __name__ == "__main__":
    main()
