"""``rationale train``, whose flags are made from the declared options (:mod:`rationale_cli.models.options`).

Each training option becomes one flag in its panel; each extractor option one flag
whose help says which extractors take it and what it means for each; the help's
epilog lists every extractor with its own options. Nothing here is written by hand
per option but its panel, so a new extractor option appears in ``--help`` by itself.
How an option is spelled (``--lambda``, ``--relaxed``) is :mod:`rationale_cli.runs.flags`,
also where a declared text names another option (:func:`rationale_cli.models.options.spelled`).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from rationale_cli.cli._util import Command, app, friendly, metrics_table, reference_line, signal_name, stderr, stdout
from rationale_cli.models.options import Spec, spelled
from rationale_cli.models.selectors import SELECTORS, all_option_specs, option_specs
from rationale_cli.runs.config import ALIASES, TRAIN_SPECS
from rationale_cli.runs.flags import flag_of, negative_of

TYPES = {"bool": bool, "int": int, "float": float, "str": str, "Budget": str}
EXTRACTOR_PANEL = "Extractor options (each applies to the extractors it names)"
RUN_PANEL = "Run"
# the panel of each training option in --help, in this order (the extractors' options follow them)
PANELS = {
    "Data": ("data", "format", "aspect", "valid", "valid_fraction", "task", "text_col", "label_col", "id_col",
             "rationale_label", "spans_key", "query"),
    "Model": ("extractor", "encoder", "selector_encoder", "predictor_encoder", "pretrained", "freeze_layers",
              "embeddings", "embedding_dim", "fix_embeddings", "hidden_size", "dropout", "min_freq", "max_vocab",
              "share_encoder", "generators", "reference", "support", "support_sentences",
              "support_budget"),
    "Training": ("epochs", "batch_size", "lr", "weight_decay", "lr_decay", "lr_final", "lr_decay_epochs",
                 "pretrained_lr", "predictor_lr", "guidance", "separate_guidance", "supervise", "supervise_fraction",
                 "balance_classes", "clip", "patience", "keep", "rate_tolerance", "save_epochs", "time_limit", "seed",
                 "device"),
}
BUDGET_HELP = ("Rationale size: a share of each document's tokens (0.13) or a token count (10, or k=10), "
               "resolved per document.")


def panel_of(name: str) -> str:
    """The ``--help`` panel of training option ``name``."""
    for panel, names in PANELS.items():
        if name in names:
            return panel
    raise KeyError(f"training option {name!r} has no --help panel: add it to PANELS in {__name__}")


def declarations(spec: Spec) -> list[str]:
    if spec.kind == "bool":
        return [f"{flag_of(spec.name)}/{negative_of(spec.name)}"]
    return [flag_of(spec.name)]


def default_text(spec: Spec) -> str:
    """A default as ``--help`` shows it; for a switch, the flag that is on by default."""
    if spec.kind == "bool" and spec.default_text is None:
        return declarations(spec)[0].split("/")[0 if spec.default else 1]
    return spelled(spec.default_shown(), flag_of)


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
    text = spelled(spec.help, flag_of)
    if spec.choices and len(spec.choices) > 4 and spec.name != "extractor":
        text += f" One of {', '.join(spec.choices)}."
    return text


def extractor_help(name: str, by_extractor: dict[str, Spec]) -> str:
    """The help of an extractor option: grouped by what it means and defaults to, per extractor."""
    groups: dict[tuple[str, str], list[str]] = {}
    for extractor, spec in by_extractor.items():
        meaning = spelled(spec.role if name == "budget" else spec.help, flag_of)
        groups.setdefault((meaning, default_text(spec)), []).append(extractor)
    parts = [f"{', '.join(names)}: {meaning} (default {default})" for (meaning, default), names in groups.items()]
    lead = BUDGET_HELP + " " if name == "budget" else ""
    return lead + "; ".join(parts) + "."


def train_parameters() -> list[inspect.Parameter]:
    """Every declared option of ``train``: the training options, then the extractors'."""
    params = [parameter(name, spec, train_help(spec), panel_of(name), default_text(spec))
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
        own = " ".join(map(flag_of, option_specs(name))) or "no options"
        lines.append(f"[b]{name}[/b]: {escape(spelled(cls.summary, flag_of))}. Options: {own}.")
    return "\n\n".join(lines)


def train(out: Path, config: Optional[Path], force: bool, resume: bool, verbose: bool = False, **options):
    """Train a select-then-predict model and write a run directory."""
    from rationale_cli.runs.reference import main_metric
    from rationale_cli.runtime.devices import flush_denormals
    from rationale_cli.runtime.signals import Stopped
    from rationale_cli.training.endings import stopped_state
    from rationale_cli.training.train_job import train_options

    flush_denormals()  # this process's own: the API leaves the caller's floats as they are
    console = stderr()
    try:
        trained = train_options(out, config, options, force=force, resume=resume, verbose=verbose, console=console)
    except Stopped as stop:
        console.print(f"stopped by {signal_name(stop.signal)} {stopped_state(out)}", highlight=False)
        raise typer.Exit(128 + stop.signal) from None
    if trained is None:  # a later rank of a distributed run
        return
    console.print(f"best epoch {trained.state.best['epoch']}; run saved to {out}", highlight=False)
    for warning in trained.warnings:
        console.print(f"warning: {warning}", style="yellow", highlight=False)
    valid = trained.state.best["valid"]
    stdout().print(f"validation ({valid['documents']:,} documents)", style="bold", highlight=False)
    stdout().print(metrics_table(valid))
    if trained.reference is not None:
        metric = main_metric(trained.task)
        beside = trained.reference.beside(metric, trained.reference.valid["value"], valid.get(metric),
                                          valid["documents"])
        stdout().print(reference_line(beside), highlight=False, soft_wrap=True)


def train_command():
    """``train`` as typer sees it: the fixed options, then every declared option."""
    fixed = [
        inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation=Path,
                          default=typer.Option(..., help="Run directory to create.", rich_help_panel=RUN_PANEL)),
        inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[Path],
                          default=typer.Option(None, help="TOML file with any of these options as keys "
                                               "(the command line wins).", rich_help_panel=RUN_PANEL)),
        inspect.Parameter("force", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--force", metavar="", help="Replace an existing run directory.",
                                               rich_help_panel=RUN_PANEL)),
        inspect.Parameter("resume", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--resume", metavar="", help="Go on training the run in --out "
                                               "after its last finished epoch, as if it had not stopped; only "
                                               "--epochs, --time-limit, --patience, --device and where the data is "
                                               "read from may change.", rich_help_panel=RUN_PANEL)),
        inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                          default=typer.Option(False, "--verbose", "-v", metavar="", help="Show every training "
                                               "statistic of the extractor on the epoch lines.",
                                               rich_help_panel=RUN_PANEL)),
    ]
    command = friendly(train)
    command.__signature__ = inspect.Signature(fixed + train_parameters())
    return command


app.command("train", cls=Command, epilog=extractor_epilog())(train_command())
