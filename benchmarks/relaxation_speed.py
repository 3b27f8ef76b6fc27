"""Speed of the top-k relaxations (Paulus et al., 2020): one forward + backward of the
relaxed k-subset at batch 100, n = 350, k = 10 (CPU or GPU), exact backward pass against
a finite-difference backward (two extra forwards, J g ~ (mu(u + eps g) - mu(u - eps g)) / 2 eps,
as the paper's code does), measured side by side in one run.

    python benchmarks/relaxation_speed.py [--batch 100 --length 350 --k 10 --repeats 5]
    python benchmarks/relaxation_speed.py --device cuda
"""

from __future__ import annotations

import torch
from common import append_result, git_commit, invocation, timed, timing_parser, timing_setup
from report import write_report

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset
from rationale_cli.models.distributions.ksubset import KSubset


def relaxation(name: str, unary, pairwise, mask, k):
    if name == "topk":
        return KSubset(unary, mask, k).marginals
    return ChainKSubset(unary, mask, k, pairwise).marginals


def exact(name, unary, pairwise, mask, k, g):
    unary = unary.detach().requires_grad_(True)
    mu = relaxation(name, unary, pairwise, mask, k)
    (grad,) = torch.autograd.grad((mu * g).sum(), unary)
    return grad


def finite_difference(name, unary, pairwise, mask, k, g, eps=1e-3):
    with torch.no_grad():
        relaxation(name, unary, pairwise, mask, k)  # the forward pass itself
    plus = relaxation(name, unary + eps * g, pairwise, mask, k)
    minus = relaxation(name, unary - eps * g, pairwise, mask, k)
    return (plus - minus) / (2 * eps)


def main() -> None:
    parser = timing_parser(__doc__, batch=100, length=350)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    device, device_name = timing_setup(args)
    unary = torch.randn(args.batch, args.length, device=device)
    pairwise = torch.randn(args.batch, args.length - 1, device=device)
    mask = torch.ones(args.batch, args.length, device=device)
    g = torch.randn(args.batch, args.length, device=device)
    command = invocation()
    print(f"B={args.batch} n={args.length} k={args.k} device={device_name} threads={args.threads} torch={torch.__version__}")
    results = {}
    for name in ("topk", "corr-topk"):
        for method, fn in (("exact", exact), ("finite-difference", finite_difference)):
            ms = timed(lambda fn=fn, name=name: fn(name, unary, pairwise, mask, args.k, g), args.repeats, device)
            results[(name, method)] = ms
    base = results[("topk", "exact")]
    for (name, method), ms in results.items():
        print(f"{name:10s} {method:18s} {ms:8.1f} ms   {ms / base:5.2f}x topk exact")
        append_result({"benchmark": "relaxation_speed", "variant": name, "method": method, "batch": args.batch,
                       "length": args.length, "k": args.k, "threads": args.threads, "ms": round(ms, 1),
                       "ratio_to_topk_exact": round(ms / base, 3), "device": device_name, "command": command,
                       "commit": git_commit()})
    write_report()


if __name__ == "__main__":
    main()
