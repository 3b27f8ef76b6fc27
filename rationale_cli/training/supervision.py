"""Rationale supervision (``train --supervise``): a per-token loss between the selection and
a gold rationale, and which training documents' gold it uses.

Lei et al. (2016) trained their selector on the task alone; ERASER (DeYoung et al., 2020)
also reports it trained on the gold rationales, a per-token cross-entropy on the selector's
choices beside the task loss (its supervised rows), and Zhang et al. (2016, "Rationale-Augmented
Convolutional Neural Networks") train sentence-level selection on annotated rationales the same way. Here every
extractor states, in its training :class:`~rationale_cli.models.selection.Selection`, how likely
it made each token (``per_token``, :class:`~rationale_cli.models.selection.PerToken`), and

    supervision = mean over the gold documents' selectable tokens of l(per_token_i, gold_i)

with ``l`` binary cross-entropy for a probability or log-odds and squared error for a gate
(a weight that is no probability, or exactly 0 outside a sparse support, where a logarithm has
no finite value), averaged over the masks of the selection with its weights. Documents without
gold contribute nothing; the trainer adds ``weight * supervision`` to the loss.

Every training document with a gold rationale is supervised, or, with ``--supervise-fraction``,
a share of them drawn with the run's seed (to measure what fewer annotations give); the others'
gold is set aside, so they train as documents without gold do (:func:`supervised_share`).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from rationale_cli.data.records import Record
from rationale_cli.models.selection import GATE, LOGIT, PerToken, Selection
from rationale_cli.runs.flags import flag_of
from rationale_cli.runtime.errors import UserError


def token_losses(per_token: PerToken, gold: Tensor) -> Tensor:
    """The loss of each token, shaped as ``per_token.values`` (``gold`` ``[B, T]`` 0/1 broadcast
    over a sample axis)."""
    values = per_token.values
    target = gold if values.dim() == gold.dim() else gold.unsqueeze(1).expand_as(values)
    if per_token.kind == LOGIT:
        return F.binary_cross_entropy_with_logits(values, target, reduction="none")
    if per_token.kind == GATE:
        return (values - target) ** 2
    return F.binary_cross_entropy(values.clamp(0.0, 1.0), target, reduction="none")


def supervision_loss(selection: Selection, gold: Tensor, golden: Tensor, selectable: Tensor) -> Tensor:
    """The mean per-token loss over the tokens of the documents with gold: ``gold`` ``[B, T]`` the
    gold mask, ``golden`` ``[B]`` 1 for a document with gold, ``selectable`` ``[B, T]`` the
    positions a rationale may hold. 0 for a batch without gold; a ValueError for a selection that
    gives no ``per_token``."""
    if selection.per_token is None:
        raise ValueError("this selection says nothing per token, so it cannot be supervised")
    losses = token_losses(selection.per_token, gold)
    if losses.dim() == 3:  # one row per mask: weighed by the selection's weights
        losses = (selection.weights.unsqueeze(-1) * losses).sum(1)
    counted = selectable * golden.unsqueeze(-1)
    return torch.where(counted > 0, losses, 0.0).sum() / counted.sum().clamp_min(1.0)


def with_gold(records: Sequence[Record]) -> list[int]:
    """The positions of the documents that have a gold rationale."""
    return [i for i, record in enumerate(records) if record.rationale is not None]


def require_gold(records: Sequence[Record]) -> list[int]:
    """:func:`with_gold`, or a :class:`UserError` when no document has gold."""
    golden = with_gold(records)
    if not golden:
        raise UserError(f"{flag_of('supervise')}: none of the {len(records):,} training documents has a gold "
                        "rationale; give training data with rationales (ERASER evidence, 'rationale' spans, an "
                        f"annotation tool's export) or leave {flag_of('supervise')} out")
    return golden


def supervised_share(records: Sequence[Record], fraction: float, seed: int) -> tuple[list[Record], int]:
    """``records`` with the gold of all but a ``fraction`` of the documents that have one set
    aside (at least one kept; the same ones for the same seed and documents), and how many keep
    theirs. A :class:`UserError` when none has gold."""
    golden = require_gold(records)
    kept = set(random.Random(seed).sample(golden, max(1, round(fraction * len(golden)))))
    out = [record if i in kept or record.rationale is None else dataclasses.replace(record, rationale=None,
                                                                                    evidence=None)
           for i, record in enumerate(records)]
    return out, len(kept)
