"""The training loop: one loss for every extractor (the Selection interface).

``loss = (weights * task_loss).sum(-1).mean() + penalty + surrogate``, Adam,
gradient clipping, optional learning-rate decay when validation loss stalls,
model selection on validation task loss and early stopping (Bastings et al.,
2019, appendix B.1: models are selected on validation loss).
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from rationale_cli.batching import Batch, length_batches, make_batch
from rationale_cli.checkpoint import RESUME, data_fingerprint, load_checkpoint, save_checkpoint
from rationale_cli.config import TrainConfig
from rationale_cli.devices import resolve_device
from rationale_cli.errors import UserError
from rationale_cli.inference import evaluate
from rationale_cli.records import Record
from rationale_cli.rundir import WEIGHTS, build_model, load_run, save_run, save_weights, write_json
from rationale_cli.task import Task, infer_task
from rationale_cli.vectors import load_vectors
from rationale_cli.vocab import Vocab
from models.selection import Selection


def split_validation(records: list[Record], fraction: float) -> tuple[list[Record], list[Record]]:
    """A random ``fraction`` of the training records held out for validation: a fixed
    shuffle, so every seed and extractor sees the same split."""
    order = list(records)
    random.Random(0).shuffle(order)
    n_valid = max(1, int(round(len(order) * fraction)))
    return order[n_valid:], order[:n_valid]


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
        transient=True,
    )


def percent(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def summary_line(epoch: int, epochs: int, train_loss: float, valid: dict, stats: dict, seconds: float) -> str:
    metric = f"mse {valid['mse']:.4f}" if "mse" in valid else f"acc {percent(valid['accuracy'])} f1 {percent(valid['macro_f1'])}"
    parts = [
        f"epoch {epoch}/{epochs}",
        f"train loss {train_loss:.4f}",
        f"valid loss {valid['loss']:.4f}",
        f"valid {metric}",
        f"valid selected {percent(valid['selection_rate'])}",
    ]
    if valid.get("precision") is not None:
        parts.append(f"valid precision {percent(valid['precision'])}")
    parts += [f"train {k} {v:.4g}" for k, v in stats.items()]
    parts.append(f"{seconds:.0f}s")
    return " | ".join(parts)


def out_of_time(limit_minutes: float, elapsed: float, history: list[dict]) -> bool:
    """Whether one more epoch, as slow as the slowest so far, would end after the limit (0: none)."""
    return limit_minutes > 0 and elapsed + max(h["seconds"] for h in history) > 60 * limit_minutes


def training_loss(model, task: Task, batch: Batch) -> tuple[torch.Tensor, Selection]:
    """``loss = (weights * task_loss).sum(-1).mean() + penalty + surrogate`` for one batch."""
    selection, outputs = model(batch.ids, batch.mask)
    targets = batch.targets.unsqueeze(1).expand(selection.weights.shape)
    task_loss = task.loss(outputs, targets)
    loss = (selection.weights * task_loss).sum(-1).mean() + selection.penalty
    if selection.surrogate is not None:
        surrogate = selection.surrogate(task_loss.detach())
        if surrogate is not None:
            loss = loss + surrogate
    return loss, selection


def training_step(model, task: Task, batch: Batch, optimizer: torch.optim.Optimizer, clip: float) -> tuple[float, Selection]:
    """One update on :func:`training_loss`, with gradient-norm clipping; a FloatingPointError,
    before the weights change, when the loss or the gradient is not finite (extractors
    raise it too, where a non-finite value stops them)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    loss, selection = training_loss(model, task, batch)
    value = loss.item()
    if not math.isfinite(value):
        raise FloatingPointError(f"loss {value}")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
    if not bool(torch.isfinite(norm)):
        raise FloatingPointError("non-finite gradient")
    optimizer.step()
    return value, selection


def fresh_model(config: TrainConfig, train_records: list[Record], valid_records: list[Record], out: Path,
                console: Console, device):
    """The vocabulary, task and a new model for a run that starts from scratch; checks every
    label first, then writes everything of the run directory but the weights and metrics
    (the files of a run it replaces are removed, so none of them can be mixed with these)."""
    task = infer_task([r.label for r in train_records], config.task)
    task.targets(train_records)
    task.targets(valid_records)
    vocab = Vocab.build((r.tokens for r in train_records), min_freq=config.min_freq, max_size=config.max_vocab)
    vectors = None
    if config.embeddings:
        vectors, info = load_vectors(config.embeddings, vocab)
        config.embedding_dim = info["dim"]
        console.print(
            f"embeddings: {info['found']:,} of {info['vocab']:,} vocabulary words found "
            f"({100 * info['coverage']:.1f}%), dimension {info['dim']}",
            highlight=False,
        )
    try:
        model = build_model(config, len(vocab), task, vectors).to(device)
    except ValueError as err:
        raise UserError(f"--extractor {config.extractor} --encoder {config.encoder}: {err}") from None
    for name in (WEIGHTS, RESUME, "metrics.json"):
        (out / name).unlink(missing_ok=True)
    save_run(out, config, vocab, task)
    return vocab, task, model


