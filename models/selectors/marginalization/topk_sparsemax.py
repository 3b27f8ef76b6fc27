"""Top-k sparsemax rationales: sparse marginalization over the K best masks
(Correia et al., 2020, section 4.1; the K best masks are the K-max reduction of
:mod:`rationale_cli.models.distributions.chain_ksubset`).

Token scores theta come from a linear layer over the selector encoder's states; a
mask's score is ``<theta, z>``, plus ``sum_i w_i z_i z_{i+1}`` with ``pairwise``, less
``coherence`` per 0/1 transition (:mod:`rationale_cli.models.selectors.marginalization.mask_set`), and each
document's budget is at most ``budget`` tokens (a share or a count, a cap). The K best masks (``top_masks``) are
enumerated exactly, ``xi = sparsemax(their scores)``, and the trainer sums the
task loss over the masks with ``xi > 0``: deterministic, no sampling. Whenever fewer
than K masks get weight, xi equals sparsemax over all masks (the paper's
certificate); the run reports that share as ``exact`` and the support size.
Test time: the best mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset
from rationale_cli.models.distributions.subset_tree import NEG
from rationale_cli.models.options import option
from rationale_cli.models.selectors.marginalization.mask_set import MaskSetOptions, MaskSetSelector


@dataclass(frozen=True)
class TopKSparsemaxOptions(MaskSetOptions):
    top_masks: int = option(10, "how many of the best masks sparsemax chooses among", low=1)


class TopKSparsemaxSelector(MaskSetSelector):
    Options = TopKSparsemaxOptions
    summary = ("top-k sparsemax (Correia et al. 2020): sparsemax over the {top_masks} best masks of at "
               "most {budget} tokens, the task loss summed over those with weight; test time takes the "
               "best mask")

    def __init__(self, input_size: int, **options):
        super().__init__(input_size, **options)
        self.top_masks = self.options.top_masks

    def table_bytes(self, length: int) -> int:
        """The K-best program's table, per position, count of tokens so far and rank: 8 bytes an
        entry (measured on 1,600-token documents at a budget of 0.2, over a HardKuma step's)."""
        return 8 * length * self.options.budget.tokens_of(length) * self.top_masks

    def solve(self, states: Tensor, mask: Tensor, coherence: float | None = None) -> tuple[Tensor, Tensor]:
        from entmax import sparsemax  # imported here so the other extractors never need it

        unary, pair = self.mask_scores(states, mask, coherence)
        chain = ChainKSubset(unary, mask, self.budgets(mask), pair, at_most=True)
        masks, best = chain.topk(self.top_masks)
        scores = chain.score(masks).masked_fill(best <= NEG / 2, NEG)
        return sparsemax(scores, dim=-1), masks

    def support_stats(self, weights: Tensor, masks: Tensor, mask: Tensor) -> dict[str, Tensor]:
        support = (weights > 0).sum(-1).float()
        return {"support": support.mean(), "exact": (support < self.top_masks).float().mean()}
