"""The training loop as a library function: one loss for every extractor (the Selection
interface), knowing no paths and no console.

``loss = (weights * task_loss).sum(-1).mean() + penalty + surrogate`` (plus full-text guidance
and rationale supervision when asked, :func:`training_loss`), Adam,
gradient clipping, optional learning-rate decay when validation loss stalls or
linear in the updates,
model selection on validation task loss and early stopping (Bastings et al.,
2019, appendix B.1: models are selected on validation loss). What a run does
beside training (writing its directory, printing progress, stopping at a time
limit) is done by callbacks (:mod:`rationale_cli.training.callbacks`).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.distributed as dist

from rationale_cli.data.batching import Batch, balanced_draw, balanced_size, length_batches, make_batch
from rationale_cli.data.records import Record
from rationale_cli.data.vocab import Vocab
from rationale_cli.models.ranks import all_ranks, distributed, world_size
from rationale_cli.models.selection import Selection
from rationale_cli.runs.config import TRAIN_SPECS as DEFAULTS
from rationale_cli.runs.inference import evaluate
from rationale_cli.runs.keep import Keep
from rationale_cli.runs.task import Task
from rationale_cli.training.distributed import from_rank_zero, gather_random_states, rank, share, wrap
from rationale_cli.training.supervision import supervision_loss

SUPERVISION = "supervision"  # the training statistic of rationale supervision, a mean over the gold documents


def training_loss(model, task: Task, batch: Batch, guidance: float = 0.0, supervise: float = 0.0,
                  separate: bool = False) -> tuple[torch.Tensor, Selection, torch.Tensor | None]:
    """``loss = (weights * task_loss).sum(-1).mean() + penalty + surrogate`` for one batch. With
    ``guidance`` g > 0 (full-text guidance, after the output-space matching of Huang et al., 2021,
    "Distribution Matching for Rationalization"), the predictor also reads the full text:
    ``+ g * (task_loss(full) + (weights * D(full || rationale)).sum(-1)).mean()``, ``D``
    (:meth:`Task.divergence`) against the full text's detached output, which pulls the rationale's
    prediction toward it. With ``supervise`` w > 0 (rationale supervision,
    :mod:`rationale_cli.training.supervision`; the batch made with its gold masks), ``+ w *
    supervision`` over the batch's documents with gold, whose unweighted value joins the
    selection's statistics as ``supervision``. With ``separate`` (MCD's separation, Liu et al.,
    2023, section 4) the selector learns only from ``g * D(full || rationale)`` and its
    penalty, never the label, and the predictor only from the task losses: the third value is then
    the selector's loss, the first the predictor's (:func:`training_step` routes each to its own
    parameters; a score-function selector takes the divergence as its cost), else None."""
    fixed = getattr(getattr(model, "module", model), "support", None)  # DDP wraps the model in .module
    sentences = batch.sentences() if fixed is not None and fixed.sentences else None
    selection, outputs = model(batch.ids, batch.mask, batch.visible, full_text=bool(guidance), sentences=sentences)
    targets = batch.targets.unsqueeze(1).expand(selection.weights.shape)
    outputs, full = outputs[:, : targets.shape[1]], outputs[:, targets.shape[1]:]  # full: [B, 1] with guidance
    task_loss = task.loss(outputs, targets)
    loss = (selection.weights * task_loss).sum(-1).mean()
    selector_loss, cost = None, task_loss
    if guidance:
        full_loss = task.loss(full, targets[:, :1]).squeeze(1)
        divergence = task.divergence(outputs, full.detach().expand_as(outputs))
        pulled = (selection.weights * divergence).sum(-1)
        if separate:
            loss = loss + guidance * full_loss.mean()
            selector_loss, cost = selection.penalty + guidance * pulled.mean(), guidance * divergence
        else:
            loss = loss + guidance * (full_loss + pulled).mean()
    if selector_loss is None:
        loss = loss + selection.penalty
    if supervise:
        supervised = supervision_loss(selection, batch.gold, batch.golden, batch.selectable)
        if selector_loss is None:
            loss = loss + supervise * supervised
        else:
            selector_loss = selector_loss + supervise * supervised
        selection.stats[SUPERVISION] = supervised.detach()
    if selection.surrogate is not None:
        surrogate = selection.surrogate(cost.detach())
        if surrogate is not None and selector_loss is not None:
            selector_loss = selector_loss + surrogate
        elif surrogate is not None:
            loss = loss + surrogate
    return loss, selection, selector_loss


def training_step(model, task: Task, batch: Batch, optimizer: torch.optim.Optimizer, clip: float,
                  guidance: float = 0.0, supervise: float = 0.0, separate: bool = False) -> tuple[float, Selection]:
    """One update on :func:`training_loss`, with gradient-norm clipping; a FloatingPointError,
    before the weights change, when the loss (in any process of a distributed run) or
    the gradient is not finite (extractors raise it too, where a non-finite value stops
    them). ``model`` may be wrapped in DistributedDataParallel; ``guidance`` and ``supervise``: see
    :func:`training_loss`."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    loss, selection, selector_loss = training_loss(model, task, batch, guidance, supervise, separate)
    value = loss.item() + (0.0 if selector_loss is None else selector_loss.item())
    if not all_ranks(math.isfinite(value), loss.device):  # every process stops at the same step
        raise FloatingPointError(f"loss {value}" if not math.isfinite(value) else "loss non-finite in another process")
    optimizer.zero_grad(set_to_none=True)
    if selector_loss is None:
        loss.backward()
    else:  # each loss to its side's parameters only (one process: DDP's reducer is not used here)
        predictor = {id(p) for p in getattr(model, "module", model).predictor_parameters()}
        sides = [[p for p in params if p.requires_grad and (id(p) in predictor) == mine] for mine in (True, False)]
        for side, part in zip(sides, (loss, selector_loss)):
            grads = torch.autograd.grad(part, side, retain_graph=True, allow_unused=True)
            for p, grad in zip(side, grads):
                p.grad = grad
    norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
    if not bool(torch.isfinite(norm)):
        raise FloatingPointError("non-finite gradient")
    optimizer.step()
    return value, selection


