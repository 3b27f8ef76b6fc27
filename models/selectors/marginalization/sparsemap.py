"""SparseMAP rationales: deterministic sparse marginalization over masks with a
budget (Correia et al., 2020, section 4.2; the distribution is in
:mod:`rationale_cli.models.distributions.sparsemap`).

Token scores ``t_i`` come from a linear layer over the selector encoder's states;
with ``pairwise``, a coherence factor scores adjacent selected tokens, and
``coherence`` costs each 0/1 transition (:mod:`rationale_cli.models.selectors.marginalization.mask_set`).
Each document's budget B comes from ``budget`` (a share or a count, a cap). SparseMAP
returns a handful of masks with at most B tokens and their weights; the trainer
evaluates the predictor on each mask and sums the losses weighted by xi: no
sampling, no relaxation. The support size is reported (it adapts during training:
the paper's observation). ``max_support`` keeps only the most probable masks of
each document and renormalizes their weights: an approximation of the marginalized
loss that bounds the predictor's work (early in training a beer review's support
holds 40-50 masks). Test time: the most probable mask; token scores are the marginals
``mu = sum_z xi_z z``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from rationale_cli.models.distributions.sparsemap import sparsemap
from rationale_cli.models.options import option
from rationale_cli.models.selectors.marginalization.mask_set import MaskSetOptions, MaskSetSelector


@dataclass(frozen=True)
class SparseMAPOptions(MaskSetOptions):
    max_support: int | None = option(None, "keep at most this many masks per document, the most probable, "
                                     "their weights renormalized (an approximation that bounds the "
                                     "predictor's work)", low=1, default_text="all")


class SparseMAPSelector(MaskSetSelector):
    Options = SparseMAPOptions
    summary = ("SparseMAP (Correia et al. 2020): a sparse distribution over a handful of masks of at most "
               "{budget} tokens, the task loss summed over them with their weights (no sampling, no "
               "relaxation); test time takes the most probable mask")

    def solve(self, states: Tensor, mask: Tensor, coherence: float | None = None) -> tuple[Tensor, Tensor]:
        unary, pair = self.mask_scores(states, mask, coherence)
        weights, masks = sparsemap(unary, mask, self.budgets(mask), pair)
        cap = self.options.max_support
        if cap is None or weights.shape[1] <= cap:
            return weights, masks
        weights, kept = weights.topk(cap, -1)
        masks = masks.gather(1, kept.unsqueeze(-1).expand(-1, -1, masks.shape[-1]))
        return weights / weights.sum(-1, keepdim=True), masks

    def support_stats(self, weights: Tensor, masks: Tensor, mask: Tensor) -> dict[str, Tensor]:
        selected = (weights.unsqueeze(-1) * masks).sum((1, 2)) / mask.sum(-1).clamp_min(1.0)
        return {**super().support_stats(weights, masks, mask), "selected": selected.mean()}
