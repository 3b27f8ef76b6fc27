"""CPU cost of one training step per extractor, relative to the full-text baseline,
measured side by side in one run (same batch, same encoder, same sizes).

    python benchmarks/step_cost.py                      # B=256, T=150, D=50, H=200, BiRCNN
    python benchmarks/step_cost.py --threads 2 --repeats 5
    python benchmarks/step_cost.py --selected 0.13 --variants full hardkuma hardkuma-dependent bernoulli
    python benchmarks/step_cost.py --encoder cnn --batch 64 --embedding 200 --hidden 100 \
        --variants full sparsemap sparsemap-support-4 sparsemap-support-2 topk-sparsemax
    python benchmarks/step_cost.py --run RUN_DIR --data reviews.aspect0.heldout.txt.gz --aspect 0 \
        --batch 64 --max-support 4

With ``--run`` it times a trained run's own model on ``--batches`` batches of ``--data`` formed
as training forms them (similar lengths within a batch; the sum of their steps, since a
support grows with the review's length), a step where training took it (a mask-set
selector's supports are then far smaller than at initialization), uncapped and with
each ``--max-support`` cap, against a full-text model of the same sizes on that batch.

A step is the trainer's own ``training_step``: forward, loss, backward, clipping
and the Adam update. Prints the median milliseconds and the ratio to ``full``,
appends them to benchmarks/results/ and regenerates RESULTS.md.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import random
from pathlib import Path

import torch
from common import append_result, git_commit, invocation, timed, timing_parser, timing_setup
from report import write_report

from rationale_cli.data.batching import Batch, length_batches, make_batch
from rationale_cli.data.readers import read_records
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.run_directory import build_model, load_run
from rationale_cli.runs.task import Regression
from rationale_cli.training.loop import training_step

VARIANTS = {
    "full": ("full", {}),
    "attention": ("attention", {"budget": 0.13}),
    "hardkuma": ("hardkuma", {"budget": 0.13, "transitions": 0.02}),
    "hardkuma-dependent": ("hardkuma", {"budget": 0.13, "transitions": 0.02, "dependent": True}),
    "bernoulli": ("bernoulli", {}),
    "simple": ("simple", {"budget": 10}),
    "topk": ("topk", {"budget": 10}),
    "corr-topk": ("corr-topk", {"budget": 10}),
    "sparse-attention": ("sparse-attention", {}),
}
# sparse marginalization over masks: the predictor reads every mask of the support (tens per
# review at initialization), so these run only when named
MASK_SETS = {
    "sparsemap": ("sparsemap", {"budget": 0.13}),
    "sparsemap-support-4": ("sparsemap", {"budget": 0.13, "max_support": 4}),
    "sparsemap-support-2": ("sparsemap", {"budget": 0.13, "max_support": 2}),
    "topk-sparsemax": ("topk-sparsemax", {"budget": 0.13}),
}


def settle(model: RationaleModel, share: float) -> None:
    """Start a HardKuma or Bernoulli selector where training takes it, selecting about
    ``share`` of the tokens (at initialization they select about half): the weights scaled
    down and the biases set so that ``P(z != 0) = share``: for HardKuma shapes a = 1 and b
    with ``(1 - k0)^b = share`` (k0 = 0.1 / 1.2, the stretch of the support), for Bernoulli
    the logit of the share."""
    selector = model.selector
    if selector.scan is not None:
        layer = selector.scan.head
    else:
        layer = selector.shape_layer if hasattr(selector, "shape_layer") else selector.logit_layer
    if layer.out_features == 2:  # HardKuma's (a, b) through softplus
        bias = [math.log(math.expm1(1.0)), math.log(math.expm1(math.log(share) / math.log(1 - 0.1 / 1.2)))]
    else:
        bias = [math.log(share / (1 - share))]
    with torch.no_grad():
        layer.weight.mul_(0.01)
        layer.bias.copy_(torch.tensor(bias))


def time_run(args, device, device_name: str) -> None:
    """``--run``: the trained model and its capped variants against a full-text model of the
    same sizes, on real reviews."""
    run = load_run(args.run, device)
    groups = itertools.islice(length_batches(read_records(args.data, aspect=args.aspect), args.batch,
                                             rng=random.Random(0)), args.batches)
    batches = [make_batch(records, run.vocab, run.task, device) for records in groups]
    torch.manual_seed(0)
    models = {"full": build_model(run.config, len(run.vocab), run.task, selector="full")}
    for cap in [None, *args.max_support]:
        model = copy.deepcopy(run.model)
        if hasattr(model.selector.options, "max_support"):  # the run's own cap is one of the variants
            model.selector.options = dataclasses.replace(model.selector.options, max_support=cap)
        models[run.config.extractor + ("" if cap is None else f"-support-{cap}")] = model
    lengths = [batch.ids.shape[1] for batch in batches]
    print(f"{args.run}: {len(batches)} batches of B={args.batch}, T<={lengths} encoder={run.config.encoder} "
          f"threads={args.threads} device={device}")
    timings = {}
    for name, model in models.items():
        model.to(device).train()
        with torch.no_grad():
            supports = [model(batch.ids, batch.mask)[0].stats.get("support") for batch in batches]
        if supports[0] is not None:
            name = f"{name} (support {', '.join(f'{float(s):.1f}' for s in supports)})"
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-6)
        each = [timed(lambda: training_step(model, run.task, batch, optimizer, 5.0), args.repeats, device)
                for batch in batches]
        print(f"{name:20s} per batch: {', '.join(f'{ms:.1f}' for ms in each)} ms")
        timings[name] = sum(each)
    sizes = {"encoder": run.config.encoder, "batch": args.batch, "length": max(lengths), "batches": lengths,
             "embedding": run.config.embedding_dim, "hidden": run.config.hidden_size, "run": Path(args.run).name}
    record_timings(timings, args, device_name, sizes)


def record_timings(timings: dict[str, float], args, device_name: str, sizes: dict) -> None:
    """Print each variant's milliseconds and ratio to ``full``; append the rows; regenerate RESULTS.md."""
    base = timings.get("full")
    command = invocation()
    for name, ms in timings.items():
        ratio = ms / base if base else None
        print(f"{name:20s} {ms:9.1f} ms/step  " + (f"{ratio:.2f}x full" if ratio else ""))
        append_result({"benchmark": "step_cost", "variant": name, **sizes, "threads": args.threads,
                       "ms": round(ms, 1), "ratio_to_full": ratio and round(ratio, 3),
                       "device": device_name, "command": command, "commit": git_commit()})
    write_report()