def diverged(out: Path, console: Console, metrics: dict | None, where: str) -> dict:
    """Stop on a non-finite value: the run keeps its best epoch so far (one error line
    when no epoch has finished)."""
    if metrics is None:
        raise UserError(f"{out}: training diverged at {where}, before any epoch finished, so no model was "
                        "saved; try a lower --lr")
    console.print(f"training diverged at {where}; stopped, the run keeps epoch {metrics['best_epoch']}, "
                  "the best before it (a lower --lr may avoid this)", highlight=False)
    return metrics


def train_model(
    config: TrainConfig,
    train_records: list[Record],
    valid_records: list[Record],
    out: Path,
    console: Console,
    resume: bool = False,
) -> dict:
    """Train, writing the run directory ``out`` as it goes; returns the metrics. With
    ``resume``, go on from the last epoch saved in ``out`` (see ``checkpoint``)."""
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    device = resolve_device(config.device)
    fingerprint = data_fingerprint(train_records, valid_records)
    if resume:
        run = load_run(out, device)
        vocab, task, model = run.vocab, run.task, run.model
    else:
        vocab, task, model = fresh_model(config, train_records, valid_records, out, console, device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    history, best, stale, done, seconds_before, metrics = [], None, 0, 0, 0.0, None
    if resume:
        state = load_checkpoint(out, model, optimizer, rng, device)
        if state["fingerprint"] != fingerprint:
            raise UserError(f"{out}: the training or validation data differ from the ones this run was trained on")
        history, best, stale, done = state["history"], state["best"], state["stale"], state["epoch"]
        seconds_before = state["train_seconds"]
        metrics = {"best_epoch": best["epoch"], "valid": best["valid"], "history": history,
                   "train_seconds": seconds_before}
        if done >= config.epochs:
            raise UserError(f"{out}: already trained for {done} epochs; give --epochs more than {done} to go on")
        write_json(out / "config.json", config.to_dict())
        console.print(f"resuming after epoch {done} (best so far: epoch {best['epoch']})", highlight=False)
    console.print(
        f"training {config.extractor} extractor, {config.encoder} encoder, {task.name}: "
        f"{len(train_records):,} train / {len(valid_records):,} valid documents, "
        f"vocabulary {len(vocab):,}, {sum(p.numel() for p in params):,} trainable parameters, device {device}",
        highlight=False,
    )
    started = time.perf_counter()
    n_batches = (len(train_records) + config.batch_size - 1) // config.batch_size
    for epoch in range(done + 1, config.epochs + 1):
        epoch_start = time.perf_counter()
        model.train()
        total, count = 0.0, 0
        stats: dict[str, torch.Tensor] = {}
        with progress_bar(console) as bar:
            job = bar.add_task(f"epoch {epoch}/{config.epochs}", total=n_batches, status="")
            for step, records in enumerate(length_batches(train_records, config.batch_size, rng=rng), 1):
                batch = make_batch(records, vocab, task, device)
                try:
                    loss, selection = training_step(model, task, batch, optimizer, config.clip)
                except FloatingPointError as err:
                    return diverged(out, console, metrics, f"epoch {epoch}, step {step}: {err}")
                total += loss * len(records)
                count += len(records)
                for key, value in selection.stats.items():
                    stats[key] = stats.get(key, 0.0) + value.detach() * len(records)
                bar.update(job, advance=1, status=f"loss {total / count:.4f}")
        stats = {k: float(v) / count for k, v in stats.items()}
        try:
            valid = evaluate(model, vocab, task, valid_records, batch_size=config.batch_size, device=device)
        except FloatingPointError as err:
            return diverged(out, console, metrics, f"epoch {epoch}, validation: {err}")
        if not math.isfinite(valid["loss"]):
            return diverged(out, console, metrics, f"epoch {epoch}: validation loss {valid['loss']}")
        seconds = time.perf_counter() - epoch_start
        history.append({"epoch": epoch, "train_loss": total / count, "seconds": seconds, **stats,
                        **{f"valid_{k}": v for k, v in valid.items()}})
        improved = best is None or valid["loss"] < best["valid"]["loss"]
        if improved:
            best = {"epoch": epoch, "valid": valid}
            save_weights(out, model)
            stale = 0
        else:
            stale += 1
            if config.lr_decay < 1.0:
                for group in optimizer.param_groups:
                    group["lr"] *= config.lr_decay
        console.print(summary_line(epoch, config.epochs, total / count, valid, stats, seconds) + (" *" if improved else ""),
                      highlight=False, soft_wrap=True)
        train_seconds = seconds_before + time.perf_counter() - started
        metrics = {"best_epoch": best["epoch"], "valid": best["valid"], "history": history,
                   "train_seconds": train_seconds}
        save_checkpoint(out, model, optimizer, rng, device, {"epoch": epoch, "stale": stale, "best": best,
                        "history": history, "train_seconds": train_seconds, "fingerprint": fingerprint})
        write_json(out / "metrics.json", metrics)
        if config.patience > 0 and stale >= config.patience:
            console.print(f"early stop: no improvement in validation loss for {stale} epochs", highlight=False)
            break
        if epoch < config.epochs and out_of_time(config.time_limit, time.perf_counter() - started, history):
            console.print(f"time limit: {config.time_limit:g} minutes would be passed by another epoch; "
                          f"stopping after epoch {epoch}", highlight=False)
            break
    return metrics
