"""The attention baseline of Lei et al. (2016), as reported in Bastings et al. (2019, Table 2).

An attention layer scores every token, ``s_i = v . tanh(W h_i)`` over the
selector encoder's states, and ``alpha = softmax(s)`` over non-pad tokens.
In training the predictor reads the text gated softly by ``alpha / max(alpha)``
(a gate in [0, 1]: the best token passes whole, the others in proportion).
At test time the rationale is the ``budget`` best tokens of each document by
attention weight (a share or a count, :mod:`rationale_cli.models.budget`; at least one), and the
predictor reads only those: the heuristic the papers compare against. Rationale supervision
(the Selection's ``per_token``) pulls the training gate toward the gold mask (squared
error: the gate is no probability).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rationale_cli.models.budget import Budget, BudgetUse, top_k_mask
from rationale_cli.models.options import Options, option
from rationale_cli.models.selection import GATE, PerToken, Selection, Selector


def top_budget(scores: Tensor, mask: Tensor, budget: Budget) -> Tensor:
    """0/1 mask of the ``budget`` best tokens per row (:meth:`Budget.tokens`).

    Ties are broken by position (earlier first) so decoding is deterministic.
    """
    return top_k_mask(scores, mask, budget.tokens(mask))


def as_gate(alpha: Tensor) -> Tensor:
    """Attention weights scaled so that the best token of each row passes whole."""
    return alpha / alpha.amax(-1, keepdim=True).clamp_min(1e-12)


@dataclass(frozen=True)
class AttentionOptions(Options):
    budget: Budget = option(Budget(0.13), "the rationale at test time: the best tokens by attention weight",
                            role="test-time size", use=BudgetUse.TEST_TIME)


class AttentionSelector(Selector):
    """Soft attention in training, the ``budget`` best tokens at test time."""

    Options = AttentionOptions
    summary = ("Lei et al.'s attention baseline: trained with soft attention gating, "
               "the {budget} best tokens by attention weight at test time")
    supervised_by = "the gate alpha / max(alpha) the predictor reads, squared error"

    def __init__(self, input_size: int, *, attention_size: int = 100, **options):
        super().__init__(**options)
        self.project = nn.Linear(input_size, attention_size)
        self.score = nn.Linear(attention_size, 1, bias=False)

    def attention(self, states: Tensor, mask: Tensor) -> Tensor:
        logits = self.score(torch.tanh(self.project(states))).squeeze(-1)
        return self.normalize(logits, mask)

    def normalize(self, logits: Tensor, mask: Tensor) -> Tensor:
        """Attention weights over non-pad tokens (softmax here)."""
        alpha = torch.softmax(logits.masked_fill(mask <= 0, float("-inf")), dim=-1)
        return torch.nan_to_num(alpha) * mask

    def gate(self, states: Tensor, mask: Tensor) -> Tensor:
        return as_gate(self.attention(states, mask))

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        gate = self.gate(states, mask)
        return Selection.single(gate, per_token=PerToken(gate, GATE))

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        alpha = self.attention(states, mask)
        return top_budget(alpha, mask, self.options.budget), as_gate(alpha)
