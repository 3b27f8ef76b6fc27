"""Running a trained model over documents: test-time rationales, predictions, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch
from torch import Tensor

from rationale_cli.data.batching import capped_batches, make_batch
from rationale_cli.metrics.eraser_scores import ScoredDocument
from rationale_cli.metrics.scores import RationaleScores
from rationale_cli.data.records import Record
from rationale_cli.runs.task import Task
from rationale_cli.data.vocab import UNK, Vocab
from models.model import RationaleModel


@dataclass
class Output:
    record: Record
    selected: list[int]
    scores: list[float]
    prediction: float | str
    extra: dict = field(default_factory=dict)
    loss: float | None = None
    unknown: int = 0  # tokens not in the model's vocabulary
    scored: ScoredDocument | None = None  # for ERASER results: unrounded scores and faithfulness


def chunks(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def rounded(values: Tensor, decimals: int) -> Tensor:
    """``values`` rounded to ``decimals`` places in float64 (what Python's ``round`` gives, for a
    whole batch at once; -0.0 becomes 0.0)."""
    scale = 10.0**decimals
    return values.detach().cpu().double().mul_(scale).round_().div_(scale).add_(0.0)


def decoded_batches(model: RationaleModel, vocab: Vocab, records: Iterable[Record], batch_size: int,
                    device: str | torch.device, task: Task | None = None):
    """Each batch of ``records`` (``capped_batches``) with its decoding ``(chunk, batch, z, scores,
    outputs)``, the model in eval mode meanwhile; with ``task``, labelled batches carry targets."""
    was_training = model.training
    model.eval()
    try:
        for chunk in capped_batches(records, batch_size):
            labelled = task is not None and all(r.label is not None for r in chunk)
            batch = make_batch(chunk, vocab, task if labelled else None, device)
            yield (chunk, batch, *model.decode(batch.ids, batch.mask, batch.visible))
    finally:
        model.train(was_training)


def run_model(
    model: RationaleModel,
    vocab: Vocab,
    task: Task,
    records: Iterable[Record],
    *,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
) -> Iterator[Output]:
    """Decoded rationale and prediction per document, in input order, streaming (without
    gradients; not under ``torch.inference_mode``, since some extractors' test-time
    marginals are gradients of their log-partition)."""
    for chunk, batch, z, scores, outputs in decoded_batches(model, vocab, records, batch_size, device, task):
        labelled = batch.targets is not None
        losses = task.loss(outputs, batch.targets).tolist() if labelled else [None] * len(chunk)
        selected, scores = (z != 0).int().tolist(), rounded(scores, 4).tolist()
        unknown = ((batch.ids == vocab.stoi[UNK]) & (batch.mask > 0)).sum(1).tolist()
        for row, (record, (prediction, extra)) in enumerate(zip(chunk, task.describe(outputs.cpu()))):
            n = len(record.tokens)
            yield Output(
                record=record,
                selected=selected[row][:n],
                scores=scores[row][:n],
                prediction=prediction,
                extra=extra,
                loss=losses[row],
                unknown=unknown[row],
            )


def corpus_threshold(model: RationaleModel, vocab: Vocab, records: Iterable[Record], share: float, *,
                     batch_size: int = 64, device: str | torch.device = "cpu") -> float:
    """The score of the round(share x N)-th best of the N selectable tokens of all the documents
    under the extractor's own decoding: as ``model.test_threshold``, decoding then keeps ``share``
    of the corpus's tokens (more where scores tie at the threshold, fewer where fewer are scored
    above 0), each document those scored at least that."""
    kept = []
    for _, batch, _, scores, _ in decoded_batches(model, vocab, records, batch_size, device):
        selectable = batch.mask if batch.visible is None else batch.mask - batch.visible
        kept.append(scores[selectable > 0].float().cpu())
    scores = torch.cat(kept) if kept else torch.zeros(0)
    if scores.numel() == 0:
        raise ValueError("the documents have no tokens to select")
    wanted = min(max(int(share * scores.numel() + 0.5), 1), scores.numel())
    return float(torch.topk(scores, wanted).values[-1])


def evaluate(model, vocab, task, records, *, batch_size=64, device="cpu") -> dict:
    """Task metric, mean task loss and rationale scores over labelled documents."""
    task_scores = task.scores()
    rationale = RationaleScores()
    losses = []
    for out in run_model(model, vocab, task, records, batch_size=batch_size, device=device):
        task_scores.add(out.prediction, out.record.label)
        rationale.add(out.selected, out.record.gold_mask())
        losses.append(out.loss)
    return {"loss": sum(losses) / max(len(losses), 1), **task_scores.result(), **rationale.result()}
