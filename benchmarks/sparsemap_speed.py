"""Speed of SparseMAP's solver without pairwise terms (Correia et al., 2020, section 4.2): the
batched closed form (projection onto the budget polytope and its staircase of masks) against
the active-set algorithm of appendix B run per document, on the same scores, side by side in
one run, forward and backward, with the support sizes each finds. Two regimes of scores:
nearly equal (as at initialization, where supports are largest) and spread out.

    python benchmarks/sparsemap_speed.py [--batch 64 --length 150 --budget 0.13 --repeats 5]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_result, git_commit, timed, timing_parser, timing_setup  # noqa: E402
from report import write_report  # noqa: E402
from models.distributions.sparsemap import solve_sparsemap, sparsemap  # noqa: E402


def active_set(scores, mask, budgets) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Appendix B's algorithm, one document at a time (what ``sparsemap`` ran before the closed form)."""
    solutions = [solve_sparsemap(t[keep].numpy(), int(b)) for t, keep, b in
                 zip(scores.double(), mask > 0, budgets.tolist())]
    return [a for a, _ in solutions], [xi for _, xi in solutions]


def main() -> None:
    parser = timing_parser(__doc__, batch=64, length=150)
    parser.add_argument("--budget", type=float, default=0.13)
    args = parser.parse_args()
    device, device_name = timing_setup(args)
    torch.manual_seed(0)
    lengths = torch.randint(args.length // 2, args.length + 1, (args.batch,))
    mask = (torch.arange(args.length)[None] < lengths[:, None]).float()
    budgets = torch.tensor([math.ceil(args.budget * n) for n in lengths.tolist()])
    command = " ".join(["python", "benchmarks/sparsemap_speed.py", *sys.argv[1:]])
    print(f"B={args.batch} T<={args.length} budget={args.budget} threads={args.threads} torch={torch.__version__}")
    for regime, scale in (("nearly equal", 0.1), ("spread", 1.0)):
        scores = torch.randn(args.batch, args.length) * scale + 0.1
        g = torch.randn(args.batch, args.length)

        def closed_form():
            t = scores.clone().requires_grad_(True)
            weights, masks = sparsemap(t, mask, budgets)
            ((weights.unsqueeze(-1) * masks).sum(1) * g).sum().backward()
            return weights

        closed_ms = timed(closed_form, args.repeats, device)
        active_ms = timed(lambda: active_set(scores, mask, budgets), max(1, args.repeats // 2), device)
        support = float((closed_form() > 0).sum(-1).float().mean())
        active_support = float(np.mean([len(xi) for xi in active_set(scores, mask, budgets)[1]]))
        print(f"{regime:13s} closed form {closed_ms:8.1f} ms (forward + backward, support {support:.1f})   "
              f"active set {active_ms:8.1f} ms (forward only, support {active_support:.1f})   "
              f"{active_ms / closed_ms:.1f}x")
        append_result({"benchmark": "sparsemap_speed", "variant": regime, "batch": args.batch,
                       "length": args.length, "budget": args.budget, "threads": args.threads,
                       "closed_form_ms": round(closed_ms, 1), "active_set_ms": round(active_ms, 1),
                       "support": round(support, 1), "active_set_support": round(active_support, 1),
                       "speedup": round(active_ms / closed_ms, 1), "device": device_name,
                       "command": command, "commit": git_commit()})
    write_report()


if __name__ == "__main__":
    main()