@dataclass(frozen=True)
class LinearDecay:
    """The learning rate at update t (from 0): its start times ``1 - (1 - final) * min(1, t /
    steps)``, a linear decay to ``final`` times the start over ``steps`` updates, then held
    (Paulus et al., 2020, appendix D.6). The start is each group's ``initial_lr`` (set at the
    first update; a resumed run's checkpoint restores it)."""

    final: float
    steps: int

    def apply(self, optimizer: torch.optim.Optimizer, t: int) -> None:
        factor = 1.0 - (1.0 - self.final) * min(1.0, t / self.steps)
        for group in optimizer.param_groups:
            group["lr"] = group.setdefault("initial_lr", group["lr"]) * factor


class Diverged(FloatingPointError):
    """A non-finite value before any epoch finished: there is no model to keep."""


@dataclass
class Epoch:
    """What one epoch did: mean training loss, the extractor's training statistics
    (means over documents; ``supervision`` over the documents with gold), validation metrics,
    seconds, whether it is the best so far."""

    epoch: int
    train_loss: float
    stats: dict[str, float]
    valid: dict
    seconds: float
    improved: bool

    def row(self) -> dict:
        """The epoch as a history entry (``metrics.json``)."""
        return {"epoch": self.epoch, "train_loss": self.train_loss, "seconds": self.seconds, **self.stats,
                **{f"valid_{k}": v for k, v in self.valid.items()}}


@dataclass
class FitState:
    """Where training stands; a resumed run starts from the state it saved."""

    epoch: int = 0  # epochs finished
    history: list[dict] = field(default_factory=list)
    best: dict | None = None  # {"epoch": N, "valid": metrics}
    stale: int = 0  # epochs since the best
    train_seconds: float = 0.0
    best_weights: dict | None = None  # the best epoch's weights, in memory
    stop: str | None = None  # why training stopped before its last epoch
    warnings: list[str] = field(default_factory=list)  # what looks wrong with the finished run's result

    def metrics(self) -> dict:
        """The kept epoch, its validation metrics, the history, the training time and the
        finished run's warnings."""
        return {"best_epoch": self.best["epoch"], "valid": self.best["valid"], "history": self.history,
                "train_seconds": self.train_seconds, "warnings": self.warnings}


class Callback:
    """Hooks into :func:`fit`; each does nothing unless overridden. A callback stops
    training after the current epoch by setting ``fit.state.stop`` to the reason."""

    def on_epoch_start(self, fit: Fit, epoch: int) -> None: ...

    def on_step(self, fit: Fit, step: int, mean_loss: float) -> None: ...

    def on_epoch_end(self, fit: Fit, result: Epoch) -> None: ...

    def on_end(self, fit: Fit) -> None: ...


