"""Running a trained model over documents: test-time rationales, predictions, metrics, and the
decoding a user asks for (:class:`rationale_cli.models.decoding.Decoding`: a rate per document or over a
corpus, a transition cost)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import torch
from torch import Tensor

from rationale_cli.data.batching import Batch, made_batches
from rationale_cli.data.records import Record
from rationale_cli.data.vocab import UNK, Vocab
from rationale_cli.metrics.eraser_scores import ScoredDocument
from rationale_cli.metrics.scores import RationaleScores
from rationale_cli.models.budget import Budget
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.models.model import RationaleModel
from rationale_cli.runs.task import Task
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.progress import Progress, counted, no_progress


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
    in_sentences: bool = False  # decoded in whole sentences: its spans are cut at sentence starts


def rounded(values: Tensor, decimals: int) -> Tensor:
    """``values`` rounded to ``decimals`` places in float64 (what Python's ``round`` gives, for a
    whole batch at once; -0.0 becomes 0.0)."""
    scale = 10.0**decimals
    return values.detach().cpu().double().mul_(scale).round_().div_(scale).add_(0.0)


def in_sentences(model: RationaleModel, decoding: Decoding = OWN) -> bool:
    """Whether ``model`` decoded as ``decoding`` says keeps whole sentences (asked for, or the
    model's own decoding is a fixed support's in sentences)."""
    fixed = getattr(model, "support", None)
    return decoding.sentences or (fixed is not None and fixed.sentences and decoding == OWN)


def decode_batch(model: RationaleModel, batch: Batch, decoding: Decoding = OWN) -> tuple[Tensor, Tensor, Tensor]:
    """``model.decode`` of ``batch`` as ``decoding`` says, with the batch's sentences when it
    decodes in sentences (:func:`in_sentences`)."""
    asked = {"sentences": batch.sentences()} if in_sentences(model, decoding) else {}
    return model.decode(batch.ids, batch.mask, batch.visible, decoding, **asked)


def decoded_batches(model: RationaleModel, vocab: Vocab, records: Iterable[Record], batch_size: int,
                    device: str | torch.device, task: Task | None = None, decoding: Decoding = OWN):
    """Each batch of ``records`` (:func:`made_batches`) decoded as ``decoding`` says: ``(chunk, batch,
    z, scores, outputs)``, the model in eval mode meanwhile; with ``task``, labelled batches carry
    targets."""
    was_training = model.training
    model.eval()
    try:
        for chunk, batch in made_batches(records, vocab, batch_size, device, task):
            yield (chunk, batch, *decode_batch(model, batch, decoding))
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
    decoding: Decoding = OWN,
) -> Iterator[Output]:
    """Decoded rationale and prediction per document (decoded as ``decoding`` says), in input
    order, streaming (without
    gradients; not under ``torch.inference_mode``, since some extractors' test-time
    marginals are gradients of their log-partition)."""
    sentences = in_sentences(model, decoding)
    for chunk, batch, z, scores, outputs in decoded_batches(model, vocab, records, batch_size, device, task, decoding):
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
                in_sentences=sentences,
            )


def corpus_threshold(model: RationaleModel, vocab: Vocab, records: Iterable[Record], share: float, *,
                     batch_size: int = 64, device: str | torch.device = "cpu", coherence: float | None = None) -> float:
    """The score of the round(share x N)-th best of the N selectable tokens of all the documents
    under the extractor's own decoding (with ``coherence``, if given, as its transition cost): as
    ``Decoding(threshold=...)``, decoding then keeps ``share``
    of the corpus's tokens (more where scores tie at the threshold, fewer where fewer are scored
    above 0), each document those scored at least that."""
    kept = []
    for _, batch, _, scores, _ in decoded_batches(model, vocab, records, batch_size, device,
                                                  decoding=Decoding(coherence=coherence)):
        kept.append(scores[batch.selectable > 0].float().cpu())
    scores = torch.cat(kept) if kept else torch.zeros(0)
    if scores.numel() == 0:
        raise ValueError("the documents have no tokens to select")
    wanted = min(max(int(share * scores.numel() + 0.5), 1), scores.numel())
    return float(torch.topk(scores, wanted).values[-1])


def evaluate(model, vocab, task, records, *, batch_size=64, device="cpu", decoding: Decoding = OWN) -> dict:
    """Task metric, mean task loss and rationale scores over labelled documents."""
    task_scores = task.scores()
    rationale = RationaleScores()
    losses = []
    for out in run_model(model, vocab, task, records, batch_size=batch_size, device=device, decoding=decoding):
        task_scores.add(out.prediction, out.record.label)
        rationale.add(out.selected, out.record.gold_mask())
        losses.append(out.loss)
    return {"loss": sum(losses) / max(len(losses), 1), **task_scores.result(), **rationale.result()}


def asked_decoding(loaded, *, rate: str | None = None, coherence: float | None = None,
                   sentences: bool = False) -> Decoding:
    """The decoding a user asked of the run ``loaded`` (its ``config`` and ``model``): each
    document at ``rate`` (a share or a count, ``--rate``) and/or with ``coherence`` as the
    cost per transition (``--coherence``) or in whole ``sentences`` (``--sentences``,
    :mod:`rationale_cli.models.decoding`); one error line otherwise."""
    if coherence is not None and coherence < 0:
        raise UserError(f"--coherence {coherence}: expected a number >= 0")
    if coherence is not None and sentences:
        raise UserError("--coherence and --sentences: choose one (runs at a transition cost, or whole sentences)")
    return Decoding(rate=None if rate is None else rate_budget(loaded.config, rate), coherence=coherence,
                    sentences=sentences)


def rate_budget(config, rate: str) -> Budget:
    """``rate`` as a :class:`rationale_cli.models.budget.Budget` for a run of ``config``, or one error line."""
    if config.extractor == "full":
        raise UserError("--rate: the full extractor scores every token alike, so it has no best tokens to keep")
    try:
        return Budget.parse(rate)
    except ValueError as err:
        raise UserError(f"--rate {err}") from None


def at_corpus_rate(loaded, rate: str, records: Iterable[Record], *, coherence: float | None = None,
                   sentences: bool = False, batch_size: int = 64,
                   device: str | torch.device = "cpu") -> tuple[Decoding, float]:
    """Every document decoded at one score threshold that keeps the share ``rate`` of all the
    ``records``' tokens (:func:`corpus_threshold`; ``--rate-over corpus``), and that share; with
    ``sentences``, each document's count of them is then placed in whole sentences."""
    share = rate_budget(loaded.config, rate).share
    if share is None:
        raise UserError(f"--rate {rate} --rate-over corpus: expected a share of the corpus's tokens, not a count")
    try:
        threshold = corpus_threshold(loaded.model, loaded.vocab, records, share, batch_size=batch_size,
                                     device=device, coherence=coherence)
    except ValueError as err:
        raise UserError(f"--rate-over corpus: {err}") from None
    return Decoding(threshold=threshold, coherence=coherence, sentences=sentences), share


