"""Sparse marginalization over whole masks (Correia et al., 2020, section 4): the
shared part of ``sparsemap`` and ``topk-sparsemax``.

Token scores come from a linear layer; with ``pairwise``, a coherence factor adds a
learned score ``w_i`` (a linear layer over ``[h_i; h_{i+1}]``) for each pair of
adjacent selected tokens, so a mask scores ``<t, z> + sum_i w_i z_i z_{i+1}``.
``coherence`` subtracts a fixed ``lambda`` per 0/1 transition between adjacent
tokens from every mask's score, Lei et al.'s coherence cost inside the score: since
``|z_i - z_{i+1}| = z_i + z_{i+1} - 2 z_i z_{i+1}``, each token's score drops by
lambda per neighbour and each adjacent pair gains ``2 lambda``.

Every mask holds at most ``budget`` tokens of its document (a cap: a share or a
count, :mod:`rationale_cli.models.budget`); a subclass's :meth:`MaskSetSelector.solve` returns
weights ``[B, S]`` over masks ``[B, S, T]``.
Training sums the task loss over the masks with their weights and reports the
support size; test time takes the most probable mask, and the token scores are
the marginals ``sum_z xi_z z``, which rationale supervision (the Selection's ``per_token``)
takes too, by squared error: they are exactly 0 or 1 wherever the support agrees.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rationale_cli.models.budget import Budget, BudgetUse
from rationale_cli.models.options import Options, option
from rationale_cli.models.search import OneOf
from rationale_cli.models.selection import GATE, PerToken, Selection, Selector


@dataclass(frozen=True)
class MaskSetOptions(Options):
    budget: Budget = option(Budget(0.13), "at most this many tokens in every mask of the support", role="cap",
                            use=BudgetUse.CAP)
    pairwise: bool = option(False, "a learned coherence score for adjacent selected tokens")
    coherence: float | None = option(None, "cost per 0/1 transition between adjacent tokens, subtracted "
                                     "from every mask's score (fewer, longer spans)", low=0.0, default_text="0")

    # the search (rationale_cli.models.search): no paper gives one; with or without the learned pairwise score.
    # The transition cost is not searched: with a cap and no rate held, validation loss would
    # prefer the cost that selects the most tokens
    search_space = (OneOf("pairwise", (False, True)),)


class MaskSetSelector(Selector):
    Options = MaskSetOptions
    decode_settings = ("coherence",)  # decode with another transition cost than the trained one
    supervised_by = "the marginals (each mask times its weight, summed over the support), squared error"

    def __init__(self, input_size: int, **options):
        super().__init__(**options)
        self.score = nn.Linear(input_size, 1)
        # start with positive scores: a support of only the empty mask gives no gradient, and
        # from scores near 0 a demo run collapsed there for two seeds of three
        nn.init.constant_(self.score.bias, 0.5)
        self.pair = nn.Linear(2 * input_size, 1) if self.options.pairwise else None
        if self.pair is not None:  # start without coherence scores
            nn.init.zeros_(self.pair.weight)
            nn.init.zeros_(self.pair.bias)

    def mask_scores(self, states: Tensor, mask: Tensor, coherence: float | None = None) -> tuple[Tensor, Tensor | None]:
        """A mask's score as token scores ``[B, T]`` and adjacent-pair scores ``[B, T-1]`` (None
        when it has none): the learned ones, with the transition cost folded in (``coherence``,
        else the trained one)."""
        unary = self.score(states).squeeze(-1)
        pair = None if self.pair is None else self.pair(torch.cat([states[:, :-1], states[:, 1:]], -1)).squeeze(-1)
        cost = self.options.coherence if coherence is None else coherence
        if cost:
            links = mask[:, 1:] * mask[:, :-1]  # adjacent real tokens
            unary = unary - cost * (F.pad(links, (1, 0)) + F.pad(links, (0, 1)))
            pair = 2 * cost * links if pair is None else pair + 2 * cost * links
        return unary, pair

    def solve(self, states: Tensor, mask: Tensor, coherence: float | None = None) -> tuple[Tensor, Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def budgets(self, mask: Tensor) -> Tensor:
        return self.options.budget.tokens(mask).long()

    def support_stats(self, weights: Tensor, masks: Tensor, mask: Tensor) -> dict[str, Tensor]:
        return {"support": (weights > 0).sum(-1).float().mean()}

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        weights, masks = self.solve(states, mask)
        stats = {k: v.detach() for k, v in self.support_stats(weights, masks, mask).items()}
        marginals = PerToken((weights.unsqueeze(-1) * masks).sum(1) * mask, GATE)
        return Selection(masks=masks, weights=weights, penalty=weights.new_zeros(()), stats=stats, per_token=marginals)

    def decode_with_scores(self, states: Tensor, mask: Tensor, coherence: float | None = None) -> tuple[Tensor, Tensor]:
        weights, masks = self.solve(states, mask, coherence)
        best = masks.gather(1, weights.argmax(-1)[:, None, None].expand(-1, 1, masks.shape[-1]))[:, 0]
        return best * mask, (weights.unsqueeze(-1) * masks).sum(1) * mask
