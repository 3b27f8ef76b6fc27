"""Fitting ``--predictor-encoder linear`` (:mod:`rationale_cli.models.encoders.tfidf`): the
second stage of FRESH (Jain et al., 2020, section 3) with the full-text reference's recipe
(:mod:`rationale_cli.runs.reference`) as the classifier that reads the rationales.

The fixed selector (``--support``) decodes every training and validation document once; the
linear model is fitted on the training rationales for each n-gram range and regularisation
strength of the reference's grid (logistic regression for classes, ridge for scores;
scikit-learn's), once on the rationales alone and once on the rationales and the full training
texts beside them (more data of the same labels: the predictor still reads only the rationale),
and the one best on the validation rationales (the task metric; the first of equals: the
rationales alone, the shorter n-grams and the stronger penalty) is kept. Bigrams are those inside
the training rationales either way. The whole fit is the run's one "epoch": its line and
``metrics.json`` read as any run's.

Without a support the linear predictor is the full-text reference itself, fixed
(:func:`from_reference`), and a selector is trained by gradients to choose what it reads: the
TF-IDF features are differentiable in a relaxed gate.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from rationale_cli.data.records import Record
from rationale_cli.data.vocab import Vocab
from rationale_cli.models.architectures import LINEAR
from rationale_cli.models.encoders.tfidf import FIRST_WORD, TfidfLinear, sublinear
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.inference import decoded_batches, evaluate
from rationale_cli.runs.reference import NGRAMS, PARAMETER, STRENGTHS, Reference, better, main_metric, setting_name
from rationale_cli.runs.task import Classification, Task
from rationale_cli.runtime.errors import UserError
from rationale_cli.training.loop import Callback, Epoch, Fit, FitState

WITH_FULL_TEXTS = "the rationales and the full texts"
TEXTS = ("the rationales", WITH_FULL_TEXTS)  # what the fit reads, in the order tried


@dataclass
class Rationales:
    """Decoded documents: each batch's ids ``[B, T]`` and the gate the predictor reads (the
    rationale and any query), on the CPU, with the documents' targets and how many of their
    selectable tokens were chosen; ``whole``: each batch's gate over the full text."""

    batches: list[tuple[Tensor, Tensor]]
    targets: Tensor
    selected: float
    selectable: float
    whole: list[Tensor]

    def full_texts(self) -> Rationales:
        """The same documents, each read whole."""
        batches = [(ids, gate) for (ids, _), gate in zip(self.batches, self.whole)]
        return Rationales(batches, self.targets, self.selectable, self.selectable, self.whole)


def decoded(model: RationaleModel, vocab: Vocab, task: Task, records: Sequence[Record], batch_size: int,
            device: torch.device) -> Rationales:
    """The fixed selector's rationales of ``records`` (its own decoding, as at test time)."""
    batches, targets, selected, selectable, whole = [], [], 0.0, 0.0, []
    for _, batch, z, _, _ in decoded_batches(model, vocab, records, batch_size, device, task):
        read = z if batch.visible is None else z + batch.visible
        batches.append((batch.ids.cpu(), (read * batch.mask).cpu()))
        whole.append(batch.mask.cpu())
        targets.append(batch.targets.cpu())
        selected += float(z.sum())
        selectable += float(batch.selectable.sum())
    return Rationales(batches, torch.cat(targets), selected, selectable, whole)


def bigram_table(rationales: Rationales, vocab_size: int) -> Tensor:
    """The sorted keys ``a * V + b`` of every bigram inside the rationales."""
    keys = []
    for ids, gate in rationales.batches:
        pairs = (ids[:, :-1] >= FIRST_WORD) & (ids[:, 1:] >= FIRST_WORD) & (gate[:, :-1] > 0) & (gate[:, 1:] > 0)
        keys.append(ids[:, :-1][pairs] * vocab_size + ids[:, 1:][pairs])
    return torch.unique(torch.cat(keys)) if keys else torch.zeros(0, dtype=torch.long)


