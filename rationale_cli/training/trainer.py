"""A training run from its configuration: the data, the vocabulary, task and model, then
:func:`rationale_cli.training.loop.fit` with the callbacks the run asks for (its directory, a
console, a time limit). ``rationale train`` and :func:`rationale_cli.api.train` both
come here; with no directory and no console nothing is written or printed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from rich.console import Console

from rationale_cli.data import sources
from rationale_cli.data.batching import balanced_size, documents_per_batch, model_length, model_tokens
from rationale_cli.data.records import Record
from rationale_cli.data.vectors import load_vectors
from rationale_cli.data.vocab import Vocab
from rationale_cli.models.architectures import LINEAR
from rationale_cli.models.model import RationaleModel
from rationale_cli.models.ranks import world_size
from rationale_cli.runs.config import TrainConfig
from rationale_cli.runs.flags import flag_of
from rationale_cli.runs.pretrained import load_pretrained
from rationale_cli.runs.reference import REFERENCE_SUPPORT, Reference, fit_reference
from rationale_cli.runs.run_directory import (
    COMPLETE,
    FILES,
    REFERENCE,
    WEIGHTS,
    build_model,
    load_reference,
    load_run,
    read_json,
    save_config,
    save_reference,
    save_run,
    save_weights,
    write_json,
)
from rationale_cli.runs.task import Task, infer_task
from rationale_cli.runtime.allocator import keep_freed_memory
from rationale_cli.runtime.devices import resolve_device
from rationale_cli.runtime.errors import UserError, plural
from rationale_cli.runtime.outputs import is_run_directory
from rationale_cli.runtime.signals import writing
from rationale_cli.training.callbacks import ConsoleReport, RunDirectory, TimeLimit, encoders_in_words
from rationale_cli.training.checkpoint import RESUME, data_fingerprint, load_checkpoint
from rationale_cli.training.distributed import local_device, rank
from rationale_cli.training.endings import budget_warning, chance, ending_warnings
from rationale_cli.training.linear_predictor import fit_linear, from_reference, reads_with_reference
from rationale_cli.training.loop import Callback, Diverged, FitState, fit
from rationale_cli.training.supervision import supervised_share, with_gold
from rationale_cli.training.support import copy_selector, fill_saliency, supported


def split_validation(records: list[Record], fraction: float) -> tuple[list[Record], list[Record]]:
    """A random ``fraction`` of the training records held out for validation: a fixed
    shuffle, so every seed and extractor sees the same split."""
    order = list(records)
    random.Random(0).shuffle(order)
    n_valid = max(1, int(round(len(order) * fraction)))
    return order[n_valid:], order[:n_valid]


def training_data(config: TrainConfig) -> tuple[list[Record], list[Record]]:
    """The training and validation documents: ``valid`` when given, else the data's own
    validation split (demo, ERASER), else a held-out share of the training data."""
    reader = dict(fmt=config.format, aspect=config.aspect, text_col=config.text_col, label_col=config.label_col,
                  id_field=config.id_col, query=config.query, rationale_label=config.rationale_label,
                  spans_key=config.spans_key)
    train = sources.load(config.data, "train", **reader)
    if config.valid:
        return train, sources.load(config.valid, "valid", **reader)
    if sources.has_own_validation(config.data, config.format):
        return train, sources.load(config.data, "valid", **reader)
    return split_validation(train, config.valid_fraction)


@dataclass
class Trained:
    """A trained model with what it needs to be used, and how training went (``warnings``:
    what looks wrong with its result, :func:`~rationale_cli.training.endings.ending_warnings`)."""

    config: TrainConfig
    vocab: Vocab
    task: Task
    model: RationaleModel
    state: FitState
    reference: Reference | None = None  # the full-text reference, unless trained without it

    @property
    def metrics(self) -> dict:
        return self.state.metrics()

    @property
    def warnings(self) -> list[str]:
        return self.state.warnings


def whole_number_classes(records: list[Record]) -> bool:
    """Whether every label is a whole number (star ratings, say), which ``auto`` reads as classes."""
    labels = [r.label for r in records if r.label is not None]
    return bool(labels) and all(isinstance(x, str) and x.lstrip("-").isdigit() for x in labels)


def new_model(config: TrainConfig, train: list[Record], valid: list[Record], console: Console | None,
              device: torch.device, selector=None) -> tuple[TrainConfig, Vocab, Task, RationaleModel, Reference | None]:
    """The task (every label checked), vocabulary and a new model (with ``selector`` as its
    extractor when given); the configuration returned holds the dimension of the
    ``embeddings`` when they were given. With ``--support reference``, also the full-text
    reference fitted here, whose saliency the model's fixed selector holds; with the ``linear``
    predictor and no support, the reference fitted here that the predictor is."""
    task = infer_task([r.label for r in train], config.task)
    task.targets(train)
    task.targets(valid)
    if console is not None and config.task == "auto" and whole_number_classes(train):
        console.print(f"note: the labels are whole numbers, read as {task.outputs} classes "
                      f"({', '.join(task.labels)}); for a regression, give them as 'score' values in [0, 1] "
                      "(star ratings rescaled, e.g. (stars - 1) / 4)", highlight=False)
    if console is not None and (whole := budget_warning(config, train)):
        console.print(f"warning: {whole}", style="yellow", highlight=False)
    support = reference = None
    if config.support == REFERENCE_SUPPORT or reads_with_reference(config):  # the reference selects, or reads
        reference = run_reference(config, train, valid, task, None, console, False)
    if config.support and reference is None:  # two-stage: the support run's vocabulary and selector side
        config, support = supported(config)
        vocab = support.vocab
    else:
        vocab = Vocab.build((model_tokens(r) for r in train), min_freq=config.min_freq, max_size=config.max_vocab)
    vectors = None
    if config.embeddings:
        vectors, info = load_vectors(config.embeddings, vocab)
        config = dataclasses.replace(config, embedding_dim=info["dim"])
        if console is not None:
            console.print(f"embeddings: {info['found']:,} of {info['vocab']:,} vocabulary words found "
                          f"({100 * info['coverage']:.1f}%), dimension {info['dim']}", highlight=False)
    pretrained = load_pretrained(config.pretrained, vocab.itos) if config.pretrained else None
    try:
        model = build_model(config, len(vocab), task, vectors, selector, pretrained).to(device)
    except ValueError as err:
        raise UserError(f"--extractor {config.extractor} --encoder {config.encoder}: {err}") from None
    if support is not None:
        copy_selector(model, support)
        source = f"the selector of {support.path} ({config.extractor}, {config.selector_encoder} encoder)"
    if reference is not None and config.support:
        fill_saliency(model, reference, vocab)
        source = "the full-text reference's saliency"
    elif reference is not None:
        from_reference(model.predictor_encoder, reference, vocab, task)
    if config.support and console is not None:
        decoding = config.support_decoding()
        console.print(f"support: {source}, fixed, decoding at {decoding.rate}"
                      f"{' in sentences' if decoding.sentences else ''}", highlight=False)
    try:
        model.freeze_transformers(config.freeze_layers)
    except ValueError as err:
        raise UserError(f"--freeze-layers {config.freeze_layers}: {err}") from None
    return config, vocab, task, model, reference


def parameter_groups(model: RationaleModel, config: TrainConfig) -> list[dict]:
    """The trainable parameters in one group, or in one group per learning rate: the predictor's
    (its encoder and output layer) at ``predictor_lr`` times the rate of its side, the rest
    (selector, its encoder, the word embeddings) at that rate (decoupled rates: Liu et al.,
    2023, "Decoupled Rationalization with Asymmetric Learning Rates"), where a transformer's
    own weights learn at ``pretrained_lr`` and every other weight at ``lr``. MGR's other
    generators learn at a multiple of their side's rate each
    (:meth:`~rationale_cli.models.model.RationaleModel.generator_learning_rates`)."""
    predictor = {id(p) for p in model.predictor_parameters()}
    pretrained = {id(p) for p in model.transformer_parameters()}
    multiples = {id(p): times for params, times in model.generator_learning_rates() for p in params}
    groups: dict[float, list] = {}
    for p in model.parameters():
        if p.requires_grad:
            base = config.pretrained_lr if config.pretrained_lr is not None and id(p) in pretrained else config.lr
            times = config.predictor_lr if id(p) in predictor else multiples.get(id(p), 1.0)
            groups.setdefault(base * times, []).append(p)
    return [{"params": params} if lr == config.lr else {"params": params, "lr": lr} for lr, params in groups.items()]


def start_run_directory(out: Path, config: TrainConfig, vocab: Vocab, task: Task) -> None:
    """Everything of a new run directory but the weights and metrics; the files of a run it
    replaces are removed, so none of them can be mixed with these (a stop signal waits)."""
    with writing():
        for name in (WEIGHTS, RESUME, "metrics.json", *REFERENCE):
            (out / name).unlink(missing_ok=True)
        save_run(out, config, vocab, task, world_size())


def run_reference(config: TrainConfig, train: list[Record], valid: list[Record], task: Task, out: Path | None,
                  console: Console | None, resume: bool, fitted: Reference | None = None) -> Reference | None:
    """The full-text reference of the run (:mod:`rationale_cli.runs.reference`): fitted on
    its training documents (or ``fitted`` already, not reported again) and saved in ``out``, or
    the one saved there when it resumes; None with ``--no-reference``."""
    if not config.reference:
        return None
    if resume and out is not None and (out / REFERENCE[0]).is_file():
        return load_reference(out)
    reference = fitted if fitted is not None else fit_reference(train, valid, task, balanced=config.balance_classes)
    if out is not None:
        with writing():
            save_reference(out, reference)
    if console is not None and fitted is None:
        valid_score = reference.valid
        console.print(f"full-text reference: {reference.setting}, chosen on validation: {valid_score['metric']} "
                      f"{valid_score['value']:.4g}", highlight=False)
    return reference


def resume_state(out: Path, config: TrainConfig, model: RationaleModel, optimizer, rng: random.Random,
                 device: torch.device, fingerprint: str) -> FitState:
    """The state saved after the last finished epoch of the run in ``out``, restored into
    ``model``, ``optimizer`` and ``rng``; ``model`` must hold the run's best weights."""
    trained_by = read_json(out / "config.json").get("processes", 1)
    if trained_by != world_size():
        raise UserError(f"{out}: trained on {trained_by} process(es); resume it on as many (now {world_size()})")
    best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    saved = load_checkpoint(out, model, optimizer, rng, device, rank())
    if saved["fingerprint"] != fingerprint:
        raise UserError(f"{out}: the training or validation data differ from the ones this run was trained on")
    if saved["epoch"] >= config.epochs:
        raise UserError(f"{out}: already trained for {plural(saved['epoch'], 'epoch')}; give --epochs more than "
                        f"{saved['epoch']} to go on")
    return FitState(epoch=saved["epoch"], history=saved["history"], best=saved["best"], stale=saved["stale"],
                    train_seconds=saved["train_seconds"], best_weights=best_weights)


