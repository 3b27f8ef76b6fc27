"""The ``rationale`` command: train, predict, explain, evaluate, demo.

Thin by design: commands parse options, call library functions and print with
rich. Progress and logs go to stderr, data to stdout or files. A user error
prints one line and exits with status 2.
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rationale_cli.config import FIELD_TYPES, TrainConfig, resolve, resume_config
from rationale_cli.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Rationale extraction: train select-then-predict models, then predict, explain and evaluate their rationales.",
)

FORMAT_HELP = "auto, beer, beer-annotations, eraser, jsonl, csv, tsv or text"


def stderr() -> Console:
    return Console(stderr=True, soft_wrap=True)


def stdout() -> Console:
    return Console()


def friendly(command):
    """Turn a UserError into one red line on stderr and exit status 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserError as err:
            stderr().print(Text(f"error: {err}", style="bold red"), soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            stderr().print(Text("interrupted", style="bold red"))
            raise typer.Exit(130) from None

    return wrapper


def check_choice(option: str, value: str | None, choices) -> None:
    if value is not None and value not in choices:
        raise UserError(f"{option} {value}: expected one of {', '.join(choices)}")


@app.command()
@friendly
def train(
    data: Optional[str] = typer.Option(None, help="Training data: a file, an ERASER folder, or 'demo'."),
    out: Path = typer.Option(..., help="Run directory to create."),
    format: Optional[str] = typer.Option(None, help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect: 0 appearance, 1 aroma, 2 palate, 3 taste, 4 overall."),
    valid: Optional[str] = typer.Option(None, help="Validation data (default: a split of the training data)."),
    valid_fraction: Optional[float] = typer.Option(None, help="Share held out for validation when --valid is not given [0.1]."),
    task: Optional[str] = typer.Option(None, help="auto, regression or classification [auto]."),
    text_col: Optional[str] = typer.Option(None, help="CSV/TSV text column [text]."),
    label_col: Optional[str] = typer.Option(None, help="CSV/TSV label column [label]."),
    encoder: Optional[str] = typer.Option(None, help="Architecture: rcnn, lstm, cnn, l2x, sst-simple or sst-complex [l2x for simple, sst-complex for topk and corr-topk, rcnn otherwise]."),
    extractor: Optional[str] = typer.Option(None, help="Rationale extractor: full, attention, hardkuma, bernoulli, simple, topk, corr-topk, sparse-attention, sparsemap or topk-sparsemax [full]."),
    selection: Optional[float] = typer.Option(None, help="Share of tokens to select: attention's top share, hardkuma's target, the budget of sparsemap and topk-sparsemax [0.13]."),
    transitions: Optional[float] = typer.Option(None, help="hardkuma: at most this rate of 0/1 transitions per token [no limit]."),
    dependent: Optional[bool] = typer.Option(None, "--dependent/--independent", help="hardkuma: condition each z on the previous ones (Bastings et al. 6.1) [independent]."),
    lagrange_lr: Optional[float] = typer.Option(None, help="hardkuma, bernoulli --lagrangian: step size of the multiplicative Lagrange multiplier updates [0.05]."),
    lagrange_rho: Optional[float] = typer.Option(None, help="hardkuma, bernoulli --lagrangian --exact-penalty: weight of the augmented-Lagrangian term rho/2 (rate - target)^2 [20 for bernoulli, 1 for hardkuma]."),
    sparsity: Optional[float] = typer.Option(None, help="bernoulli: cost per selected token, lambda0 of Lei et al. [0.0003]."),
    coherence: Optional[float] = typer.Option(None, help="bernoulli: cost per 0/1 transition, lambda1 [2 x sparsity]; hardkuma: fixed weight on the expected transitions per document, instead of a --transitions target (the paper used 1e-4 to 4e-4) [none]."),
    baseline: Optional[str] = typer.Option(None, help="bernoulli: REINFORCE baseline none, ema or loo [ema]."),
    samples: Optional[int] = typer.Option(None, help="bernoulli: rationales sampled per document [1]."),
    lagrangian: Optional[bool] = typer.Option(None, "--lagrangian/--fixed-penalty", help="bernoulli: hold the rate at --selection with a multiplier (added to the --sparsity cost: give --sparsity 0 to leave the rate to the multiplier) [fixed]."),
    exact_penalty: Optional[bool] = typer.Option(None, "--exact-penalty/--sampled-penalty", help="bernoulli (independent): differentiate the expected sparsity and coherence costs exactly instead of sampling them through REINFORCE as Lei et al. [exact]."),
    k: Optional[int] = typer.Option(None, "--k", help="simple, topk, corr-topk: rationale size in tokens [10]."),
    top_masks: Optional[int] = typer.Option(None, help="topk-sparsemax: how many of the best masks sparsemax chooses among [10]."),
    pairwise: Optional[bool] = typer.Option(None, "--pairwise/--no-pairwise", help="sparsemap: a learned coherence score for adjacent selected tokens [off]."),
    tau: Optional[float] = typer.Option(None, help="topk, corr-topk: temperature of the relaxation [1.0]."),
    straight_through: Optional[bool] = typer.Option(None, "--straight-through/--relaxed", help="topk, corr-topk: hard sample forward, relaxed gradient [relaxed]."),
    kl_weight: Optional[float] = typer.Option(None, help="simple: weight of KL(p(z | k) || uniform) in the loss [0]."),
    attention: Optional[str] = typer.Option(None, help="sparse-attention: the sparse map, sparsemax, fusedmax (contiguous) or oscarmax (clustered) [sparsemax]."),
    gamma: Optional[float] = typer.Option(None, help="sparse-attention: regularization strength gamma, larger is denser [1.0]."),
    lam: Optional[float] = typer.Option(None, "--lambda", help="sparse-attention: fusion strength of fusedmax / oscarmax [0.1 / 0.01]."),
    embeddings: Optional[str] = typer.Option(None, help="Pretrained vectors, GloVe or word2vec text (.gz too)."),
    embedding_dim: Optional[int] = typer.Option(None, help="Embedding size without --embeddings [200]."),
    fix_embeddings: Optional[bool] = typer.Option(None, "--fix-embeddings/--train-embeddings", help="Keep embeddings fixed [fixed]."),
    hidden_size: Optional[int] = typer.Option(None, help="Encoder hidden size per direction [200]."),
    dropout: Optional[float] = typer.Option(None, help="Dropout [0.1]."),
    min_freq: Optional[int] = typer.Option(None, help="Minimum token frequency for the vocabulary [1]."),
    max_vocab: Optional[int] = typer.Option(None, help="Maximum vocabulary size [unlimited]."),
    epochs: Optional[int] = typer.Option(None, help="Maximum epochs [20]."),
    batch_size: Optional[int] = typer.Option(None, help="Batch size [256]."),
    lr: Optional[float] = typer.Option(None, help="Adam learning rate [0.0004]."),
    weight_decay: Optional[float] = typer.Option(None, help="Weight decay [1e-6]."),
    lr_decay: Optional[float] = typer.Option(None, help="Multiply the learning rate by this when validation loss does not improve [1.0: off]."),
    clip: Optional[float] = typer.Option(None, help="Gradient norm clipping, 0 = off [5.0]."),
    patience: Optional[int] = typer.Option(None, help="Early stopping after this many epochs without improvement, 0 = off [5]."),
    time_limit: Optional[float] = typer.Option(None, help="Minutes of training at most: no epoch is started that the slowest one so far says would end later, 0 = off [0]."),
    seed: Optional[int] = typer.Option(None, help="Random seed [0]."),
    device: Optional[str] = typer.Option(None, help="auto, cpu or cuda [auto]."),
    config: Optional[Path] = typer.Option(None, help="TOML file with any of these options (the command line wins)."),
    force: bool = typer.Option(False, help="Replace an existing run directory."),
    resume: bool = typer.Option(False, help="Go on training the run in --out after its last finished epoch, "
                                "as if it had not stopped; only --epochs, --time-limit, --patience, --device "
                                "and where the data is read from may change."),
):
    """Train a select-then-predict model and write a run directory."""
    given = dict(locals())
    from rationale_cli import datasets
    from rationale_cli.readers import FORMATS
    from rationale_cli.training import split_validation, train_model
    from models.architectures import ARCHITECTURES
    from models.selectors import SELECTORS
    from models.selectors.bernoulli import BASELINES
    from models.selectors.sparse_attention import ATTENTIONS

    options = {k: v for k, v in given.items() if k in FIELD_TYPES}
    cfg = resumed(out, config, force, options) if resume else resolve(config, options)
    if not cfg.data:
        raise UserError("no training data: give --data PATH (or 'demo'), or data = ... in --config")
    check_choice("--format", cfg.format, FORMATS)
    check_choice("--encoder", cfg.encoder, ARCHITECTURES)
    check_choice("--extractor", cfg.extractor, tuple(SELECTORS))
    check_choice("--task", cfg.task, ("auto", "regression", "classification"))
    check_choice("--baseline", cfg.baseline, BASELINES)
    check_choice("--attention", cfg.attention, ATTENTIONS)
    if cfg.baseline == "loo" and cfg.samples < 2:
        raise UserError("--baseline loo needs --samples 2 or more")
    if cfg.extractor == "hardkuma" and cfg.transitions is not None and cfg.coherence is not None:
        raise UserError("hardkuma takes a --transitions target or a fixed --coherence weight, not both")
    if cfg.time_limit < 0:
        raise UserError(f"--time-limit {cfg.time_limit:g}: expected minutes >= 0 (0 = no limit)")
    if (out / "model.safetensors").exists() and not force and not resume:
        raise UserError(f"{out}: a trained run is already there; choose another --out or pass --force")
    console = stderr()
    reader = dict(fmt=cfg.format, aspect=cfg.aspect, text_col=cfg.text_col, label_col=cfg.label_col)
    train_records = datasets.load(cfg.data, "train", **reader)
    if cfg.valid:
        valid_records = datasets.load(cfg.valid, "valid", **reader)
    elif datasets.has_own_validation(cfg.data, cfg.format):
        valid_records = datasets.load(cfg.data, "valid", **reader)
    else:
        train_records, valid_records = split_validation(train_records, cfg.valid_fraction)
    metrics = train_model(cfg, train_records, valid_records, out, console, resume=resume)
    console.print(f"best epoch {metrics['best_epoch']}; run saved to {out}", highlight=False)
    stdout().print(metrics_table(metrics["valid"], f"validation ({len(valid_records):,} documents)"))


def resumed(out: Path, config: Optional[Path], force: bool, options: dict) -> TrainConfig:
    """The options of the run in ``out`` to go on with (``train --resume``)."""
    from rationale_cli.checkpoint import RESUME
    from rationale_cli.rundir import read_json, require_run_files

    if config is not None or force:
        raise UserError("--resume goes on with the run's own options and files; it takes no --config or --force")
    if not (out / RESUME).is_file():
        raise UserError(f"{out}: nothing to resume (no {RESUME}; runs save it after each epoch)")
    require_run_files(out)
    return resume_config(read_json(out / "config.json"), options, str(out / "config.json"))


def metrics_table(metrics: dict, title: str) -> Table:
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    order = ["mse", "mae", "accuracy", "macro_f1", "selection_rate", "precision", "recall", "f1",
             "precision_macro", "recall_macro", "f1_macro", "transitions", "documents", "documents_with_gold"]
    for key in order:
        if key not in metrics:
            continue
        value = metrics[key]
        if value is None:
            shown = "-"
        elif key in ("mse", "mae"):
            shown = f"{value:.5f}"
        elif key in ("documents", "documents_with_gold"):
            shown = f"{value:,}"
        elif key == "transitions":
            shown = f"{value:.2f}"
        else:
            shown = f"{100 * value:.1f}%"
        table.add_row(key, shown)
    return table


def load_for_inference(run: Path, device: str):
    from rationale_cli.devices import resolve_device
    from rationale_cli.rundir import load_run

    dev = resolve_device(device)
    return load_run(run, dev), dev


@app.command()
@friendly
def predict(
    run: Path = typer.Argument(..., help="Run directory from `rationale train`."),
    input: str = typer.Argument(..., help="Documents: text (one per line), JSONL, CSV/TSV, beer or ERASER."),
    out: Path = typer.Option(..., "--out", "-o", help="Output JSONL file."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect (default: the run's)."),
    text_col: Optional[str] = typer.Option(None, help="CSV/TSV text column (default: the run's)."),
    batch_size: int = typer.Option(64, help="Documents per batch."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
):
    """Write one JSON line per document: prediction, rationale spans, selected tokens, token scores."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from rationale_cli import datasets
    from rationale_cli.atomic import atomic_path
    from rationale_cli.inference import run as run_model
    from rationale_cli.output import prediction_json

    loaded, dev = load_for_inference(run, device)
    cfg = loaded.config
    records = datasets.stream(input, "test", fmt=format, aspect=aspect if aspect is not None else cfg.aspect,
                              text_col=text_col or cfg.text_col, label_col=None)
    count = 0
    with atomic_path(out) as tmp, open(tmp, "w", encoding="utf-8") as handle, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed:,} documents"),
        TimeElapsedColumn(), console=stderr(), transient=True,
    ) as bar:
        job = bar.add_task("predicting", total=None)
        for result in run_model(loaded.model, loaded.vocab, loaded.task, records, batch_size=batch_size, device=dev):
            handle.write(json.dumps(prediction_json(result), ensure_ascii=False) + "\n")
            count += 1
            bar.update(job, advance=1)
    stderr().print(f"wrote {count:,} predictions to {out}", highlight=False)


@app.command()
@friendly
def explain(
    run: Path = typer.Argument(..., help="Run directory from `rationale train`."),
    text: Optional[str] = typer.Argument(None, help="A text to explain."),
    input: Optional[str] = typer.Option(None, "--input", "-i", help="Documents to explain (a file, folder or 'demo')."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect (default: the run's)."),
    limit: int = typer.Option(5, help="Explain at most this many documents from --input, 0 = all."),
    html: Optional[Path] = typer.Option(None, help="Also write a self-contained HTML page here."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
):
    """Show documents with their rationale highlighted (against gold where present)."""
    from itertools import islice

    from rationale_cli import datasets
    from rationale_cli.atomic import write_text_atomic
    from rationale_cli.inference import run as run_model
    from rationale_cli.records import Record
    from rationale_cli.render import legend, render_html, render_terminal
    from rationale_cli.tokenize import tokenize

    if (text is None) == (input is None):
        raise UserError("give either a TEXT to explain or --input FILE (not both)")
    loaded, dev = load_for_inference(run, device)
    cfg = loaded.config
    if text is not None:
        tokens, offsets = tokenize(text)
        if not tokens:
            raise UserError("the text to explain is empty")
        records = iter([Record(id="text", tokens=tokens, text=text, offsets=offsets)])
    else:
        records = datasets.stream(input, "test", fmt=format, aspect=aspect if aspect is not None else cfg.aspect,
                                  text_col=cfg.text_col, label_col=None)
        if limit > 0:
            records = islice(records, limit)
    results = list(run_model(loaded.model, loaded.vocab, loaded.task, records, device=dev))
    console = stdout()
    console.print(legend(any(r.record.rationale is not None for r in results)))
    items = []
    for result in results:
        shown = format_prediction(result.prediction)
        gold = None if result.record.label is None else format_prediction(result.record.label)
        console.print(render_terminal(result.record, result.selected, shown, gold_label=gold))
        items.append({"record": result.record, "selected": result.selected, "scores": result.scores,
                      "prediction": shown, "gold_label": gold})
    if html is not None:
        write_text_atomic(html, render_html(items, title=f"Rationales of {run.name}"))
        stderr().print(f"wrote {html}", highlight=False)


def format_prediction(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


@app.command()
@friendly
def evaluate(
    run: Path = typer.Argument(..., help="Run directory from `rationale train`."),
    data: str = typer.Argument(..., help="Labelled documents, with gold rationales for precision (or 'demo')."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    aspect: Optional[int] = typer.Option(None, help="Beer aspect (default: the run's)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the metrics as JSON here."),
    batch_size: int = typer.Option(64, help="Documents per batch."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
):
    """Task metric, selection rate and token precision/recall/F1 against gold rationales."""
    from rationale_cli import datasets
    from rationale_cli.inference import evaluate as evaluate_records
    from rationale_cli.rundir import write_json

    loaded, dev = load_for_inference(run, device)
    cfg = loaded.config
    records = datasets.load(data, "test", fmt=format, aspect=aspect if aspect is not None else cfg.aspect,
                            text_col=cfg.text_col, label_col=cfg.label_col)
    unlabelled = sum(r.label is None for r in records)
    if unlabelled:
        raise UserError(f"{data}: {unlabelled} document(s) have no label; evaluate needs a label or score per document")
    metrics = evaluate_records(loaded.model, loaded.vocab, loaded.task, records, batch_size=batch_size, device=dev)
    stdout().print(metrics_table(metrics, f"{run.name} on {data}"))
    if json_out is not None:
        write_json(json_out, metrics)
        stderr().print(f"wrote {json_out}", highlight=False)


@app.command()
@friendly
def demo(
    out: Optional[Path] = typer.Option(None, help="Keep the demo's run directory here (default: a temporary one)."),
    extractor: str = typer.Option("hardkuma", help="Extractor to train."),
    encoder: Optional[str] = typer.Option(None, help="Architecture (see train) [the extractor's default]."),
    epochs: int = typer.Option(12, help="Training epochs."),
    seed: int = typer.Option(0, help="Random seed."),
):
    """Train on a synthetic review corpus, evaluate against its gold rationales, explain a few reviews."""
    workdir = out or Path(tempfile.mkdtemp(prefix="rationale-demo-"))
    try:
        stderr().rule("1/3  train on the synthetic beer-like corpus (aspect: appearance, select 20%)")
        options = {**{name: None for name in FIELD_TYPES}, **DEMO_OPTIONS}
        options.update(extractor=extractor, encoder=encoder, epochs=epochs, seed=seed)
        train(out=workdir, config=None, force=out is None, resume=False, **options)
        stderr().rule("2/3  evaluate on the test split")
        evaluate(run=workdir, data="demo", format="auto", aspect=None, json_out=None, batch_size=64, device="auto")
        stderr().rule("3/3  explain three test reviews")
        explain(run=workdir, text=None, input="demo", format="auto", aspect=None, limit=3, html=None, device="auto")
    finally:
        if out is None:
            shutil.rmtree(workdir, ignore_errors=True)


DEMO_OPTIONS = dict(data="demo", selection=0.2, transitions=0.06, dependent=False, embedding_dim=50,
                    hidden_size=64, batch_size=20, lr=0.002, patience=0)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
