"""Speed of SIMPLE's path (Ahmed et al., 2023): the k-subset DP, the exact marginals,
one exact sample and the estimator's backward pass ``J_mu^T g``, at batch 100,
n = 350, k = 10, for the library's two programs (the sequential one with its
explicit backward pass, its loops compiled where they can be and as PyTorch loops,
``RATIONALE_NATIVE=0``; and the log-depth tree) and the straightforward vectorized
DP with autograd through the unrolled loop (``reference_ksubset.py``), measured
side by side in one run.

    python benchmarks/ksubset_speed.py [--batch 100 --length 350 --k 10 --repeats 5]
    python benchmarks/ksubset_speed.py --device cuda
"""

from __future__ import annotations

import os

import reference_ksubset
import torch
from common import append_result, git_commit, invocation, timed, timing_parser, timing_setup
from report import write_report

import rationale_cli.models.native as native
from rationale_cli.models.distributions.ksubset import KSubset, simple_estimator


def library(method: str):
    def run(logits, mask, k, g):
        theta = logits.detach().requires_grad_(True)
        z, _ = simple_estimator(KSubset(theta, mask, k, method=method))
        (z * g).sum().backward()

    return run


def without_compiled_loops(run):
    """``run`` with the compiled loops off (``RATIONALE_NATIVE=0``): the PyTorch loops."""
    def plain(*args):
        before = os.environ.get("RATIONALE_NATIVE")
        os.environ["RATIONALE_NATIVE"] = "0"
        native.library.cache_clear()
        try:
            run(*args)
        finally:
            if before is None:
                del os.environ["RATIONALE_NATIVE"]
            else:
                os.environ["RATIONALE_NATIVE"] = before
            native.library.cache_clear()

    return plain


def straightforward(logits, mask, k, g):
    theta = logits.detach().requires_grad_(True)
    mu = reference_ksubset.marginals(theta, mask, k)
    z = reference_ksubset.sample(theta.detach(), mask, k) + mu - mu.detach()
    (z * g).sum().backward()


def main() -> None:
    parser = timing_parser(__doc__, batch=100, length=350)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    device, device_name = timing_setup(args)
    logits = torch.randn(args.batch, args.length, device=device) * 2
    mask = torch.ones(args.batch, args.length, device=device)
    k = torch.full((args.batch,), args.k, device=device, dtype=torch.long)
    g = torch.randn(args.batch, args.length, device=device)
    command = invocation()
    print(f"B={args.batch} n={args.length} k={args.k} device={device_name} threads={args.threads} torch={torch.__version__}")
    variants = {"sequential": library("sequential"), "sequential-plain": without_compiled_loops(library("sequential")),
                "tree": library("tree"), "straightforward": straightforward}
    results = {key: timed(lambda fn=fn: fn(logits, mask, k, g), args.repeats, device) for key, fn in variants.items()}
    base = results["straightforward"]
    for key, ms in results.items():
        print(f"{key:16s} {ms:8.1f} ms   {base / ms:5.2f}x faster than straightforward")
        append_result({"benchmark": "ksubset_speed", "variant": key, "batch": args.batch, "length": args.length,
                       "k": args.k, "threads": args.threads, "ms": round(ms, 2),
                       "speedup_vs_straightforward": round(base / ms, 2), "device": device_name, "command": command,
                       "commit": git_commit()})
    write_report()


if __name__ == "__main__":
    main()
