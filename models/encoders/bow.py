"""A bag of n-grams over the rationale (``bow``): fastText-like (Joulin et al., 2017), with
its own vectors over word ids, strong on long documents where word order matters little.

The encoder reads word ids ``[B, T]`` in place of embeddings (``reads_ids``, as the transformer
does) and a gate ``z [B, T]`` (the padding mask for the selector, the rationale for the
predictor). Its parameters are a unigram table ``U [V, H]`` over the run's vocabulary and a
table of hashed bigram buckets ``G [N, H]`` (``H`` is ``--hidden-size``):

- the bigram of positions ``t, t+1`` is bucket ``(a * 2654435761 + b) mod N`` of its word ids
  ``a, b`` and weighs ``z_t z_{t+1}``: it counts only when both tokens are selected (a hard
  mask), and for a relaxed mask by the product of its gates, so a bigram that crosses the
  rationale's edge contributes nothing;
- the summary ``[B, H]`` is the gated mean of the unigram and bigram vectors,
  ``(sum_t z_t U[w_t] + sum_t z_t z_{t+1} G[h_t]) / max(1, sum_t z_t + sum_t z_t z_{t+1})``: a
  sum normalised by the selected count (zero for an empty rationale). An unselected token
  changes nothing; the gates' gradient is that of plain autograd ops (``embedding_bag`` with
  per-sample weights at inference and without dropout, gathered rows otherwise);
- the states ``[B, T, H]`` are cheap contextual states, so ``bow`` may be the selector's
  encoder too: a token's unigram vector and the vectors of the two bigrams it is part of,
  ``z_t U[w_t] + z_{t-1} z_t G[h_{t-1}] + z_t z_{t+1} G[h_t]`` (zero where ``z_t = 0``). A
  selector over them scores each token from its word and its neighbours (the dependent
  HardKuma selector adds its own recurrence over the scores);
- dropout (``--dropout``) is input dropout as the other encoders have it: on the gathered
  unigram and bigram rows, in training.

Sizes: ``U`` has one row per vocabulary word; the bucket count ``N`` is the power of two at
least four times the vocabulary (at least 1,024), capped so that ``G`` holds at most
:data:`BUCKET_NUMBERS` numbers (``2^23``: 32 MB in float32; 32,768 buckets at ``H = 200``).
Both follow from the vocabulary size and ``H``, so a run reloads from its configuration.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rationale_cli.models.encoders.base import Encoder
from rationale_cli.models.native.dropout import Dropout

BUCKET_NUMBERS = 1 << 23  # at most this many numbers in the bigram table
FEWEST_BUCKETS = 1 << 10
MULTIPLIER = 2654435761  # Knuth's multiplicative hash constant (odd): a bijection mod 2^k


def bucket_count(vocab_size: int, hidden_size: int) -> int:
    """The bigram buckets for a vocabulary of ``vocab_size`` words and vectors of ``hidden_size``."""
    wanted = max(FEWEST_BUCKETS, 1 << max(0, 4 * vocab_size - 1).bit_length())
    cap = 1 << max(0, (BUCKET_NUMBERS // hidden_size).bit_length() - 1)
    return max(1, min(wanted, cap))


def bigram_buckets(ids: Tensor, buckets: int) -> Tensor:
    """The bucket ``[B, T-1]`` of each bigram of ``ids [B, T]``."""
    ids = ids.long()
    return (ids[:, :-1] * MULTIPLIER + ids[:, 1:]) % buckets


class BagEncoder(Encoder):
    """``encoder(ids [B, T], z [B, T]) -> (states [B, T, H], summary [B, H])``: the gated bag of
    unigrams and hashed bigrams of the module docstring."""

    reads_ids = True

    def __init__(self, vocab_size: int, hidden_size: int, *, dropout: float = 0.0, buckets: int | None = None):
        super().__init__()
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.buckets = bucket_count(vocab_size, hidden_size) if buckets is None else buckets
        self.output_size = hidden_size
        self.unigrams = nn.Embedding(vocab_size, hidden_size)
        self.bigrams = nn.Embedding(self.buckets, hidden_size)
        nn.init.normal_(self.unigrams.weight, std=hidden_size ** -0.5)
        nn.init.normal_(self.bigrams.weight, std=hidden_size ** -0.5)
        self.dropout = Dropout(dropout)

    def weights(self, ids: Tensor, gate: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The bigram buckets ``[B, T-1]``, their weights ``z_t z_{t+1}`` and the gate in the tables' dtype."""
        gate = gate.to(self.unigrams.weight.dtype)
        return bigram_buckets(ids, self.buckets), gate[:, :-1] * gate[:, 1:], gate

    def dropped(self) -> bool:
        return self.training and self.dropout.p > 0

    def summary(self, ids: Tensor, gate: Tensor, *_, **__) -> Tensor:
        """The gated mean ``[B, H]`` of the unigram and bigram vectors (no states formed)."""
        B, T = ids.shape
        if T == 0:
            return self.unigrams.weight.new_zeros(B, self.output_size)
        buckets, pairs, gate = self.weights(ids, gate)
        if self.dropped():  # input dropout on the gathered rows
            words = (self.dropout(self.unigrams(ids)) * gate.unsqueeze(-1)).sum(1)
            bigrams = (self.dropout(self.bigrams(buckets)) * pairs.unsqueeze(-1)).sum(1)
        else:
            words = F.embedding_bag(ids, self.unigrams.weight, per_sample_weights=gate, mode="sum")
            bigrams = (F.embedding_bag(buckets, self.bigrams.weight, per_sample_weights=pairs, mode="sum")
                       if T > 1 else torch.zeros_like(words))
        count = gate.sum(1) + pairs.sum(1)
        return (words + bigrams) / count.clamp(min=1.0).unsqueeze(-1)

    def forward(self, ids: Tensor, gate: Tensor) -> tuple[Tensor, Tensor]:
        B, T = ids.shape
        if T == 0:
            empty = self.unigrams.weight.new_zeros(B, 0, self.output_size)
            return empty, self.summary(ids, gate)
        buckets, pairs, weights = self.weights(ids, gate)
        words = self.dropout(self.unigrams(ids)) * weights.unsqueeze(-1)  # [B, T, H]
        bigrams = self.dropout(self.bigrams(buckets)) * pairs.unsqueeze(-1)  # [B, T-1, H]
        states = words + F.pad(bigrams, (0, 0, 1, 0)) + F.pad(bigrams, (0, 0, 0, 1))
        count = weights.sum(1) + pairs.sum(1)
        summary = (words.sum(1) + bigrams.sum(1)) / count.clamp(min=1.0).unsqueeze(-1)
        return states, summary

    def extra_repr(self) -> str:
        return f"{self.vocab_size}, {self.hidden_size}, buckets={self.buckets}"