def count_matrix(encoder: TfidfLinear, rationales: Rationales, bigrams: Tensor):
    """The documents' sublinear term frequencies, sparse ``[N, V + M]`` (scipy CSR)."""
    from scipy.sparse import csr_matrix

    rows, features, values, start = [], [], [], 0
    for ids, gate in rationales.batches:
        row, feature, count = encoder.counts(ids, gate, bigrams)
        rows.append(row + start)
        features.append(feature)
        values.append(sublinear(count))
        start += ids.shape[0]
    width = encoder.vocab_size + bigrams.numel()
    return csr_matrix((torch.cat(values).numpy(), (torch.cat(rows).numpy(), torch.cat(features).numpy())),
                      shape=(start, width), dtype=np.float64)


def fitted_rows(model, task: Task) -> tuple[np.ndarray, np.ndarray]:
    """A scikit-learn model's weights ``[K, F]`` and bias ``[K]`` as the encoder's (:func:`class_rows`;
    its classes are the task's indices; a regressor has none)."""
    return class_rows(model.coef_, model.intercept_, getattr(model, "classes_", np.zeros(0)).tolist(), task)


def class_rows(coef, intercept, classes: list[int], task: Task) -> tuple[np.ndarray, np.ndarray]:
    """A linear model's weights ``[K, F]`` and bias ``[K]`` as the encoder's: one row per class of
    ``task`` (``classes``: the task's index of each of the model's classes; a two-class model's one
    row is its second class's; a class absent from training is never predicted), one row for a score."""
    coef, intercept = np.atleast_2d(coef), np.atleast_1d(intercept)
    if not isinstance(task, Classification):
        return coef, intercept
    weight = np.zeros((task.outputs, coef.shape[1]))
    bias = np.full(task.outputs, intercept.min() - 1e4)
    if len(classes) == 2 and coef.shape[0] == 1:
        coef, intercept = np.vstack([np.zeros_like(coef), coef]), np.concatenate([[0.0], intercept])
    weight[classes], bias[classes] = coef, intercept
    return weight, bias


def reads_with_reference(config) -> bool:
    """Whether a run's (a :class:`~rationale_cli.runs.config.TrainConfig`'s) predictor is the full-text
    reference itself: the ``linear`` one without a support, fixed while the selector learns."""
    return config.predictor_encoder == LINEAR and not config.support


def from_reference(encoder: TfidfLinear, reference: Reference, vocab: Vocab, task: Task) -> None:
    """``encoder`` made the full-text reference itself (``--predictor-encoder linear`` without
    ``--support``: the predictor is the classifier the user has, fixed, reading the rationale): each
    word id takes its lower-cased term's inverse document frequency and weights, and each pair of ids
    whose terms make one of the reference's bigrams is a bigram feature with that bigram's. A word the
    reference has no feature for gets idf 0, so it weighs nothing and counts in no norm, as the
    reference drops it: on a document whose words are all in the vocabulary it computes the
    reference's decision values."""
    size = encoder.vocab_size
    ids: dict[str, list[int]] = {}
    for i in range(FIRST_WORD, size):
        ids.setdefault(vocab.itos[i].lower(), []).append(i)
    columns = np.full(size, -1)
    pairs: list[tuple[int, int]] = []  # (key a * V + b, column)
    for term, column in reference.term_index.items():
        words = term.split(" ")
        if len(words) == 1:
            columns[ids.get(term, [])] = column
        else:
            pairs += [(a * size + b, column) for a in ids.get(words[0], ()) for b in ids.get(words[1], ())]
    pairs.sort()
    keys = torch.tensor([key for key, _ in pairs], dtype=torch.long)
    columns = np.concatenate([columns, np.array([column for _, column in pairs], dtype=np.int64)])
    known = columns >= 0
    classes = [task.index[label] for label in reference.classes or ()]  # none for a score
    weight, bias = class_rows(reference.weights, reference.bias, classes, task)
    idf = np.where(known, reference.idf[columns], 0.0)
    weight = np.where(known, weight[:, columns], 0.0)
    encoder.fill(keys, torch.from_numpy(idf), torch.from_numpy(weight), torch.from_numpy(np.asarray(bias)))