@dataclass
class Fit:
    """One training run in progress, as callbacks see it."""

    model: torch.nn.Module
    vocab: Vocab
    task: Task
    optimizer: torch.optim.Optimizer
    rng: random.Random
    device: torch.device
    epochs: int
    batches: int  # per epoch
    state: FitState
    callbacks: Sequence[Callback] = ()
    net: torch.nn.Module | None = None  # what training calls: the model, or DDP around it
    processes: int = 1
    rank: int = 0
    random_states: list[dict] | None = None  # every process's, after an epoch of a distributed run
    keep: Keep = Keep()
    schedule: LinearDecay | None = None
    guidance: float = 0.0
    supervise: float = 0.0
    separate: bool = False
    balance: bool = False


def fit(
    model: torch.nn.Module,
    vocab: Vocab,
    task: Task,
    train: Sequence[Record],
    valid: Sequence[Record],
    optimizer: torch.optim.Optimizer | None = None,
    *,
    epochs: int = DEFAULTS["epochs"].default,
    batch_size: int = DEFAULTS["batch_size"].default,
    lr: float = DEFAULTS["lr"].default,
    weight_decay: float = DEFAULTS["weight_decay"].default,
    clip: float = DEFAULTS["clip"].default,
    lr_decay: float = DEFAULTS["lr_decay"].default,
    lr_final: float = DEFAULTS["lr_final"].default,
    lr_decay_epochs: int | None = DEFAULTS["lr_decay_epochs"].default,
    patience: int = DEFAULTS["patience"].default,
    guidance: float = DEFAULTS["guidance"].default,
    supervise: float = DEFAULTS["supervise"].default,
    separate: bool = DEFAULTS["separate_guidance"].default,
    balance: bool = DEFAULTS["balance_classes"].default,
    keep: Keep = Keep(),
    rng: random.Random | int = 0,
    callbacks: Sequence[Callback] = (),
    state: FitState | None = None,
    restore_best: bool = True,
) -> FitState:
    """Train ``model`` on ``train``, validating on ``valid`` after every epoch, for at most
    ``epochs`` epochs in all (``state``, a resumed run's, counts the ones done). The
    optimizer defaults to Adam with ``lr`` and ``weight_decay``; ``rng`` (or its seed)
    orders the batches; ``lr_final`` below 1 decays the learning rate linearly over
    ``lr_decay_epochs`` (default: ``epochs``; :class:`LinearDecay`); ``guidance`` weighs full-text
    guidance (``separate``: MCD's separation) and ``supervise`` rationale supervision on the
    documents of ``train`` with a gold rationale (:func:`training_loss`); with ``balance`` each
    epoch is a class-balanced draw of ``train`` (:func:`~rationale_cli.data.batching.balanced_draw`).
    The defaults are those of ``rationale train``. With ``restore_best`` the model ends with the
    weights of its best validation epoch by the ``keep`` rule (else with its last; ``state.best``
    says which was best).
    Returns the final state; :class:`Diverged` when a value turns non-finite before any
    epoch finished (later, training stops and keeps the best epoch so far). Called by
    every process of a distributed run (a torch.distributed process group, see
    :mod:`rationale_cli.training.distributed`), it trains one model with DDP, ``batch_size``
    documents per process; give the callbacks to rank 0 alone."""
    if not train or not valid:
        raise ValueError(f"fit needs training and validation documents (got {len(train)} and {len(valid)})")
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer is None:
        optimizer = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    device = next(model.parameters()).device
    processes = world_size()
    net = wrap(model, device)
    size = balanced_size(train) if balance else len(train)
    batches = size // (batch_size * processes) + (size % (batch_size * processes) >= processes)
    schedule = LinearDecay(lr_final, (lr_decay_epochs or epochs) * batches) if lr_final < 1.0 else None
    run = Fit(model, vocab, task, optimizer, rng, device, epochs, batches, state or FitState(), callbacks, net,
              processes, rank(), keep=keep, schedule=schedule, guidance=guidance, supervise=supervise,
              separate=separate, balance=balance)
    state = run.state
    started, seconds_before = time.perf_counter(), state.train_seconds
    try:
        for epoch in range(state.epoch + 1, epochs + 1):
            try:
                result = one_epoch(run, epoch, train, valid, batch_size, clip)
            except FloatingPointError as err:
                if state.best is None:
                    raise Diverged(str(err)) from None
                state.stop = (f"training diverged at {err}; stopped, keeping epoch {state.best['epoch']}, the "
                              "best before it (a lower --lr may avoid this)")
                break
            state.epoch = epoch
            state.history.append(result.row())
            if result.improved:
                state.best, state.stale = {"epoch": epoch, "valid": result.valid}, 0
                if restore_best:
                    state.best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            elif keep.reached(state.best["valid"]):  # while no epoch is at the target rate, none is stale
                state.stale += 1
                if lr_decay < 1.0:  # with a linear schedule, its start too
                    for group in optimizer.param_groups:
                        group["lr"] *= lr_decay
                        if "initial_lr" in group:
                            group["initial_lr"] *= lr_decay
            state.train_seconds = seconds_before + time.perf_counter() - started
            if patience > 0 and state.stale >= patience:
                state.stop = f"early stop: no improvement in {keep.describe()} for {state.stale} epochs"
            if distributed():
                run.random_states = gather_random_states(device)
            for callback in run.callbacks:
                callback.on_epoch_end(run, result)
            state.stop = from_rank_zero(state.stop)  # a time limit is judged on rank 0
            if state.stop:
                break
        if restore_best and state.best_weights is not None:
            model.load_state_dict(state.best_weights)
    finally:
        for callback in run.callbacks:
            callback.on_end(run)
    return state


