"""A linear model on the rationale's TF-IDF n-grams (``--predictor-encoder linear``): the
full-text reference's recipe (:mod:`rationale_cli.runs.reference`) reading only the selected
tokens, over the run's word ids. It is fitted in one pass on a fixed selector's rationales
(:mod:`rationale_cli.training.linear_predictor`), not trained by gradients: the predictor of
FRESH's second stage (Jain et al., 2020, section 3) as the linear classifier a user already has.

Features of a row of ids ``[T]`` under a gate ``z [T]`` (the rationale):

- unigram ``w`` (a vocabulary id; padding and ``<unk>`` are no feature) counts ``sum z_t`` over
  its positions; bigram ``(a, b)`` of positions ``t, t+1`` counts ``z_t z_{t+1}`` and is a
  feature only when it was seen in the training rationales (a sorted table of keys
  ``a * V + b``): as in the reference, n-grams never seen in training are dropped, and a
  bigram that crosses the rationale's edge counts nothing;
- a count ``c`` becomes ``1 + log c`` (sublinear term frequency; ``c`` itself below 1, for a
  relaxed gate), times the feature's inverse document frequency, and the row is divided by
  its L2 norm: scikit-learn's ``TfidfVectorizer(sublinear_tf=True)``;
- the output is ``W x + b``: the logits of the classes (a two-class logistic regression's
  one row is the second class's logit, the first's 0), or for a score, whose output the task
  reads through a sigmoid, the logit of the ridge regression's value clipped to [0.001, 0.999].

The tables' sizes follow the fit (the bigrams seen), so loading a run sizes them from its
weights (:meth:`TfidfLinear._load_from_state_dict`). Where the gate carries a gradient (a selector
learning against the fixed model, :func:`rationale_cli.training.linear_predictor.from_reference`),
every word counts, an unselected one with 0, so its gate's gradient says what selecting it would do
(what a straight-through estimator reads); the outputs are the same.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rationale_cli.models.encoders.base import Encoder

FIRST_WORD = 2  # ids below are padding and <unk>, never a feature
CLIP = 1e-3  # a score's prediction is kept in [CLIP, 1 - CLIP] before its logit


def sublinear(counts: Tensor) -> Tensor:
    """``1 + log c`` for ``c >= 1``, ``c`` below (continuous at 1, 0 at 0)."""
    return torch.where(counts >= 1, 1 + torch.log(counts.clamp(min=1)), counts)


class TfidfLinear(Encoder):
    """``summary(ids [B, T], z [B, T]) -> outputs [B, K]``: the fitted linear model of the
    module docstring (a predictor only: it has no states for a selector)."""

    reads_ids = True
    fitted = True  # fitted in one pass, never by gradients

    def __init__(self, vocab_size: int, outputs: int):
        super().__init__()
        self.vocab_size, self.output_size = vocab_size, outputs
        self.register_buffer("bigrams", torch.zeros(0, dtype=torch.long))  # sorted keys a * V + b
        self.register_buffer("idf", torch.ones(vocab_size))  # [V + M]
        self.register_buffer("weight", torch.zeros(outputs, vocab_size))  # [K, V + M]
        self.register_buffer("bias", torch.zeros(outputs))

    @property
    def features(self) -> int:
        return self.vocab_size + self.bigrams.numel()

    def counts(self, ids: Tensor, gate: Tensor, bigrams: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """The rows ``[N]``, features ``[N]`` and counts ``[N]`` of every feature present in each
        row of ``ids`` under ``gate``, sorted by row, then feature (``bigrams``: a sorted key table
        in place of the fitted one)."""
        bigrams = self.bigrams if bigrams is None else bigrams
        ids, gate = ids.long(), gate.float()
        rows = torch.arange(ids.shape[0], device=ids.device).unsqueeze(1)
        words = ids >= FIRST_WORD
        if not gate.requires_grad:  # with a gradient, an unselected word is a count of 0 whose gate has one
            words &= gate > 0
        parts = [(rows.expand_as(ids)[words], ids[words], gate[words])]
        if bigrams.numel() and ids.shape[1] > 1:
            pairs = words[:, :-1] & words[:, 1:]
            keys = ids[:, :-1][pairs] * self.vocab_size + ids[:, 1:][pairs]
            where = torch.searchsorted(bigrams, keys).clamp(max=bigrams.numel() - 1)
            seen = bigrams[where] == keys
            parts.append((rows.expand(-1, ids.shape[1] - 1)[pairs][seen], self.vocab_size + where[seen],
                          (gate[:, :-1] * gate[:, 1:])[pairs][seen]))
        row, feature, weight = (torch.cat(p) for p in zip(*parts))
        cells, inverse = torch.unique(row * (self.vocab_size + bigrams.numel()) + feature, return_inverse=True)
        counts = torch.zeros(cells.numel(), device=ids.device).index_add_(0, inverse, weight)
        width = self.vocab_size + bigrams.numel()
        return cells // width, cells % width, counts

    def summary(self, ids: Tensor, gate: Tensor, *_, **__) -> Tensor:
        """The outputs ``[B, K]`` (see the module docstring)."""
        rows, features, counts = self.counts(ids, gate)
        values = sublinear(counts) * self.idf[features]
        squares = torch.zeros(ids.shape[0], device=ids.device).index_add_(0, rows, values * values)
        values = values / squares.clamp(min=1e-24).sqrt()[rows]  # an empty row: 0 / 1e-12, no NaN gradient
        decision = torch.zeros(ids.shape[0], self.output_size, device=ids.device)
        decision.index_add_(0, rows, values.unsqueeze(1) * self.weight.t()[features]).add_(self.bias)
        if self.output_size == 1:  # a score: the task reads sigmoid(output)
            return torch.logit(decision.clamp(CLIP, 1 - CLIP))
        return decision

    def forward(self, ids: Tensor, gate: Tensor) -> tuple[Tensor, Tensor]:
        raise ValueError("the linear predictor has no states for a selector: it reads the rationale only")

    def fill(self, bigrams: Tensor, idf: Tensor, weight: Tensor, bias: Tensor) -> None:
        """The fitted model: the bigram keys (sorted), idf ``[V + M]``, weights ``[K, V + M]``, bias ``[K]``."""
        device = self.idf.device
        self.bigrams, self.idf = bigrams.to(device, torch.long), idf.to(device, torch.float32)
        self.weight, self.bias = weight.to(device, torch.float32), bias.to(device, torch.float32)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Sized by the saved tables (the bigrams seen in its fit), then loaded."""
        names = ("bigrams", "idf", "weight", "bias")
        if all(prefix + name in state_dict for name in names):
            self.fill(*(torch.empty_like(state_dict[prefix + name]) for name in names))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self) -> str:
        return f"{self.vocab_size}, {self.output_size}, bigrams={self.bigrams.numel()}"