def main() -> None:
    parser = timing_parser(__doc__, batch=256, length=150)
    parser.add_argument("--embedding", type=int, default=50)
    parser.add_argument("--hidden", type=int, default=200)
    parser.add_argument("--encoder", default="rcnn")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=[*VARIANTS, *MASK_SETS])
    parser.add_argument("--selected", type=float, default=None,
                        help="start the HardKuma and Bernoulli variants selecting about this share of the "
                        "tokens, as in training")
    parser.add_argument("--run", default=None, help="a trained run directory to time (with --data)")
    parser.add_argument("--data", default=None, help="reviews for --run, read with its vocabulary")
    parser.add_argument("--aspect", type=int, default=None, help="the beer aspect of --data")
    parser.add_argument("--batches", type=int, default=4,
                        help="with --run: time this many batches (of different lengths) and sum their steps")
    parser.add_argument("--max-support", type=int, nargs="*", default=[],
                        help="with --run: also time its mask-set selector capped at these support sizes")
    args = parser.parse_args()
    device, device_name = timing_setup(args)
    if args.run:
        time_run(args, device, device_name)
        return
    vocab = 5000
    lengths = torch.randint(args.length // 2, args.length + 1, (args.batch,))
    lengths[0] = args.length
    mask = (torch.arange(args.length).unsqueeze(0) < lengths.unsqueeze(1)).float()
    ids = torch.randint(2, vocab, (args.batch, args.length)) * mask.long()
    batch = Batch([], ids.to(device), mask.to(device), torch.rand(args.batch, device=device))
    task = Regression()
    print(f"B={args.batch} T<={args.length} D={args.embedding} H={args.hidden} encoder={args.encoder} "
          f"threads={args.threads} device={device} torch={torch.__version__}")
    timings = {}
    for name in args.variants:
        extractor, options = {**VARIANTS, **MASK_SETS}[name]
        model = RationaleModel(vocab, args.embedding, args.hidden, 1, encoder=args.encoder,
                               extractor=extractor, extractor_options=options).to(device)
        if args.selected is not None and extractor in ("hardkuma", "bernoulli"):
            settle(model, args.selected)
            with torch.no_grad():
                share = float(model(batch.ids, batch.mask)[0].stats["selected"])
            name = f"{name} ({100 * share:.0f}% selected)"
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=4e-4)
        timings[name] = timed(lambda: training_step(model, task, batch, optimizer, 5.0), args.repeats, device)
    sizes = {"encoder": args.encoder, "batch": args.batch, "length": args.length, "embedding": args.embedding,
             "hidden": args.hidden}
    record_timings(timings, args, device_name, sizes)


if __name__ == "__main__":
    main()
