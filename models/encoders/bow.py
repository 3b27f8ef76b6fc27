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
- the summary ``[B, H]`` is the TF-IDF-weighted sum of the unigram and bigram vectors, the
  features of the full-text reference (:mod:`rationale_cli.runs.reference`) read through
  learned vectors: a feature ``f`` (a word, or a bigram's bucket) of gated count
  ``c_f = sum of its occurrences' gates`` has the value ``v_f = tf(c_f) idf_f``, with the
  sublinear ``tf(c) = 1 + log c`` for ``c >= 1`` (``c`` below, so a relaxed gate's feature fades
  smoothly to 0), and ``summary = sum_f v_f [U|G]_f / ||v||_2`` (zero for an empty rationale).
  Each occurrence carries ``z_t / c_f`` of its feature. ``idf_f = log((1 + N) / (1 + df_f)) + 1``
  over the N training documents (:meth:`BagEncoder.fill_idf`, called before training; 1 until
  then), buffers saved with the weights. On ERASER movies this weighting is what a linear model
  on the rationale needs (benchmarks/RESULTS.md: 91% test accuracy against 79% for the
  count-normalised mean); a run saved before the buffers existed keeps the gated mean
  ``(sum_t z_t U[w_t] + sum_t z_t z_{t+1} G[h_t]) / max(1, sum_t z_t + sum_t z_t z_{t+1})`` it
  was trained with. An unselected token changes nothing; the gates' gradient is that of plain
  autograd ops (``embedding_bag`` with per-sample weights at inference and without dropout,
  gathered rows otherwise);
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

from typing import Iterable, Sequence

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
        self.register_buffer("unigram_idf", torch.ones(vocab_size))
        self.register_buffer("bigram_idf", torch.ones(self.buckets))
        self.tfidf = True  # False: a run saved before the idf buffers, summarised by the gated mean
        self.dropout = Dropout(dropout)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if prefix + "unigram_idf" not in state_dict and prefix + "unigrams.weight" in state_dict:
            self.tfidf = False  # saved before the TF-IDF summary: it keeps the mean it was trained with
            state_dict[prefix + "unigram_idf"], state_dict[prefix + "bigram_idf"] = self.unigram_idf, self.bigram_idf
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @torch.no_grad()
    def fill_idf(self, documents: Iterable[Sequence[int]]) -> None:
        """Each unigram's and bigram bucket's smoothed inverse document frequency over
        ``documents`` (word ids), ``log((1 + N) / (1 + df)) + 1`` as scikit-learn computes it."""
        words, pairs, count = torch.zeros_like(self.unigram_idf), torch.zeros_like(self.bigram_idf), 0
        for ids in documents:
            ids = torch.as_tensor(ids, dtype=torch.long, device=words.device).unsqueeze(0)
            words[ids.unique()] += 1
            pairs[bigram_buckets(ids, self.buckets).unique()] += 1
            count += 1
        self.unigram_idf.copy_(torch.log((1 + count) / (1 + words)) + 1)
        self.bigram_idf.copy_(torch.log((1 + count) / (1 + pairs)) + 1)

    def weights(self, ids: Tensor, gate: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The bigram buckets ``[B, T-1]``, their weights ``z_t z_{t+1}`` and the gate in the tables' dtype."""
        gate = gate.to(self.unigrams.weight.dtype)
        return bigram_buckets(ids, self.buckets), gate[:, :-1] * gate[:, 1:], gate

    def dropped(self) -> bool:
        return self.training and self.dropout.p > 0

    def shares(self, ids: Tensor, gate: Tensor, idf: Tensor) -> tuple[Tensor, Tensor]:
        """Each occurrence's weight ``z_t v_f / c_f`` in the summary and its part ``z_t v_f^2 / c_f``
        of the squared norm, for features ``ids [B, L]`` gated by ``gate [B, L]`` (module docstring)."""
        counts = gate.new_zeros(ids.shape[0], idf.numel()).scatter_add_(1, ids, gate).gather(1, ids)
        tf = torch.where(counts >= 1, 1 + counts.clamp_min(1.0).log(), counts)
        value = tf * idf[ids]
        share = gate / counts.clamp_min(torch.finfo(gate.dtype).tiny)
        return share * value, share * value * value

    def bag_weights(self, ids: Tensor, gate: Tensor, buckets: Tensor, pairs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The weights of the unigram rows ``[B, T]`` and bigram rows ``[B, T-1]`` in the summary and
        what their sum is divided by ``[B]``: TF-IDF over the L2 norm, or gate over the count."""
        if not self.tfidf:
            return gate, pairs, (gate.sum(1) + pairs.sum(1)).clamp(min=1.0)
        word_weights, word_squares = self.shares(ids, gate, self.unigram_idf.to(gate.dtype))
        if pairs.shape[1] == 0:
            return word_weights, pairs, word_squares.sum(1).sqrt().clamp_min(1e-12)
        pair_weights, pair_squares = self.shares(buckets, pairs, self.bigram_idf.to(gate.dtype))
        norm = (word_squares.sum(1) + pair_squares.sum(1)).sqrt().clamp_min(1e-12)
        return word_weights, pair_weights, norm

    def summary(self, ids: Tensor, gate: Tensor, *_, **__) -> Tensor:
        """The gated mean ``[B, H]`` of the unigram and bigram vectors (no states formed)."""
        B, T = ids.shape
        if T == 0:
            return self.unigrams.weight.new_zeros(B, self.output_size)
        buckets, pairs, gate = self.weights(ids, gate)
        word_weights, pair_weights, norm = self.bag_weights(ids, gate, buckets, pairs)
        if self.dropped():  # input dropout on the gathered rows
            words = (self.dropout(self.unigrams(ids)) * word_weights.unsqueeze(-1)).sum(1)
            bigrams = (self.dropout(self.bigrams(buckets)) * pair_weights.unsqueeze(-1)).sum(1)
        else:
            words = F.embedding_bag(ids, self.unigrams.weight, per_sample_weights=word_weights, mode="sum")
            bigrams = (F.embedding_bag(buckets, self.bigrams.weight, per_sample_weights=pair_weights, mode="sum")
                       if T > 1 else torch.zeros_like(words))
        return (words + bigrams) / norm.unsqueeze(-1)

    def forward(self, ids: Tensor, gate: Tensor) -> tuple[Tensor, Tensor]:
        B, T = ids.shape
        if T == 0:
            empty = self.unigrams.weight.new_zeros(B, 0, self.output_size)
            return empty, self.summary(ids, gate)
        buckets, pairs, weights = self.weights(ids, gate)
        word_rows, pair_rows = self.dropout(self.unigrams(ids)), self.dropout(self.bigrams(buckets))
        words, bigrams = word_rows * weights.unsqueeze(-1), pair_rows * pairs.unsqueeze(-1)  # [B, T(-1), H]
        states = words + F.pad(bigrams, (0, 0, 1, 0)) + F.pad(bigrams, (0, 0, 0, 1))
        word_weights, pair_weights, norm = self.bag_weights(ids, weights, buckets, pairs)
        summary = ((word_rows * word_weights.unsqueeze(-1)).sum(1)
                   + (pair_rows * pair_weights.unsqueeze(-1)).sum(1)) / norm.unsqueeze(-1)
        return states, summary

    def extra_repr(self) -> str:
        return f"{self.vocab_size}, {self.hidden_size}, buckets={self.buckets}"
