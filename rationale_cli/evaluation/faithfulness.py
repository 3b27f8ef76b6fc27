"""Running a trained model for ERASER's scores: everything a results line holds, and
the faithfulness of its rationales (DeYoung et al., 2020, section 4.2).

Per document, the model runs on the full text, on the text without its rationale
(comprehensiveness), on the rationale alone (sufficiency), and for each AOPC bin k
without and with only the ceil(k * n) tokens ranked highest by ``token_scores`` (ties:
earlier tokens first). Altered documents are the remaining tokens, closed up; one that
keeps no token is a single unknown token. The model reruns whole, selector and all.

For a select-then-predict model two more numbers: its predictor alone on exactly the
rationale mask (bypassing the selector) and on its complement, as drops from the
full-document prediction like sufficiency and comprehensiveness.

Classification uses the probability of the predicted class; regression the absolute
change of the predicted score.
"""

from __future__ import annotations

import math
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from rationale_cli.data.batching import made_batches
from rationale_cli.data.records import Record, mask_to_spans
from rationale_cli.data.vocab import UNK, Vocab
from rationale_cli.metrics.eraser_scores import AOPC_THRESHOLDS, ScoredDocument, aopc, bins, drop, drops
from rationale_cli.metrics.scores import mean
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.inference import decode_batch, in_sentences
from rationale_cli.runs.task import Task


def values(task: Task, outputs: torch.Tensor) -> list:
    """Per row: class probabilities (a dict) for classification, the score for regression."""
    if task.name == "classification":
        probs = torch.softmax(outputs.float(), -1).cpu().tolist()
        return [dict(zip(task.labels, row)) for row in probs]
    return torch.sigmoid(outputs[:, 0].float()).cpu().tolist()


def top_tokens(scores: Sequence[float], count: int) -> set[int]:
    """The ``count`` best-scored positions, earlier first among ties."""
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    return set(order[:count].tolist())


def keep_only(record: Record, keep: Iterable[int]) -> Record:
    """The document reduced to the positions in ``keep`` (one unknown token if none)."""
    keep = set(keep)
    tokens = [t for i, t in enumerate(record.tokens) if i in keep] or [UNK]
    return Record(id=record.id, tokens=tokens, label=record.label, query=record.query)


def variants(record: Record, selected: set[int], scores: Sequence[float], thresholds: Sequence[float]) -> list[Record]:
    """Without the rationale, the rationale alone, then per bin: without, only."""
    everything = set(range(len(record.tokens)))
    out = [keep_only(record, everything - selected), keep_only(record, selected)]
    for threshold in thresholds:
        top = top_tokens(scores, math.ceil(threshold * len(record.tokens)))
        out += [keep_only(record, everything - top), keep_only(record, top)]
    return out


@torch.no_grad()
def model_values(model: RationaleModel, vocab: Vocab, task: Task, records: list[Record], batch_size: int,
                 device, decoding: Decoding = OWN) -> list:
    """The full model's prediction values on each record (decoded as ``decoding`` says)."""
    out = []
    for _, batch in made_batches(records, vocab, batch_size, device):
        out += values(task, decode_batch(model, batch, decoding)[2])
    return out


@torch.no_grad()
def scored_documents(model: RationaleModel, vocab: Vocab, task: Task, records: Iterable[Record], *,
                     thresholds: Sequence[float] = AOPC_THRESHOLDS, batch_size: int = 64, device="cpu",
                     faithfulness: bool = True, decoding: Decoding = OWN) -> Iterator[tuple[ScoredDocument, dict]]:
    """Per document, decoded as ``decoding`` says, its :class:`ScoredDocument` (unrounded soft scores, class scores and,
    with ``faithfulness``, the altered documents' scores) and the predictor's values on
    the rationale mask and its complement (``{"rationale", "complement"}``)."""
    was_training = model.training
    model.eval()
    try:
        sentences = in_sentences(model, decoding)  # then one span per selected sentence
        for chunk, batch in made_batches(records, vocab, batch_size, device):
            emb = model.embedded(batch.ids)
            z, scores, outputs = decode_batch(model, batch, decoding)
            hard = (z != 0).float()
            document = batch.selectable
            extra = {}
            for name, masks in (("rationale", hard), ("complement", document - hard)):
                read = masks if batch.visible is None else masks + batch.visible
                extra[name] = values(task, model.predict_masked(emb, batch.mask, read.unsqueeze(1),
                                                                        batch.ids)[:, 0])
            full = values(task, outputs)
            hard_rows, score_rows = hard.int().tolist(), scores.cpu().tolist()
            altered, docs = [], []
            for row, record in enumerate(chunk):
                n = len(record.tokens)
                selected = hard_rows[row][:n]
                soft = score_rows[row][:n]
                docs.append(ScoredDocument(
                    id=record.id, length=n, gold=record.gold_spans(), soft=soft,
                    spans=mask_to_spans(selected, record.sentence_spans() if sentences else None),
                    label=record.label, prediction=best(full[row]), class_scores=full[row]))
                if faithfulness:
                    altered += variants(record, {i for i, v in enumerate(selected) if v}, soft, thresholds)
            per_doc = 2 + 2 * len(thresholds)
            results = model_values(model, vocab, task, altered, batch_size, device, decoding) if faithfulness else []
            for row, doc in enumerate(docs):
                if faithfulness:
                    own = results[row * per_doc : (row + 1) * per_doc]
                    doc.comprehensiveness, doc.sufficiency = own[0], own[1]
                    doc.thresholded = [
                        {"threshold": t, "comprehensiveness_classification_scores": own[2 + 2 * i],
                         "sufficiency_classification_scores": own[3 + 2 * i]}
                        for i, t in enumerate(thresholds)]
                yield doc, {"rationale": extra["rationale"][row], "complement": extra["complement"][row]}
    finally:
        model.train(was_training)


def best(value):
    """The predicted class (or the score itself, for regression)."""
    return max(value, key=value.get) if isinstance(value, dict) else value


def faithfulness_summary(pairs: Sequence[tuple[ScoredDocument, dict]]) -> dict:
    """Mean drops: ``comprehensiveness``, ``sufficiency``, their AOPC over the bins, and
    the predictor alone on the rationale and on its complement."""
    docs = [doc for doc, _ in pairs]
    out: dict = {"measure": ("probability of the predicted class" if docs and isinstance(docs[0].class_scores, dict)
                             else "absolute change of the predicted score")}
    thresholds = bins(docs)
    if thresholds:
        out["aopc_thresholds"] = thresholds
        for name in ("comprehensiveness", "sufficiency"):
            out[name] = mean(drops(docs, name))
            out[f"{name}_aopc"] = aopc(docs, thresholds, name)[0]
    for name in ("rationale", "complement"):
        out[f"predictor_on_{name}"] = mean([drop(d.class_scores, extra[name], d.prediction) for d, extra in pairs])
    return out
