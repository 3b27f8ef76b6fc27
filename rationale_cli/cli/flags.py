"""The ``train`` command's flags, made from the declared options (:mod:`models.options`).

Each training option becomes one flag in its panel; each extractor option one flag
whose help says which extractors take it and what it means for each; the help's
epilog lists every extractor with its own options. Nothing here is written by hand
per option, so a new option or extractor appears in ``--help`` by itself.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional

import typer
from rich.markup import escape

from models.options import Spec
from models.selectors import SELECTORS, all_option_specs, option_specs
from rationale_cli.runs.config import ALIASES, TRAIN_SPECS

TYPES = {"bool": bool, "int": int, "float": float, "str": str, "Budget": str}
EXTRACTOR_PANEL = "Extractor options (each applies to the extractors it names)"
BUDGET_HELP = ("Rationale size: a share of each document's tokens (0.13) or a token count (10, or k=10), "
               "resolved per document.")


def declarations(spec: Spec) -> list[str]:
    if spec.kind == "bool":
        return [f"{spec.flag}/{spec.negative or '--no-' + spec.flag[2:]}"]
    return [spec.flag]


def default_text(spec: Spec) -> str:
    """A default as ``--help`` shows it; for a switch, the flag that is on by default."""
    if spec.kind == "bool" and spec.default_text is None:
        return declarations(spec)[0].split("/")[0 if spec.default else 1]
    return spec.default_shown()


def bounds(spec: Spec) -> str:
    """`` [allowed: ...]`` for a number with a range, else nothing."""
    bounded = spec.kind in ("int", "float") and any(b is not None for b in (spec.low, spec.high, spec.above))
    return f" [allowed: {spec.allowed()}]" if bounded else ""


def parameter(name: str, spec: Spec, help: str, panel: str, default: str | None) -> inspect.Parameter:
    """A keyword parameter whose default is a typer option (None when not given). The help
    is escaped, so no bracket in it is taken for markup, and ends with the default."""
    help = escape(help + (f" [default: {default}]" if default is not None else "") + bounds(spec))
    extra: dict[str, Any] = {"metavar": ""} if spec.kind == "bool" else {}
    if spec.kind == "Budget":
        extra["metavar"] = "SHARE|COUNT"
    elif spec.choices:
        extra["metavar"] = "|".join(spec.choices) if len(spec.choices) <= 4 else "NAME"
    info = typer.Option(None, *declarations(spec), help=help, rich_help_panel=panel, show_default=False, **extra)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=Optional[TYPES[spec.kind]])


def train_help(spec: Spec) -> str:
    text = spec.help
    if spec.choices and len(spec.choices) > 4 and spec.name != "extractor":
        text += f" One of {', '.join(spec.choices)}."
    return text


def extractor_help(name: str, by_extractor: dict[str, Spec]) -> str:
    """The help of an extractor option: grouped by what it means and defaults to, per extractor."""
    groups: dict[tuple[str, str], list[str]] = {}
    for extractor, spec in by_extractor.items():
        meaning = spec.role if name == "budget" else spec.help
        groups.setdefault((meaning, default_text(spec)), []).append(extractor)
    parts = [f"{', '.join(names)}: {meaning} (default {default})" for (meaning, default), names in groups.items()]
    lead = BUDGET_HELP + " " if name == "budget" else ""
    return lead + "; ".join(parts) + "."


def train_parameters() -> list[inspect.Parameter]:
    """Every declared option of ``train``: the training options, then the extractors'."""
    params = [parameter(name, spec, train_help(spec), spec.panel, default_text(spec))
              for name, spec in TRAIN_SPECS.items()]
    for name, by_extractor in all_option_specs().items():  # one type per name: tests/test_config.py
        params.append(parameter(name, next(iter(by_extractor.values())), extractor_help(name, by_extractor),
                                EXTRACTOR_PANEL, None))
    for alias, kind in ALIASES.items():
        what = "a share" if kind is float else "a token count"
        spec = Spec(alias, kind.__name__, True, None, "")
        params.append(parameter(alias, spec, f"Old name of --budget for {what}; kept for one release.",
                                EXTRACTOR_PANEL, None))
    return params


def extractor_epilog() -> str:
    """One paragraph per extractor: what it selects and its own options."""
    lines = ["[b]Extractors[/b] (--extractor) and their options:"]
    for name, cls in SELECTORS.items():
        own = " ".join(spec.flag for spec in option_specs(name).values()) or "no options"
        lines.append(f"[b]{name}[/b]: {escape(cls.summary)}. Options: {own}.")
    return "\n\n".join(lines)