def outputs_of(encoder: TfidfLinear, rationales: Rationales) -> Tensor:
    """The encoder's outputs ``[N, K]`` for the decoded documents (computed where the encoder
    is, returned on the CPU)."""
    device = encoder.weight.device
    with torch.no_grad():
        return torch.cat([encoder.summary(ids.to(device), gate.to(device)).cpu() for ids, gate in rationales.batches])


def metric_value(task: Task, outputs: Tensor, records: Sequence[Record]) -> float:
    """The task metric of ``outputs`` against the records' labels."""
    scores = task.scores()
    for (prediction, _), record in zip(task.describe(outputs), records):
        scores.add(prediction, record.label)
    return scores.result()[main_metric(task)]


def fit_linear(model: RationaleModel, vocab: Vocab, task: Task, train: Sequence[Record], valid: Sequence[Record],
               *, batch_size: int, device: torch.device, callbacks: Sequence[Callback] = ()) -> FitState:
    """The model's linear predictor fitted on the fixed selector's rationales (see the module
    docstring), the model left holding the chosen one; the fit as a one-epoch state whose row
    names the setting (``predictor``) and the validation value of every setting tried."""
    try:
        from scipy.sparse import vstack
        from sklearn.linear_model import LogisticRegression, Ridge
        from sklearn.preprocessing import normalize
    except ImportError:
        raise UserError("the linear predictor needs scikit-learn (pip install scikit-learn)") from None
    started = time.perf_counter()
    encoder = model.predictor_encoder
    run = Fit(model, vocab, task, None, random.Random(0), device, 1, 0, FitState(), callbacks)
    for callback in callbacks:
        callback.on_epoch_start(run, 1)
    seen = decoded(model, vocab, task, train, batch_size, device)
    held = decoded(model, vocab, task, valid, batch_size, device)
    kind = "logistic" if isinstance(task, Classification) else "ridge"
    metric, whole = main_metric(task), seen.full_texts()
    every = bigram_table(seen, encoder.vocab_size)
    best, tried = None, []
    for texts, longest in ((t, n) for t in TEXTS for n in NGRAMS):
        bigrams = every if longest > 1 else every[:0]
        counts = count_matrix(encoder, seen, bigrams)
        targets = seen.targets.numpy()
        if texts == WITH_FULL_TEXTS:
            counts, targets = vstack([counts, count_matrix(encoder, whole, bigrams)]).tocsr(), np.concatenate([targets] * 2)
        df = np.bincount(counts.indices, minlength=counts.shape[1])
        idf = np.log((1 + counts.shape[0]) / (1 + df)) + 1  # scikit-learn's smoothed idf
        features = normalize(counts.multiply(idf).tocsr())
        for strength in STRENGTHS[kind]:
            fitted = (LogisticRegression(C=strength, max_iter=2000) if kind == "logistic"
                      else Ridge(alpha=strength)).fit(features, targets)
            encoder.fill(bigrams, torch.from_numpy(idf), *map(torch.from_numpy, fitted_rows(fitted, task)))
            value = metric_value(task, outputs_of(encoder, held), valid)
            tried.append({"fitted_on": texts, "longest_ngram": longest, PARAMETER[kind]: strength, metric: value})
            if best is None or better(metric, value, best[2]):
                best = ({k: v.clone() for k, v in encoder.state_dict().items()}, (texts, longest, strength), value)
    encoder.load_state_dict(best[0])
    texts, longest, strength = best[1]
    setting = f"{setting_name(kind, longest, strength)}, fitted on {texts}"
    train_loss = float(task.loss(outputs_of(encoder, seen), seen.targets).mean())
    metrics = evaluate(model, vocab, task, valid, batch_size=batch_size, device=device)
    if not math.isfinite(metrics["loss"]):
        raise UserError(f"the linear predictor's validation loss is {metrics['loss']}")
    seconds = time.perf_counter() - started
    stats = {"selected": seen.selected / max(seen.selectable, 1.0)}
    result = Epoch(1, train_loss, stats, metrics, seconds, True)
    state = run.state
    state.epoch, state.best, state.train_seconds = 1, {"epoch": 1, "valid": metrics}, seconds
    state.history.append({**result.row(), "predictor": setting, "tried": tried})
    for callback in callbacks:
        callback.on_epoch_end(run, result)
    for callback in callbacks:
        callback.on_end(run)
    return state