def train_run(
    config: TrainConfig,
    train: list[Record],
    valid: list[Record],
    out: Path | None = None,
    console: Console | None = None,
    *,
    resume: bool = False,
    verbose: bool = False,
    callbacks: Sequence[Callback] = (),
    selector=None,
) -> Trained:
    """Train as ``config`` says. With ``out``, write the run directory as training goes
    (with ``resume``, go on after the last epoch saved there, see ``checkpoint``); with
    ``console``, report progress there (every training statistic with ``verbose``);
    ``selector`` replaces the configured extractor (see :func:`new_model`). The model
    returned holds its best epoch's weights. Every process of a distributed run calls
    this (:mod:`rationale_cli.training.distributed`): rank 0 writes and reports. With rationale
    supervision, the documents whose gold is used are chosen first (:mod:`rationale_cli.training.supervision`)
    and counted in the configuration. A ``linear`` predictor on a support is fitted in one pass
    (:mod:`rationale_cli.training.linear_predictor`), not trained by epochs; without one it is the
    full-text reference, fixed, and only the selector side learns."""
    linear = config.predictor_encoder == LINEAR and bool(config.support)  # fitted in one pass
    if resume and linear:
        raise UserError(f"{out}: its linear predictor is fitted in one pass, so there is nothing to resume; "
                        "train it again (with --force)")
    golden = len(with_gold(train)) if config.supervise else 0
    if config.supervise and selector is not None and not getattr(selector, "supervised_by", ""):
        raise UserError(f"--supervise: the selector {getattr(selector, '__name__', type(selector).__name__)} says "
                        "nothing per token (its supervised_by is empty), so it cannot be supervised")
    if config.supervise:
        train, supervised = supervised_share(train, config.supervise_fraction, config.seed)
        config = dataclasses.replace(config, supervised=supervised)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    device = local_device(resolve_device(config.device))
    fingerprint = data_fingerprint(train, valid)
    writer = rank() == 0  # rank 0 writes the run directory and reports
    if resume:
        loaded = load_run(out, device, config=config, complete=False)  # its options as resume_config read them
        vocab, task, model, fitted = loaded.vocab, loaded.task, loaded.model, None
    else:
        config, vocab, task, model, fitted = new_model(config, train, valid, console if writer else None, device,
                                                       selector)
    epoch_size = balanced_size(train) if config.balance_classes else None  # a score's error before anything is written
    if out is not None and writer and not resume:
        start_run_directory(out, config, vocab, task)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = None if linear else torch.optim.Adam(parameter_groups(model, config), lr=config.lr,
                                                     weight_decay=config.weight_decay)
    if config.separate_guidance and world_size() > 1:  # its two losses are routed outside DDP's gradient hooks
        raise UserError(f"{flag_of('separate_guidance')} trains in one process; run it without torchrun")
    if world_size() > 1:  # the same initial weights everywhere, then each process's own random stream
        torch.manual_seed(config.seed + rank() * 2**32)
    state = resume_state(out, config, model, optimizer, rng, device, fingerprint) if resume else None
    if resume and writer:
        save_config(out, config, world_size())
    hooks = []
    if writer and out is not None and not linear:
        hooks.append(RunDirectory(out, fingerprint, config.save_epochs))
    if writer and console is not None:
        if state is not None:
            console.print(f"resuming after epoch {state.epoch} (best so far: epoch {state.best['epoch']})",
                          highlight=False)
        processes = f", {world_size()} processes" if world_size() > 1 else ""
        extractor = config.extractor if selector is None else getattr(selector, "__name__", type(selector).__name__)
        encoders = encoders_in_words(config)
        learns = "the predictor fitted in one pass" if linear else \
            f"{sum(p.numel() for p in params):,} trainable parameters"
        balanced = f" (epochs of {epoch_size:,}, classes balanced)" if epoch_size else ""
        console.print(f"training {extractor} extractor, {encoders}, {task.name}: "
                      f"{len(train):,} train{balanced} / {len(valid):,} valid documents, vocabulary {len(vocab):,}, "
                      f"{learns}, device {device}{processes}",
                      highlight=False)
        if config.supervise:
            console.print(f"rationale supervision: the gold of {config.supervised:,} of the {golden:,} training "
                          f"documents with gold, weight {config.supervise:g}", highlight=False)
        longest = max(model_length(record) for record in train)
        if (held := documents_per_batch(longest, model.table_bytes)) < config.batch_size:
            console.print(f"long documents: the {extractor} extractor's tables hold a batch of the longest ({longest:,} "
                          f"tokens) to {plural(held, 'document')}, under --batch-size {config.batch_size}",
                          highlight=False)
        hooks.append(ConsoleReport(console, verbose))
    reference = run_reference(config, train, valid, task, out, console, resume, fitted) if writer else None
    if writer and config.time_limit > 0:
        hooks.append(TimeLimit(config.time_limit))
    if linear:
        state = fit_linear(model, vocab, task, train, valid, batch_size=config.batch_size, device=device,
                           callbacks=[*hooks, *callbacks])
        if out is not None and writer:
            with writing():
                save_weights(out, model)
        if writer and console is not None:
            console.print(f"linear predictor: {state.history[0]['predictor']}, chosen on the validation "
                          "rationales", highlight=False)
    else:
        state = trained(model, vocab, task, train, valid, optimizer, config, rng, [*hooks, *callbacks], state, out)
    target = config.rate_target() if selector is None else None
    level = chance(task, train, valid)
    state.best["valid"].update(level.columns())  # the chance level of the table is the warning's
    kept = next((h for h in state.history if h.get("epoch") == state.best["epoch"]), {})
    state.warnings = ending_warnings(config, state.best["valid"], level, target, kept.get("selected"))
    if out is not None and rank() == 0:
        with writing():
            write_json(out / "metrics.json", state.metrics())
    return Trained(config, vocab, task, model, state, reference)


