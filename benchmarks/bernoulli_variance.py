"""Variance of the REINFORCE gradient per baseline (Lei et al., 2016; Bastings et al.,
2019, section 6), on one fixed batch of the synthetic demo corpus, measured side by
side in one run.

For each baseline (none, an exponential moving average, leave-one-out over S
samples), with the sparsity and coherence costs sampled through the score function
(Lei et al.) or differentiated exactly through their expectations, the selector's gradient of the training loss is drawn ``--draws`` times
from the same model (same initial weights) and batch; printed: the total variance
(sum over parameters of the per-coordinate variance), its ratio to ``none``, and
the cosine between the mean gradient and ``none``'s with sampled costs (all are
unbiased, so the means agree up to noise). The moving average is warmed up on the
batch first. ``--sparsity`` sets the cost per token (coherence twice that).

    python benchmarks/bernoulli_variance.py [--draws 300 --batch 50 --samples 4]
"""

from __future__ import annotations

import argparse

import torch
from common import append_result, git_commit, invocation
from report import write_report

from rationale_cli.data.batching import make_batch
from rationale_cli.data.sources import load
from rationale_cli.data.vocab import Vocab
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.task import Regression
from rationale_cli.training.loop import training_loss

BASELINES = ("none", "ema", "loo")


def gradient_draws(model: RationaleModel, batch, draws: int) -> torch.Tensor:
    params = [p for p in model.selector.parameters()] + [p for p in model.selector_encoder.parameters()]
    rows = []
    for _ in range(draws):
        loss, _ = training_loss(model, Regression(), batch)
        rows.append(torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)]))
    return torch.stack(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--samples", type=int, default=4, help="rationales per document (all baselines)")
    parser.add_argument("--sparsity", type=float, default=0.0003, help="cost per selected token")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    records = load("demo", "train")[: args.batch]
    vocab = Vocab.build(r.tokens for r in load("demo", "train"))
    batch = make_batch(records, vocab, Regression())
    command = invocation()
    results = {}
    for penalty in ("sampled", "exact"):
        for name in BASELINES:
            torch.manual_seed(0)  # the same initial weights for every variant
            options = {"baseline": name, "samples": args.samples, "sparsity": args.sparsity,
                       "exact_penalty": penalty == "exact"}
            model = RationaleModel(len(vocab), 50, 64, 1, encoder="rcnn", extractor="bernoulli", dropout=0.0,
                                   extractor_options=options)
            model.train()
            if name == "ema":
                gradient_draws(model, batch, 50)  # warm the moving average
            grads = gradient_draws(model, batch, args.draws)
            results[name, penalty] = (grads.var(0).sum().item(), grads.mean(0))
    base_var, base_mean = results["none", "sampled"]
    print(f"demo batch of {args.batch}, {args.samples} samples per document, {args.draws} draws, "
          f"sparsity {args.sparsity}")
    for (name, penalty), (variance, mean) in results.items():
        cosine = torch.nn.functional.cosine_similarity(mean, base_mean, dim=0).item()
        print(f"{name:5s} {penalty:8s} total variance {variance:10.4g}   x none {variance / base_var:6.3f}   "
              f"cosine to none {cosine:5.3f}")
        append_result({"benchmark": "bernoulli_variance", "baseline": name, "penalty": penalty,
                       "sparsity": args.sparsity, "samples": args.samples,
                       "batch": args.batch, "draws": args.draws, "total_variance": variance,
                       "ratio_to_none": round(variance / base_var, 4), "mean_cosine_to_none": round(cosine, 4),
                       "command": command, "commit": git_commit()})
    write_report()


if __name__ == "__main__":
    main()
