"""The report on training runs: one HTML page with each run's training curves, the
precision of its rationales by their size against gold, its configuration and
metrics, and example documents highlighted; for a study folder of ``rationale tune``, the
study (:mod:`rationale_cli.output.study_report`) and its best trial's run.

The precision curve ranks each document's tokens by the run's selection scores
and keeps the top share ``s`` of them (``round(s * n)`` tokens, at least one, as a
``--budget`` share counts them; ties go to the earlier token), for ``s`` from 1%
to 60%, so extractors are compared at equal size whatever size they were trained for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Sequence

import torch
from matplotlib.figure import Figure

from rationale_cli.data import sources
from rationale_cli.metrics.scores import RationaleScores
from rationale_cli.models.budget import Budget, top_k_mask
from rationale_cli.output.plots import Curve, Panel, Series, precision_size_figure, save_png, svg, training_figure
from rationale_cli.output.render import document_item, escape, html_document, html_legend, html_page, html_summary
from rationale_cli.output.study_report import study_figure, study_section
from rationale_cli.runs.inference import Output, run_model
from rationale_cli.runs.reference import main_metric
from rationale_cli.runs.run_directory import Run, read_json
from rationale_cli.runtime.atomic import write_text_atomic
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.outputs import new_output
from rationale_cli.runtime.progress import Progress, counted, no_progress
from rationale_cli.training.trainer import training_data
from rationale_cli.tuning.leaderboard import is_study, read_leaderboard

SHARES = tuple(i / 100 for i in range(1, 61))
SIZE_PLOT = "precision-size"


class Spec(NamedTuple):
    """A training-curve panel: its title, the history keys it plots (with their legend
    names), whether they are shares, and the config key holding their target."""

    title: str
    keys: tuple[tuple[str, str], ...]
    percent: bool = False
    target: str | None = None


PANELS = (
    Spec("loss", (("train_loss", "training objective (with penalties)"), ("valid_loss", "validation task loss"))),
    Spec("validation error", (("valid_mse", "MSE"), ("valid_mae", "MAE"))),
    Spec("validation accuracy", (("valid_accuracy", "accuracy"), ("valid_macro_f1", "macro F1")), True),
    Spec("selection rate", (("selected", "sampled (train)"), ("expected_l0", "expected (train)"),
                            ("exact_one", "exactly 1 (train)"), ("valid_selection_rate", "decoded (validation)")),
         True, "budget"),
    Spec("validation rationale vs gold", (("valid_precision", "precision"), ("valid_recall", "recall"),
                                          ("valid_f1", "F1")), True),
    Spec("transitions per token", (("expected_transitions", "expected (train)"), ("transitions", "sampled (train)")),
         True, "transitions"),
    Spec("Lagrange multipliers", (("lambda_l0", "λ selection rate"), ("lambda_transitions", "λ transitions"))),
    Spec("support size", (("support", "masks in the support (train)"),)),
    Spec("KL to uniform", (("kl_uniform", "KL (train)"),)),
)
TEST_KEYS = ("selection_rate", "precision", "recall", "f1", "transitions", "documents_with_gold")

CSS = """
body { max-width: 75em; }
svg.plot { display: block; width: 100%; height: auto; margin: .5em 0; }
svg.plot#precision-size { max-width: 52em; }
section.run { border-top: 3px solid #333; margin-top: 2.5em; }
.tables { display: flex; flex-wrap: wrap; gap: 0 2em; align-items: flex-start; }
.tables h3, h3 { font-size: 1em; margin: .8em 0 0; }
table.summary { font-size: .9em; }
p.note { color: #444; }
"""


@dataclass
class SizeCurve:
    """Micro token precision, recall and the share of tokens selected at each test-time share."""

    shares: list[float]
    rates: list[float]
    precisions: list[float]
    recalls: list[float | None]


@dataclass
class RunSummary:
    label: str
    slug: str
    path: Path
    config: dict
    metrics: dict
    data: str
    examples: list[dict] = field(default_factory=list)
    test: dict | None = None
    gold_share: float | None = None
    curve: SizeCurve | None = None
    note: str = ""
    reference: dict | None = None  # the full-text reference beside the model on the documents


@dataclass
class Plot:
    """A figure, the attributes of its inline ``<svg>`` (its id first) and its PNG file name."""

    figure: Figure
    attributes: dict[str, str]
    file: str


def precision_by_size(scores: Sequence[Sequence[float]], gold: Sequence[Sequence[int]],
                      shares: Sequence[float] = SHARES) -> SizeCurve:
    """Keep each document's top ``share`` of tokens by score (see the module docstring) and
    score the kept tokens against ``gold`` (0/1 per token), micro over all documents."""
    width = max((len(row) for row in scores), default=0)
    values, golds, mask = (torch.zeros(len(scores), width, dtype=torch.float64) for _ in range(3))
    for i, (row, gold_row) in enumerate(zip(scores, gold)):
        values[i, :len(row)] = torch.tensor(row, dtype=torch.float64)
        golds[i, :len(row)] = torch.tensor(gold_row, dtype=torch.float64)
        mask[i, :len(row)] = 1.0
    tokens, gold_tokens = mask.sum().item(), golds.sum().item()
    curve = SizeCurve([], [], [], [])
    for share in shares:
        kept = top_k_mask(values, mask, Budget(share=share).tokens(mask))
        count, hits = kept.sum().item(), (kept * golds).sum().item()
        curve.shares.append(share)
        curve.rates.append(count / tokens)
        curve.precisions.append(hits / count)
        curve.recalls.append(hits / gold_tokens if gold_tokens else None)
    return curve


def labels(paths: Sequence[Path]) -> list[str]:
    """A name per run: its folder's name, with the parent folder where two share a name,
    numbered where that is not enough."""
    names = [path.resolve().name for path in paths]
    longer = ["/".join(path.resolve().parts[-2:]) if names.count(name) > 1 else name
              for path, name in zip(paths, names)]
    return [f"{name} #{longer[:i].count(name) + 1}" if longer.count(name) > 1 else name
            for i, name in enumerate(longer)]


def slugs(names: Sequence[str]) -> list[str]:
    """Distinct ids and file names for the runs: letters, digits, ``_`` and ``-``."""
    out: list[str] = []
    for name in names:
        base = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "run"
        slug, number = base, 1
        while slug in out:
            number += 1
            slug = f"{base}-{number}"
        out.append(slug)
    return out


def read_metrics(path: Path) -> dict:
    """A run's ``metrics.json``, with the kept epoch and the history of every epoch."""
    file = path / "metrics.json"
    if not file.is_file():
        raise UserError(f"{file}: missing; the run has not finished an epoch")
    metrics = read_json(file)
    history = metrics.get("history")
    if not isinstance(metrics.get("best_epoch"), int) or not isinstance(metrics.get("valid", {}), dict) or \
            not isinstance(history, list) or not all(isinstance(row, dict) for row in history):
        raise UserError(f"{file}: expected best_epoch and a history of epochs, as `rationale train` writes them")
    return metrics


def summarize(run: Run, label: str, slug: str, *, data: str | None = None, fmt: str | None = None,
              aspect: int | None = None, examples: int = 3, batch_size: int = 64, device="cpu",
              progress: Progress = no_progress) -> RunSummary:
    """Read ``run``'s metrics and run its model over the test split of ``data``; by default
    the run's own held-out documents: the test split of its data where that has one
    (demo, ERASER), else its validation documents (``fmt`` and ``aspect`` by default the
    run's for its own data). ``progress`` reports the documents decoded."""
    cfg = run.config
    try:
        if data is None and not sources.has_own_validation(cfg.data, cfg.format):  # nor a test split
            source, records = f"{cfg.valid or cfg.data} (validation documents)", training_data(cfg)[1]
        else:
            source, fmt = (cfg.data, fmt or cfg.format) if data is None else (data, fmt or "auto")
            records = list(sources.run_documents(source, cfg, fmt=fmt, aspect=aspect))
    except UserError as err:
        raise UserError(f"{run.path}: reading its documents: {err} (give --data)") from None
    with progress(len(records), doing=f"decoding for {label}") as advance:
        outputs = list(counted(run_model(run.model, run.vocab, run.task, records, batch_size=batch_size,
                                         device=device), advance))
    summary = RunSummary(label, slug, run.path, cfg.to_dict(), read_metrics(run.path), source,
                         examples=[document_item(out) for out in outputs[:examples]])
    _measure(summary, [out for out in outputs if out.record.rationale is not None])
    summary.reference = beside_reference(run, outputs)
    return summary


def beside_reference(run: Run, outputs: Sequence[Output]) -> dict | None:
    """The run's full-text reference and its model scored on the labelled documents of
    ``outputs`` (None without a reference or labels)."""
    labelled = [out for out in outputs if out.record.label is not None]
    if run.reference is None or not labelled:
        return None
    scores = run.task.scores()
    for out in labelled:
        scores.add(out.prediction, out.record.label)
    value = scores.result()[main_metric(run.task)]
    return run.reference.compared([out.record for out in labelled], run.task, value)


def _measure(summary: RunSummary, outputs: list[Output]) -> None:
    """The operating point's scores and the precision curve, from the documents with gold."""
    if not outputs:
        summary.note = f"{summary.data} has no gold rationales: nothing to measure precision against."
        return
    scores = RationaleScores()
    for out in outputs:
        scores.add(out.selected, out.record.gold_mask())
    summary.test = scores.result()
    golds = [out.record.gold_mask() for out in outputs]
    summary.gold_share = sum(map(sum, golds)) / sum(map(len, golds))
    if all(len(set(out.scores)) <= 1 for out in outputs):
        summary.note = "every token of a document has the same score (the extractor does not rank tokens): no curve."
        return
    summary.curve = precision_by_size([out.scores for out in outputs], golds)


# --------------------------------------------------------------------------- #
# figures


def training_panels(metrics: dict, config: dict) -> list[Panel]:
    """The panels of :data:`PANELS` whose keys the run's history has."""
    panels = []
    for spec in PANELS:
        series = [s for key, name in spec.keys if (s := _series(metrics["history"], key, name)).x]
        if not series:
            continue
        key = "support_budget" if spec.target == "budget" and config.get("support_budget") is not None else spec.target
        target = config.get(key) if key else None  # a support decoded at another size: that size
        if isinstance(target, float):  # a share (a budget of a token count is an int)
            panels.append(Panel(spec.title, series, spec.percent, target, f"{key} {100 * target:g}%"))
        else:
            panels.append(Panel(spec.title, series, spec.percent))
    return panels


def _series(history: list[dict], key: str, name: str) -> Series:
    points = [(row.get("epoch"), row.get(key)) for row in history]
    points = [(x, y) for x, y in points if _number(x) and _number(y)]
    return Series(name, [x for x, _ in points], [y for _, y in points])


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plots(summaries: Sequence[RunSummary]) -> dict[str, Plot]:
    """Every figure of the report by its svg id: ``curves-SLUG`` per run that has training
    statistics, and ``precision-size`` when a run has a curve."""
    out = {}
    for s in summaries:
        panels = training_panels(s.metrics, s.config)
        if panels:
            figure = training_figure(panels, s.metrics["best_epoch"],
                                     f"{s.label}: training (dashed line: kept epoch {s.metrics['best_epoch']})")
            out[f"curves-{s.slug}"] = Plot(figure, {"id": f"curves-{s.slug}", "data-plot": "curves",
                                                    "data-run": s.label}, f"{s.slug}-curves.png")
    measured = [s for s in summaries if s.curve is not None]
    if measured:
        curves = [Curve(s.label, s.slug, s.curve.rates, s.curve.precisions,
                        (s.test["selection_rate"], s.test["precision"]) if s.test["precision"] is not None else None)
                  for s in measured]
        shares = {round(s.gold_share, 6) for s in measured}
        figure = precision_size_figure(curves, shares.pop() if len(shares) == 1 else None)
        out[SIZE_PLOT] = Plot(figure, {"id": SIZE_PLOT, "data-plot": SIZE_PLOT,
                                       "data-runs": " ".join(s.slug for s in measured)}, f"{SIZE_PLOT}.png")
    return out


def write_pngs(found: dict[str, Plot], folder: Path) -> None:
    for plot in found.values():
        save_png(plot.figure, folder / plot.file)


# --------------------------------------------------------------------------- #
# page


def page(summaries: Sequence[RunSummary], found: dict[str, Plot], *, title: str = "Training report",
         studies: Sequence[str] = ()) -> str:
    """The whole report as one self-contained HTML page (``studies``: their sections, first)."""
    body = [*studies, _run_list(summaries), _size_section(summaries, found.get(SIZE_PLOT))]
    first = 0
    for s in summaries:
        body.append(_run_section(s, found.get(f"curves-{s.slug}"), first))
        first += len(s.examples)
    return html_page(title, body, css=CSS)


def _run_list(summaries: Sequence[RunSummary]) -> str:
    """One line per run: its extractor (a two-stage run's support's), the epoch kept or the fitted predictor."""
    def trained(s: RunSummary) -> str:
        fitted = s.metrics["history"][-1].get("predictor") if s.metrics["history"] else None
        if fitted:
            return f"linear predictor fitted: {escape(fitted)}"
        return f'kept epoch {escape(s.metrics["best_epoch"])} of {len(s.metrics["history"])}'

    def selector(s: RunSummary) -> str:
        support = s.config.get("support")  # a two-stage run: the support's selector, fixed
        return escape(s.config.get("extractor")) + (f" (fixed, --support {escape(support)})" if support else "")

    items = [f'<li><a href="#run-{escape(s.slug)}">{escape(s.label)}</a>: {selector(s)}, {trained(s)}</li>'
             for s in summaries]
    return f"<ul>{''.join(items)}</ul>"


def _size_section(summaries: Sequence[RunSummary], plot: Plot | None) -> str:
    parts = ['<section id="size"><h2>Precision by rationale size</h2>',
             '<p class="meta">Each line keeps the top 1% to 60% of every document\'s tokens by the run\'s '
             "selection scores and plots the token precision against gold (micro, over the documents with "
             "gold) at the share of tokens kept. The dot is the run's own decoded rationale.</p>"]
    parts.append(svg(plot.figure, plot.attributes) if plot else
                 "<p>No run could be measured against gold rationales.</p>")
    parts += [f'<p class="note"><b>{escape(s.label)}</b>: {escape(s.note)}</p>' for s in summaries if s.note]
    return "\n".join(parts) + "</section>"


def _run_section(s: RunSummary, plot: Plot | None, first: int) -> str:
    parts = [f'<section class="run" id="run-{escape(s.slug)}"><h2>{escape(s.label)}</h2>',
             f'<p class="meta">{escape(s.path)}</p>',
             svg(plot.figure, plot.attributes) if plot else "<p>No training statistics to plot.</p>",
             '<div class="tables">',
             _table(f"validation, kept epoch {s.metrics['best_epoch']}", _flat(s.metrics.get("valid", {})))]
    if s.test is not None:
        parts.append(_table(f"on {s.data}: decoded rationales", {k: s.test[k] for k in TEST_KEYS}))
    if s.reference is not None:
        parts.append(_table(f"on {s.data}: full-text reference", s.reference))
    parts += [_table("configuration", {k: str(v) for k, v in s.config.items() if v is not None}), "</div>"]
    if s.examples:
        kinds = {item["record"].rationale is not None for item in s.examples}
        parts += [f"<h3>Examples from {escape(s.data)}</h3>", *(html_legend(g) for g in sorted(kinds, reverse=True))]
        parts += [html_document(item, first + i)[0] for i, item in enumerate(s.examples)]
    return "\n".join(parts) + "</section>"


def _flat(metrics: dict) -> dict:
    """Nested metrics (``f1_per_label``) as one row per entry: ``f1_per_label pos``."""
    out = {}
    for key, value in metrics.items():
        out.update({f"{key} {k}": v for k, v in value.items()} if isinstance(value, dict) else {key: value})
    return out


def _table(title: str, values: dict) -> str:
    return f"<div><h3>{escape(title)}</h3>{html_summary(values)}</div>"


def write_report(runs: Sequence[Path], out: Path, *, png: Path | None = None, data: str | None = None,
                 format: str | None = None, aspect: int | None = None, examples: int = 3, batch_size: int = 64,
                 device: str = "auto", force: bool = False, progress: Progress = no_progress) -> int:
    """The HTML page on ``runs`` at ``out`` (their documents: each one's own held-out data
    unless ``data``) and, with ``png``, the plots as PNG files in that folder (created);
    returns the number of plots. ``progress`` reports each run's documents decoded. An existing
    page or PNG file is replaced only with ``force`` (:func:`~rationale_cli.runtime.outputs.new_output`)."""
    from rationale_cli.runs.run_directory import load_run
    from rationale_cli.runtime.devices import resolve_device

    new_output(out, force, [data])
    if png is not None:
        try:
            png.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"{png}: cannot create the PNG folder ({err.strerror})") from None
    boards = [read_leaderboard(path) for path in runs if is_study(path)]
    best = [(Path(b.best.run), f"{b.study}: best, trial {b.best.number}") for b in boards
            if b.best is not None and b.best.run and Path(b.best.run).is_dir()]
    runs = [path for path in runs if not is_study(path)] + [path for path, _ in best]
    names = labels(runs)[:len(runs) - len(best)] + [label for _, label in best]
    summaries = []
    for run, name, slug in zip(runs, names, slugs(names)):
        dev = resolve_device(device)
        loaded = load_run(run, dev, None)
        summaries.append(summarize(loaded, name, slug, data=data, fmt=format, aspect=aspect, examples=examples,
                                   batch_size=batch_size, device=dev, progress=progress))
    found = plots(summaries)
    sections = []
    for board, slug in zip(boards, slugs([board.study for board in boards])):
        plot = found[f"study-{slug}"] = Plot(study_figure(board), {"id": f"study-{slug}", "data-plot": "study"},
                                             f"study-{slug}.png")
        sections.append(study_section(board, svg(plot.figure, plot.attributes), slug))
    if png is not None:
        for plot in found.values():
            new_output(png / plot.file, force, [data], "--png")
    write_text_atomic(out, page(summaries, found, studies=sections))
    if png is not None:
        write_pngs(found, png)
    return len(found)
