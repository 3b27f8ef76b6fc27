"""Coherent decoding: a decoded rationale's tokens placed in runs, for any extractor.

Lei et al. (2016, section 3) make rationales contiguous with a cost per 0/1 transition
between adjacent tokens, ``lambda * sum_i |z_i - z_{i-1}|``. At test time, for an extractor
whose decoding has no such cost inside its scores (all but the mask-set ones,
:mod:`rationale_cli.models.selectors.marginalization.mask_set`), :func:`in_runs` keeps the number of tokens its decoding
chose per document and places them where

    sum_i z_i s_i - lambda * transitions(z)

is highest, ``s`` the extractor's per-token scores in [0, 1] and the document bounded by
unselected tokens. With the count fixed at k, ``transitions = 2 (k - pairs)``, ``pairs`` the
adjacent selected pairs, so the best mask is the argmax of a chain k-subset distribution
with a pairwise score ``2 lambda`` (:class:`rationale_cli.models.distributions.chain_ksubset.ChainKSubset`,
an exact dynamic program). ``lambda = 0`` keeps the k best-scored tokens; larger costs give
fewer, longer runs. Documents longer than ``BLOCK`` tokens are placed block by block, each
block keeping its own count (a run is never carried across a block's edge), so time and
memory stay linear in the length.

:func:`in_sentences` places the same count in whole sentences instead: the sentences ranked by
their tokens' mean score, the fewest best-ranked sentences that hold at least the count. Where
the gold evidence is sentences or clauses (ERASER movies), whole sentences match it as spans
even when the scores' best tokens are scattered over them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rationale_cli.models.distributions.chain_ksubset import ChainKSubset

BLOCK = 1024  # tokens placed by one program at most
CELLS = 1 << 24  # program states (positions x counts x rows) per call at most


def in_runs(z: Tensor, scores: Tensor, mask: Tensor, cost: float) -> Tensor:
    """The 0/1 mask ``[B, T]`` with as many ones as ``z > 0`` has per document (per block of
    ``BLOCK`` tokens) that maximizes the scores kept minus ``cost`` per transition."""
    batch, length = z.shape
    if length == 0 or batch == 0:
        return (z > 0).to(scores.dtype)
    width = min(length, BLOCK)
    padded = -length % width

    def blocks(x: Tensor) -> Tensor:
        return F.pad(x, (0, padded)).reshape(-1, width)

    chosen, values, real = blocks(((z > 0) & (mask > 0)).to(scores.dtype)), blocks(scores), blocks(mask)
    counts = chosen.sum(-1).long()
    out = torch.zeros_like(values)
    order = counts.argsort()  # rows of similar counts together: no call's program wider than needed
    ranked = counts[order].tolist()
    start = 0
    while start < len(ranked):
        end = start + 1  # as many rows as fit, the last (largest) count bounding the program
        while end < len(ranked) and (end + 1 - start) * (width + 1) * (ranked[end] + 2) * 2 <= CELLS:
            end += 1
        rows = order[start:end]
        pairwise = values.new_full((len(rows), width - 1), 2.0 * cost) if cost > 0 and width > 1 else None
        out[rows] = ChainKSubset(values[rows], real[rows], counts[rows], pairwise).argmax
        start = end
    return out.reshape(batch, -1)[:, :length] * mask


def in_sentences(z: Tensor, scores: Tensor, mask: Tensor, sentences: Tensor) -> Tensor:
    """The 0/1 mask ``[B, T]`` of whole sentences: per document, its sentences (``sentences``
    ``[B, T]``, each position's sentence index, 0-based) ranked by the mean score of their
    tokens (ties: the earlier first), the fewest best-ranked ones that hold at least as many
    tokens as ``z > 0`` has. A document whose ``z`` is empty stays empty."""
    real = mask > 0
    if z.numel() == 0:
        return (z > 0).to(scores.dtype)
    index = torch.where(real, sentences, torch.zeros_like(sentences))
    count = int(index.max()) + 1
    sizes = scores.new_zeros(z.shape[0], count).scatter_add_(1, index, real.to(scores.dtype))
    totals = scores.new_zeros(z.shape[0], count).scatter_add_(1, index, scores * real)
    means = torch.where(sizes > 0, totals / sizes.clamp(min=1), torch.full_like(totals, -float("inf")))
    order = means.argsort(dim=-1, descending=True, stable=True)
    ranked = sizes.gather(1, order)
    wanted = ((z > 0) & real).sum(-1, keepdim=True).to(scores.dtype)
    taken = ((ranked.cumsum(-1) - ranked) < wanted) & (ranked > 0)
    chosen = torch.zeros_like(taken).scatter_(1, order, taken)
    return chosen.gather(1, index).to(scores.dtype) * mask
