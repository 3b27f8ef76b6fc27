"""Matplotlib figures for the report, written as inline SVG text or PNG files.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot, no
global state); PNGs are drawn by Agg. The SVG keeps text as text and carries no
metadata, fonts or links, so it references nothing outside itself; the ids
inside it start with the plot's own id, so several can share one page.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, PercentFormatter

from rationale_cli.output.render import escape
from rationale_cli.runtime.atomic import atomic_path

STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "legend.fontsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
MARKED = {"color": "0.3", "linestyle": "--", "linewidth": 1.2}  # the kept epoch
TARGET = {"color": "black", "linestyle": ":", "linewidth": 1.5}
NO_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}
COLUMNS = 3


@dataclass
class Series:
    label: str
    x: Sequence[float]
    y: Sequence[float]


@dataclass
class Panel:
    """One axes: its series, a percent y axis for shares, and an optional target line."""

    title: str
    series: list[Series]
    percent: bool = False
    target: float | None = None
    target_label: str = "target"


@dataclass
class Curve:
    """One run's line on the precision-by-size plot; ``point`` is its own operating point.
    ``key`` names the line (``line-KEY``) and the point (``point-KEY``) in the SVG."""

    label: str
    key: str
    rates: Sequence[float]
    precisions: Sequence[float]
    point: tuple[float, float] | None = None


def plain(text: str) -> str:
    """``text`` shown as it is: a dollar sign does not start math."""
    return text.replace("$", r"\$")


def training_figure(panels: Sequence[Panel], marked: float, title: str) -> Figure:
    """The panels on a grid, ``COLUMNS`` wide, each with a dashed line at x = ``marked``."""
    with matplotlib.rc_context(STYLE):
        rows = -(-len(panels) // COLUMNS)
        fig = Figure(figsize=(11, 0.4 + 2.5 * rows), layout="constrained")
        fig.suptitle(plain(title), fontsize=11, fontweight="bold")
        for index, panel in enumerate(panels):
            _draw_panel(fig.add_subplot(rows, COLUMNS, index + 1), panel, marked)
    return fig


def _draw_panel(ax, panel: Panel, marked: float) -> None:
    for series in panel.series:
        ax.plot(series.x, series.y, marker="o", markersize=3, linewidth=1.5, label=plain(series.label))
    ax.axvline(marked, **MARKED)
    if panel.target is not None:
        ax.axhline(panel.target, label=plain(panel.target_label), **TARGET)
    ax.set_title(plain(panel.title))
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    last = max((max(series.x) for series in panel.series if len(series.x)), default=1)
    if last <= 1:  # one epoch: a tick at 1, not fractions of an epoch
        ax.set_xlim(0.5, 1.5)
        ax.set_xticks([1])
    if panel.percent:  # from 0, so that a change of a tenth of a percent does not fill the panel
        ax.update_datalim([(marked, 0.0)])
        ax.autoscale_view()
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=None))
    ax.legend(loc="best", framealpha=0.8)


def precision_size_figure(curves: Sequence[Curve], baseline: float | None = None) -> Figure:
    """Precision (y) against the share of tokens selected (x), one line per run, each run's
    operating point as a large dot of its colour; ``baseline`` (the gold share, what a
    random selection reaches) as a dotted line."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8, 4.6), layout="constrained")
        ax = fig.add_subplot()
        handles = []
        for curve in curves:
            (line,) = ax.plot(curve.rates, curve.precisions, linewidth=1.8, gid=f"line-{curve.key}")
            handles.append(line)
            if curve.point is not None:
                ax.plot(*curve.point, marker="o", markersize=9, markeredgecolor="black", linestyle="none",
                        color=line.get_color(), gid=f"point-{curve.key}")
        labels = [plain(curve.label) for curve in curves]  # given with their handles: a leading _ stays
        if any(curve.point is not None for curve in curves):
            handles.append(Line2D([], [], marker="o", markersize=9, markeredgecolor="black",
                                  markerfacecolor="white", linestyle="none"))
            labels.append("operating point (decoded)")
        if baseline is not None:
            handles.append(ax.axhline(baseline, color="0.4", linestyle=":", linewidth=1.2))
            labels.append("random selection (gold share)")
        ax.legend(handles, labels, loc="best", framealpha=0.9)
        ax.set_title("Precision by rationale size")
        ax.set_xlabel("tokens selected (share of each document, top scores)")
        ax.set_ylabel("token precision against gold")
        ax.set_ylim(0, 1.02)
        ax.set_xlim(left=0)
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))
    return fig


def svg(fig: Figure, attributes: Mapping[str, str]) -> str:
    """The figure as an ``<svg>`` element to put inside HTML: no XML prolog or DOCTYPE,
    ``attributes`` (escaped) added to the root, which must include an ``id``; every id
    inside (an artist's gid too) is prefixed with that id and a hyphen."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "rationale"}):
        fig.savefig(buffer, format="svg", metadata=NO_METADATA)
    text = buffer.getvalue()
    text = re.sub(r"<[^<>]+>", lambda tag: _prefix_ids(tag.group(), attributes["id"]), text[text.index("<svg"):])
    added = "".join(f' {name}="{escape(value)}"' for name, value in attributes.items())
    return f'<svg class="plot"{added}{text[len("<svg"):]}'


def _prefix_ids(tag: str, prefix: str) -> str:
    """One tag's ids and references to them (``url(#...)``, ``href="#..."``), prefixed."""
    tag = re.sub(r'(\sid=")', rf"\g<1>{prefix}-", tag)
    return tag.replace("url(#", f"url(#{prefix}-").replace('href="#', f'href="#{prefix}-')


def save_png(fig: Figure, path: Path) -> None:
    """The figure as a PNG file (150 dpi), written atomically."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=150)