def decoding_metrics(decoding: Decoding, corpus_share: float | None = None) -> dict:
    """What evaluate reports, beside its metrics, of a decoding at a transition cost, in sentences
    or over a corpus (a rate per document is in the metrics themselves)."""
    reported = {} if decoding.coherence is None else {"test_coherence": decoding.coherence}
    if decoding.sentences:
        reported["test_sentences"] = True
    if corpus_share is not None:
        reported.update(test_rate=corpus_share, test_rate_over="corpus", test_threshold=decoding.threshold)
    return reported


def check_rate_over(rate: str | float | None, rate_over: str) -> None:
    """``--rate-over``: one of its two scopes, and corpus only with a share to hold."""
    if rate_over not in ("document", "corpus"):
        raise UserError(f"--rate-over {rate_over}: expected document or corpus")
    if rate_over == "corpus" and rate is None:
        raise UserError("--rate-over corpus: give the share to hold with --rate")


def parse_decoding(loaded, rate: str | float | None, rate_over: str, coherence: float | None, *,
                   sentences: bool = False, records: Iterable[Record] | None = None, total: int | None = None,
                   batch_size: int = 64, device: str | torch.device = "cpu", progress: Progress = no_progress,
                   report: Callable[[str], None] = lambda line: None) -> tuple[Decoding, dict]:
    """The decoding ``--rate``, ``--rate-over``, ``--coherence`` and ``--sentences`` ask of the run
    ``loaded``, parsed once (:func:`asked_decoding`, :func:`at_corpus_rate`), and what evaluate
    reports of it (:func:`decoding_metrics`). Over a corpus, ``records`` (``total`` of them, if
    known) are read once for the threshold, that pass reported to ``progress`` ('scoring'), and
    the threshold found to ``report``, as a line."""
    if rate_over != "corpus":
        decoding = asked_decoding(loaded, rate=rate, coherence=coherence, sentences=sentences)
        return decoding, decoding_metrics(decoding)
    asked_decoding(loaded, coherence=coherence, sentences=sentences)  # checked before the scoring pass
    with progress(total, doing="scoring") as advance:
        decoding, share = at_corpus_rate(loaded, rate, counted(records, advance), coherence=coherence,
                                         sentences=sentences, batch_size=batch_size, device=device)
    report(f"decoding at threshold {decoding.threshold:.6g}, which keeps {100 * share:g}% of the input's tokens")
    return decoding, decoding_metrics(decoding, share)
