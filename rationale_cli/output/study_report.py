"""A study of ``rationale tune`` in the report: its validation loss and rate per trial (a plot
and the leaderboard) and each searched parameter's effect on the loss, read from the study
folder's ``leaderboard.json`` (:mod:`rationale_cli.tuning.leaderboard`; no Optuna needed)."""

from __future__ import annotations

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter

from rationale_cli.models.options import shown
from rationale_cli.output.plots import STYLE, TARGET, plain
from rationale_cli.output.render import escape
from rationale_cli.tuning.job import IMPORTANCE_TRIALS
from rationale_cli.tuning.leaderboard import Leaderboard, TrialResult, on_target, percent

# how each kind of trial is drawn: label, marker, filled
KINDS = {"on": ("complete, on target", "o", True), "off": ("complete, off target", "o", False),
         "pruned": ("pruned", "x", True)}


def kind(result: TrialResult, board: Leaderboard) -> str | None:
    if result.loss is None or result.state not in ("complete", "pruned"):
        return None
    if result.state == "pruned":
        return "pruned"
    return "off" if on_target(result, board.keep) is False else "on"


def study_figure(board: Leaderboard) -> Figure:
    """Validation task loss (left) and decoded validation rate (right) per trial, the best
    trial ringed, the rate target as a dotted line."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(11, 3.4), layout="constrained")
        fig.suptitle(plain(f"study {board.study}: validation per trial"), fontsize=11, fontweight="bold")
        loss_ax, rate_ax = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        for name, (label, marker, filled) in KINDS.items():
            shown = [r for r in board.trials if kind(r, board) == name]
            if not shown:
                continue
            style = dict(marker=marker, linestyle="none", markersize=6, label=label)
            if not filled:
                style.update(markerfacecolor="none")
            (line,) = loss_ax.plot([r.number for r in shown], [r.loss for r in shown], **style)
            style["color"] = line.get_color()
            rate_ax.plot([r.number for r in shown], [r.rate for r in shown], **style)
        if board.best is not None:
            ring = dict(marker="o", markersize=13, markerfacecolor="none", markeredgecolor="black",
                        linestyle="none", label=f"best (trial {board.best.number})")
            loss_ax.plot([board.best.number], [board.best.loss], **ring)
            rate_ax.plot([board.best.number], [board.best.rate], **ring)
        if board.target is not None:
            rate_ax.axhline(board.target, label=f"target {100 * board.target:g}% (± {100 * board.tolerance:g} points)",
                            **TARGET)
            rate_ax.axhspan(board.target - board.tolerance, board.target + board.tolerance, color="0.85", zorder=0)
        for ax, title in ((loss_ax, "validation task loss"), (rate_ax, "decoded validation selection rate")):
            ax.set_title(title)
            ax.set_xlabel("trial")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            if ax.has_data():
                ax.legend(loc="best", framealpha=0.8)
        rate_ax.set_ylim(bottom=0)
        rate_ax.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=None))
    return fig


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return escape(shown(value))


def _rows(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="summary"><tr>{head}</tr>{body}</table>'


def leaderboard_html(board: Leaderboard) -> str:
    rows = []
    for r in board.trials:
        params = ", ".join(f"{k}={_cell(v)}" for k, v in r.params.items()) if r.state != "failed" else \
            escape(r.error or "")
        rows.append([str(r.number), escape(board.state(r)), _cell(r.loss), percent(r.rate), board.target_word(r),
                     params])
    return _rows(["trial", "state", "validation loss", "rate", "on target", "params"], rows)


def effects_html(board: Leaderboard) -> str:
    """Each parameter's effect: Optuna's importance where it was computed, and Spearman's rank
    correlation with the loss (numbers) or the mean loss per choice (others)."""
    names = sorted(set(board.effects) | set(board.importance or {}))
    if not names:
        return "<p>Too few complete trials to tell the parameters' effect.</p>"
    rows = []
    for name in names:
        effect = board.effects.get(name, {})
        if "spearman" in effect:
            shown = f"rank correlation with the loss {effect['spearman']:+.2f}"
        elif "mean_loss" in effect:
            shown = "mean loss by value: " + ", ".join(f"{k} {v:.4g}" for k, v in effect["mean_loss"].items())
        else:
            shown = "-"
        importance = [] if board.importance is None else [_cell(board.importance.get(name))]
        rows.append([escape(name), *importance, escape(shown), str(effect.get("trials", "-"))])
    if board.importance is None:  # too few complete trials, or an evaluator not installed
        return (f"<p>Optuna's importances were not computed (they need at least "
                f"{IMPORTANCE_TRIALS} complete trials).</p>" +
                _rows(["parameter", "effect on validation loss", "complete trials"], rows))
    return _rows(["parameter", "importance (Optuna)", "effect on validation loss", "complete trials"], rows)


def study_section(board: Leaderboard, plot_svg: str, slug: str) -> str:
    """The study's section of the report page."""
    best = (f"best: trial {board.best.number} ({escape(board.best.run)}), shown as a run below"
            if board.best else "no complete trial is on target: none is chosen")
    searched = ", ".join(escape(f"{name} {_space(entry)}") for name, entry in board.space.items()) or "nothing"
    parts = [f'<section class="run" id="tune-{escape(slug)}"><h2>Study {escape(board.study)}</h2>',
             f'<p class="meta">{escape(board.extractor)} extractor; {escape(board.storage)}; chosen by '
             f'{escape(board.chosen_by())}; gold rationales never choose. Searched: {searched}.</p>',
             f"<p>{best}.</p>", plot_svg, '<div class="tables">',
             f"<div><h3>Trials ({len(board.trials)})</h3>{leaderboard_html(board)}</div>",
             f"<div><h3>The parameters' effect</h3>{effects_html(board)}</div>", "</div>"]
    return "\n".join(parts) + "</section>"


def _space(entry: dict) -> str:
    if "choices" in entry:
        return "in {" + ", ".join(map(_cell, entry["choices"])) + "}"
    scale = ", log scale" if entry.get("log") else ""
    return f"from {_cell(entry['low'])} to {_cell(entry['high'])}{scale}"