def trained(model: RationaleModel, vocab: Vocab, task: Task, train: list[Record], valid: list[Record], optimizer,
            config: TrainConfig, rng: random.Random, callbacks: list[Callback], state: FitState | None,
            out: Path | None) -> FitState:
    """:func:`~rationale_cli.training.loop.fit` with the run's options; one error line when it
    diverges before any epoch finished."""
    try:
        return fit(model, vocab, task, train, valid, optimizer, epochs=config.epochs, batch_size=config.batch_size,
                   clip=config.clip, lr_decay=config.lr_decay, lr_final=config.lr_final,
                   lr_decay_epochs=config.lr_decay_epochs, patience=config.patience, guidance=config.guidance,
                   separate=config.separate_guidance, balance=config.balance_classes,
                   supervise=config.supervise, keep=config.keep_rule(), rng=rng, callbacks=callbacks, state=state)
    except Diverged as err:
        where = f"{out}: " if out is not None else ""
        raise UserError(f"{where}training diverged at {err}, before any epoch finished, so no model was saved; "
                        "try a lower --lr") from None


def train_config(config: TrainConfig, out: Path | None = None, console: Console | None = None, *,
                 force: bool = False, resume: bool = False, verbose: bool = False, selector=None,
                 callbacks: Sequence[Callback] = (), data: tuple[list[Record], list[Record]] | None = None) -> Trained:
    """Read the data ``config`` names (or take ``data``, the training and validation documents
    read already) and train (:func:`train_run`, with ``callbacks`` beside the run's own); a run
    directory ``out`` is written holding its lock (by rank 0 of a distributed run), and never over a
    trained run without ``force``, nor into a folder that holds anything but a run of ours (the
    user's own files stay: with ``force`` only the run's files are written there)."""
    from rationale_cli.runtime.lock import run_lock

    keep_freed_memory()  # each step frees and allocates the same large tensors again
    extra = dict(verbose=verbose, selector=selector, callbacks=callbacks)
    if out is None:
        return train_run(config, *(data or training_data(config)), None, console, **extra)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is a file; --out names the run directory to create")
    with run_lock(out) if rank() == 0 else contextlib.nullcontext():  # a failure removes folders it made
        if (out / WEIGHTS).exists() and not force and not resume:
            kind = "a trained run" if (out / COMPLETE).exists() else "a run that stopped while writing its files"
            raise UserError(f"{out}: {kind} is already there; choose another --out, continue it with --resume, "
                            "or pass --force to replace it")
        if out.is_dir() and not resume and not is_run_directory(out):
            check_users_files(out, force)
        return train_run(config, *(data or training_data(config)), out, console, resume=resume, **extra)


# what a run directory may hold: a user's file of one of these names would be replaced
RUN_NAMES = (*FILES, *REFERENCE, COMPLETE, RESUME, "transformer", "epochs")


def check_users_files(out: Path, force: bool) -> None:
    """A folder ``out`` that is not a run of ours holds the user's files: refused without
    ``force``, and even with it where one has the name of a run's file (it would be replaced)."""
    names = sorted(path.name for path in out.iterdir())
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    if names and not force:
        raise UserError(f"{out}: holds files that are not a run's ({shown}); choose a new or empty folder "
                        "for --out, or pass --force to write the run's files beside them")
    clash = [name for name in names if name in RUN_NAMES]
    if clash:
        raise UserError(f"{out}: holds {', '.join(clash)}, not a run's, which the run's files would replace; "
                        "move them out, or choose a new or empty folder for --out")
