"""Time the encoders side by side on CPU: forward+backward (training) and no-grad forward.

    .venv/bin/python benchmarks/encoder_speed.py                     # B=256 T=150 D=200 H=200, bidirectional
    .venv/bin/python benchmarks/encoder_speed.py --length 400 --repeats 3

Random inputs, all-ones mask (the recurrences do the same work whatever the
mask). All encoders run round-robin within each repeat, so machine noise hits
them alike; the table gives the median over repeats and the ratio to the CNN.
``rcnn/autograd`` and ``lstm/autograd`` are the same encoders with the time
loop written step by step for autograd (the references in
``models/encoders/recurrence.py``), to show what the hand-written backward buys.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from rationale_cli.models.encoders import ENCODERS, build_encoder
from rationale_cli.models.encoders.recurrence import (
    lstm_scan_autograd,
    merge_directions,
    rcnn_scan_autograd,
    stack_directions,
)


def autograd_twin(enc):
    """The encoder's forward with the plain-autograd time loop."""

    def forward(x, mask):
        if enc.__class__.__name__ == "RCNNEncoder":
            bias_ih = torch.cat((enc.bias_lambda, torch.zeros_like(enc.bias_lambda).repeat(1, 2)), -1)
            P, M = stack_directions(x, mask, enc.weight_ih, bias_ih)
            out = rcnn_scan_autograd(P, M, enc.weight_hh, enc.bias)
        else:
            P, M = stack_directions(x, mask, enc.weight_ih, enc.bias)
            out = lstm_scan_autograd(P, M, enc.weight_hh)
        return merge_directions(out, mask)

    return forward


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--length", type=int, default=150)
    ap.add_argument("--input-size", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--unidirectional", action="store_true")
    ap.add_argument("--encoders", default=",".join(ENCODERS), help="comma-separated subset of %(default)s")
    ap.add_argument("--no-autograd", action="store_true", help="skip the plain-autograd references")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = ap.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    B, T, D, H = args.batch, args.length, args.input_size, args.hidden
    kinds = [k.strip() for k in args.encoders.split(",") if k.strip()]
    runners = {}
    for kind in kinds:
        enc = build_encoder(kind, D, H, bidirectional=not args.unidirectional)
        runners[kind] = (enc, enc)
        if kind in ("rcnn", "lstm") and not args.no_autograd:
            runners[f"{kind}/autograd"] = (enc, autograd_twin(enc))
    x = torch.randn(B, T, D, requires_grad=True)
    mask = torch.ones(B, T, requires_grad=True)

    def train_step(fn, enc):
        enc.zero_grad(set_to_none=True)
        x.grad = mask.grad = None
        t0 = time.perf_counter()
        states, summary = fn(x, mask)
        (states.mean() + summary.mean()).backward()
        return time.perf_counter() - t0

    def infer_step(fn):
        t0 = time.perf_counter()
        with torch.no_grad():
            fn(x, mask)
        return time.perf_counter() - t0

    train = {name: [] for name in runners}
    infer = {name: [] for name in runners}
    for rep in range(args.warmup + args.repeats):
        for name, (enc, fn) in runners.items():
            t_train, t_infer = train_step(fn, enc), infer_step(fn)
            if rep >= args.warmup:
                train[name].append(t_train)
                infer[name].append(t_infer)

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; B={B} T={T} D={D} H={H} "
        f"{'unidirectional' if args.unidirectional else 'bidirectional'}; median of {args.repeats}"
    )
    base_name = "cnn" if "cnn" in train else None
    base = statistics.median(train[base_name]) if base_name else None
    print(f"{'encoder':<15} {'fwd+bwd ms':>11} {'x cnn':>7} {'fwd no-grad ms':>15}")
    for name in runners:
        t = statistics.median(train[name]) * 1e3
        ratio = f"{t / (base * 1e3):7.1f}" if base else f"{'-':>7}"
        print(f"{name:<15} {t:11.1f} {ratio} {statistics.median(infer[name]) * 1e3:15.1f}")


if __name__ == "__main__":
    main()
