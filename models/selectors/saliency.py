"""A full-text model's saliency as a fixed selector (FRESH: Jain et al., 2020, section 3: a
support model's feature importance picks the rationale, and a new predictor learns from that
selection alone, so its prediction can only come from the rationale).

The selector holds one saliency per vocabulary word, a table filled from the full-text model;
for ``train --support reference`` the run's full-text reference (:mod:`rationale_cli.runs.reference`):
the absolute weight times inverse document frequency of the word's unigram feature, the word's
part of the linear decision per occurrence up to the document's normalisation. A token's score
is its word's saliency times its occurrence's share of the word's sublinear term frequency,
``(1 + log n) / n`` for a word seen ``n`` times in the document (the reference's features count a
word so: FRESH's per-document importance, section 3, of a linear model's unigrams; a word
repeated weighs less per occurrence), averaged over a window of ``window`` tokens (wider windows
keep phrases rather than single words), and a document keeps its ``budget`` best tokens (a share
or a count). Counts are of word ids, so out-of-vocabulary words count together (their saliency is 0).
Nothing in it learns: training a run only fits the predictor reading its rationales.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from rationale_cli.models.budget import Budget, BudgetUse, top_k_mask
from rationale_cli.models.options import Options, option
from rationale_cli.models.selection import Selection, Selector


@dataclass(frozen=True)
class SaliencyOptions(Options):
    budget: Budget = option(Budget(0.3), "the rationale: the tokens of highest saliency, in training and at test",
                            role="exact size", use=BudgetUse.EXACT)
    window: int = option(1, "average each token's saliency over this many tokens around it (1: the token alone)",
                         low=1, high=101)


class SaliencySelector(Selector):
    """The ``budget`` tokens of highest (windowed) saliency; the table is read by word id."""

    Options = SaliencyOptions
    needs_states = False
    reads_ids = True
    summary = ("a full-text model's saliency, fixed (FRESH; train --support reference): "
               "the {budget} tokens its words weigh most")

    def __init__(self, vocab_size: int, **options):
        super().__init__(**options)
        self.register_buffer("table", torch.zeros(vocab_size))

    def scores(self, ids: Tensor, mask: Tensor) -> Tensor:
        """Each token's saliency per occurrence, averaged over the window (padding counts as 0),
        ``[B, T]``; the scores shown beside a rationale are these over the document's highest."""
        counts = mask.new_zeros(ids.shape[0], self.table.numel()).scatter_add_(1, ids, mask)
        seen = counts.gather(1, ids).clamp_min(1.0)  # each token's word's count in its document
        scores = self.table[ids] * (1 + seen.log()) / seen * mask
        width = self.options.window
        if width > 1:
            kernel = torch.full((1, 1, width), 1.0 / width, dtype=scores.dtype, device=scores.device)
            scores = F.conv1d(scores.unsqueeze(1), kernel, padding=width // 2).squeeze(1)[:, :mask.shape[1]]
        return scores * mask

    def forward(self, ids: Tensor, mask: Tensor) -> Selection:
        return Selection.single(self.decode(ids, mask))

    def decode_with_scores(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        scores = self.scores(ids, mask)
        z = top_k_mask(scores, mask, self.options.budget.tokens(mask))
        return z, scores / scores.amax(-1, keepdim=True).clamp_min(1e-12)
