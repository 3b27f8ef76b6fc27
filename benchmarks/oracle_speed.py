"""Speed of SparseMAP's oracle with the coherence factor (Correia et al., 2020, appendix C):
the best mask with at most B ones under unary and pair scores, for a batch of reviews, by
the chain program's max reduction (``Max``: plain maxima, the walk back in numpy; the
default), by its K-max form with one rank (``topk(1)``, the program that served before),
and by the log-depth tree's gradient, side by side in one run (float64, as the active set
calls it; pair scores ``0.5 N(0, 1)``, the budget 13% of each review).

    python benchmarks/oracle_speed.py [--batch 16 --length 150 --repeats 10]
"""

from __future__ import annotations

import torch
from common import append_result, git_commit, invocation, timed, timing_parser, timing_setup
from report import write_report

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset


def main() -> None:
    parser = timing_parser(__doc__, batch=16, length=150)
    args = parser.parse_args()
    device, device_name = timing_setup(args)
    torch.manual_seed(0)
    like = dict(device=device, dtype=torch.float64)
    unary = torch.randn(args.batch, args.length, **like)
    pair = 0.5 * torch.randn(args.batch, args.length - 1, **like)
    mask = torch.ones(args.batch, args.length, **like)
    budgets = torch.full((args.batch,), max(1, round(0.13 * args.length)), device=device)

    def distribution(method: str = "sequential") -> ChainKSubset:
        return ChainKSubset(unary, mask, budgets, pair, at_most=True, method=method)

    variants = {"max": lambda: distribution().argmax, "k-max, one rank": lambda: distribution().topk(1)[0][:, 0],
                "tree": lambda: distribution("tree").argmax}
    masks = [run() for run in variants.values()]
    if not all(torch.equal(masks[0], other) for other in masks[1:]):
        raise SystemExit("the programs found different masks")
    results = {name: timed(run, args.repeats, device) for name, run in variants.items()}
    command = invocation()
    print(f"B={args.batch} T={args.length} budget={int(budgets[0])} device={device_name} threads={args.threads}")
    base = results["max"]
    for name, ms in results.items():
        print(f"{name:16s} {ms:8.1f} ms   {ms / base:5.2f}x max")
        append_result({"benchmark": "oracle_speed", "variant": name, "batch": args.batch, "length": args.length,
                       "threads": args.threads, "ms": round(ms, 2), "ratio_to_max": round(ms / base, 2),
                       "device": device_name, "command": command, "commit": git_commit()})
    write_report()


if __name__ == "__main__":
    main()