def one_epoch(run: Fit, epoch: int, train: Sequence[Record], valid: Sequence[Record], batch_size: int,
              clip: float) -> Epoch:
    """One pass over ``train`` in length-sorted batches (this process's share of each in a
    distributed run), then validation; a FloatingPointError naming where a value turned
    non-finite."""
    started = time.perf_counter()
    model, task = run.model, run.task
    for callback in run.callbacks:
        callback.on_epoch_start(run, epoch)
    model.train()
    total, count = 0.0, 0
    sums: dict[str, torch.Tensor] = {}
    weights: dict[str, float] = {}  # documents behind each statistic's sum
    step = 0
    epoch_records = balanced_draw(train, run.rng) if run.balance else train
    for batch_records in length_batches(epoch_records, batch_size * run.processes, rng=run.rng,
                                        tables=run.model.table_bytes):
        if len(batch_records) < run.processes:  # a last batch too small to give every process a document
            continue
        step += 1
        records = share(batch_records, run.rank, run.processes)
        batch = make_batch(records, run.vocab, task, run.device, gold=run.supervise > 0)
        if run.schedule is not None:
            run.schedule.apply(run.optimizer, (epoch - 1) * run.batches + step - 1)
        try:
            loss, selection = training_step(run.net, task, batch, run.optimizer, clip, run.guidance, run.supervise,
                                             run.separate)
        except FloatingPointError as err:
            raise FloatingPointError(f"epoch {epoch}, step {step}: {err}") from None
        total += loss * len(records)
        count += len(records)
        golden = sum(r.rationale is not None for r in records) if run.supervise else 0
        for key, value in selection.stats.items():
            documents = golden if key == SUPERVISION else len(records)
            sums[key] = sums.get(key, 0.0) + value.detach() * documents
            weights[key] = weights.get(key, 0) + documents
        for callback in run.callbacks:
            callback.on_step(run, step, total / count)
    total, count, stats = summed_over_ranks(total, count, sums, weights, run.device)
    metrics = from_rank_zero(validate(run, epoch, valid, batch_size) if run.rank == 0 else None)
    if isinstance(metrics, str):
        raise FloatingPointError(metrics)
    best = run.state.best
    return Epoch(epoch, total / count, stats, metrics,
                 time.perf_counter() - started, best is None or run.keep.key(metrics) < run.keep.key(best["valid"]))


def validate(run: Fit, epoch: int, valid: Sequence[Record], batch_size: int) -> dict | str:
    """The validation metrics, or where a value turned non-finite."""
    try:
        metrics = evaluate(run.model, run.vocab, run.task, valid, batch_size=batch_size, device=run.device)
    except FloatingPointError as err:
        return f"epoch {epoch}, validation: {err}"
    if not math.isfinite(metrics["loss"]):
        return f"epoch {epoch}: validation loss {metrics['loss']}"
    return metrics


def summed_over_ranks(total: float, count: int, sums: dict[str, torch.Tensor], weights: dict[str, float],
                      device: torch.device) -> tuple[float, int, dict[str, float]]:
    """The epoch's loss and document count summed over every process, and each statistic's
    mean over the documents behind it (``weights``: how many documents each sum holds; 0 when
    none), in one transfer."""
    values = torch.tensor([total, count, *(float(v) for v in sums.values()), *(float(weights[k]) for k in sums)],
                          dtype=torch.float64)
    if distributed():
        values = values.to(device)
        dist.all_reduce(values)
        values = values.cpu()
    total, count, *rest = values.tolist()
    means = {key: value / documents if documents else 0.0
             for key, value, documents in zip(sums, rest[: len(sums)], rest[len(sums):])}
    return total, int(count), means
