"""MkDocs hooks: the parts of the site generated from the code at build time.

A page asks for a generated part with a marker line of its own:

``<!-- generated: cli-reference -->``
    every command of the ``rationale`` Typer app (usage, help, arguments and options
    with their help and defaults), read from ``typer.main.get_command(app)``;
``<!-- generated: extractor-table -->``
    one row per extractor of the registry ``rationale_cli.models.selectors.SELECTORS``: its summary,
    what ``--budget`` is for it and its default, its default encoder and its own options;
``<!-- generated: remedy-table -->``
    one row per remedy against degeneration of ``rationale_cli.runs.remedies.REMEDIES``;
``<!-- generated: results-summary -->``
    the opening and the summary table of ``benchmarks/RESULTS.md``.

Nothing generated is written into ``docs/``: the site cannot drift from the code.

The API reference reads the sources as they install (``models/`` is ``rationale_cli.models``,
pyproject's package-dir): :func:`installed_view` lays them out so in ``build/api-sources``, a
folder of links, when mkdocs starts; mkdocs.yml gives mkdocstrings that path.
The functions are plain (no MkDocs objects), so ``tests/test_docs.py`` calls them too.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


# ----------------------------------------------------------------------------- helpers

def plain(text: str | None) -> str:
    """Help text as the terminal shows it: Typer reads help as rich markup
    (``\\[default: x]`` is an escaped bracket), so take its plain text."""
    if not text:
        return ""
    from rich.text import Text

    try:
        return Text.from_markup(text).plain
    except Exception:  # not valid markup: shown as written
        return text


def inline(text: str) -> str:
    """Plain text made safe inside one Markdown paragraph or table cell."""
    text = " ".join(text.split())
    text = text.replace("<", "&lt;").replace("*", "\\*").replace("|", "\\|").replace("[", "\\[")
    return text


def code(text: str) -> str:
    """Inline code that is safe in a table cell (a pipe would end the cell)."""
    import html

    return "<code>" + html.escape(text).replace("|", "&#124;") + "</code>"


def paragraphs(text: str) -> str:
    """A help text's paragraphs (blank-line separated), each joined to one line."""
    return "\n\n".join(inline(part) for part in re.split(r"\n\s*\n", plain(text).strip()) if part.strip())


# ----------------------------------------------------------------------------- CLI reference

def cli_group():
    """The ``rationale`` command as click sees it."""
    import typer.main

    from rationale_cli.cli import app

    return typer.main.get_command(app)


def parameter_rows(command, ctx) -> dict[str, list[tuple[str, str]]]:
    """``{panel: [(declaration, plain help with default)]}`` in the order ``--help`` shows them."""
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        declaration, help_text = record
        # the help is rich markup; what click appends to it ([default: x], [required]) is not
        own = getattr(param, "help", None) or ""
        extra = help_text[len(own):] if help_text.startswith(own) else ""
        help_text = (plain(own) + extra) if own else help_text
        if param.param_type_name == "argument":
            panel = "Arguments"
        else:
            panel = getattr(param, "rich_help_panel", None) or "Options"
        panels.setdefault(panel, []).append((declaration, help_text))
    # the arguments first, then the panels in their order, the plain options last (as --help)
    order = sorted(panels, key=lambda name: (name != "Arguments", name == "Options"))
    return {name: panels[name] for name in order}


def command_markdown(name: str, command, parent_ctx) -> str:
    ctx = command.context_class(command, info_name=name, parent=parent_ctx)
    usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
    lines = [f"## {name}", "", f"```text\n{usage}\n```", "", paragraphs(command.help or ""), ""]
    for panel, rows in parameter_rows(command, ctx).items():
        head = "argument" if panel == "Arguments" else "option"
        lines += [f"**{inline(panel)}**", "", f"| {head} | description |", "|---|---|"]
        for declaration, help_text in rows:
            lines.append(f"| {code(declaration)} | {inline(help_text)} |")
        lines.append("")
    if command.epilog:
        lines += [paragraphs(command.epilog), ""]
    return "\n".join(lines)


def cli_reference() -> str:
    """Markdown for every command of the ``rationale`` app."""
    group = cli_group()
    ctx = group.context_class(group, info_name="rationale")  # typer's own click or click
    lines = [f"```text\n{' '.join(['rationale', *group.collect_usage_pieces(ctx)])}\n```", "",
             paragraphs(group.help or ""), "", "| command | what it does |", "|---|---|"]
    for name, command in group.commands.items():
        lines.append(f"| [{name}](#{name}) | {inline(plain(command.get_short_help_str(limit=200)))} |")
    lines.append("")
    global_rows = parameter_rows(group, ctx)
    for panel, rows in global_rows.items():
        lines += [f"**{inline(panel)}** (before the command)", "", "| option | description |", "|---|---|"]
        lines += [f"| {code(d)} | {inline(h)} |" for d, h in rows]
        lines.append("")
    for name, command in group.commands.items():
        lines.append(command_markdown(name, command, ctx))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- extractor table

def flag(name: str) -> str:
    try:
        from rationale_cli.runs.flags import flag_of
    except ImportError:  # pragma: no cover - an older tree
        return "--" + name.replace("_", "-")
    return flag_of(name)


def flagged(text: str) -> str:
    """A declared text (a summary, a role) with the options it names written as flags."""
    try:
        from rationale_cli.models.options import spelled
    except ImportError:  # pragma: no cover - an older tree, whose texts spell the flags themselves
        return text
    return spelled(text, flag)


def extractor_rows() -> list[dict[str, str]]:
    """One dict per registered extractor, in registry order."""
    from rationale_cli.models.selectors import SELECTORS, option_specs

    rows = []
    for name, cls in SELECTORS.items():
        specs = option_specs(name)
        budget = specs.get("budget")
        rows.append({
            "name": name,
            "summary": flagged(cls.summary),
            "budget": flagged(budget.role) if budget is not None else "-",
            "default": budget.default_shown() if budget is not None else "-",
            "encoder": cls.default_encoder,
            "options": " ".join(flag(option) for option in specs) or "-",
        })
    return rows


def extractor_table() -> str:
    lines = ["| `--extractor` | what it selects | `--budget` is (default) |", "|---|---|---|"]
    for row in extractor_rows():
        options = ", ".join(code(option) for option in row["options"].split()) if row["options"] != "-" else "none"
        budget = row["budget"] if row["default"] == "-" else f"{row['budget']} ({code(row['default'])})"
        lines.append(f"| `{row['name']}` | {inline(row['summary'])}.<br>*Options:* {options}; "
                     f"*default encoder:* {code(row['encoder'])} | {inline(budget) if row['default'] == '-' else budget} |")
    return "\n".join(lines) + "\n"


def supervision_table() -> str:
    """What rationale supervision (``--supervise``) compares with the gold, per extractor."""
    from rationale_cli.models.selectors import SELECTORS

    lines = ["| `--extractor` | what `--supervise` pulls toward the gold mask, and the loss |", "|---|---|"]
    for name, cls in SELECTORS.items():
        what = getattr(cls, "supervised_by", "")
        lines.append(f"| `{name}` | {inline(what) if what else '*refused*: it selects no tokens of its own'} |")
    return "\n".join(lines) + "\n"


def remedy_table() -> str:
    """The remedies against degeneration (``rationale_cli.runs.remedies.REMEDIES``): paper, option, search."""
    from rationale_cli.runs.flags import flag_of
    from rationale_cli.runs.remedies import REMEDIES

    lines = ["| remedy | what it does | turned on by | a search tries | paper |", "|---|---|---|---|---|"]
    for name, remedy in REMEDIES.items():
        on = flag_of(remedy.option) if remedy.value is True else f"{flag_of(remedy.option)} {remedy.value:g}"
        lines.append(f"| {name.upper()} | {inline(remedy.summary)} | {code(on)} | {inline(remedy.search.describe())} "
                     f"| {inline(remedy.paper)} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- benchmark summary

def results_summary() -> str:
    """The opening of ``benchmarks/RESULTS.md`` and its summary section, headings one level down."""
    path = ROOT / "benchmarks" / "RESULTS.md"
    if not path.is_file():
        return "*`benchmarks/RESULTS.md` is not in this tree.*\n"
    text = path.read_text(encoding="utf-8")
    sections = re.split(r"^(?=## )", text, flags=re.M)
    opening, rest = sections[0], sections[1:]
    summary = next((s for s in rest if s.startswith("## Summary")), "")
    opening = re.sub(r"^# .*\n", "", opening, count=1)  # the page has its own title
    summary = re.sub(r"^## ", "### ", summary, flags=re.M)
    return (opening.strip() + "\n\n" + summary.strip() + "\n").replace("Do not edit by hand.", "")


GENERATORS = {
    "cli-reference": cli_reference,
    "extractor-table": extractor_table,
    "supervision-table": supervision_table,
    "remedy-table": remedy_table,
    "results-summary": results_summary,
}


def expand(markdown: str) -> str:
    """``markdown`` with every marker line replaced by what it names (an unknown name is an error)."""

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated part {name!r}: expected one of {', '.join(GENERATORS)}")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


# ----------------------------------------------------------------------------- MkDocs events

def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    return expand(markdown)



def installed_view(view: Path) -> Path:
    """``view`` (made anew) holding ``rationale_cli/`` as it installs: links to its entries and
    ``models`` linked to the top-level ``models/`` folder."""
    shutil.rmtree(view, ignore_errors=True)
    package = view / "rationale_cli"
    package.mkdir(parents=True)
    for entry in (ROOT / "rationale_cli").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "models").symlink_to(ROOT / "models")
    return view


def on_startup(**kwargs) -> None:
    installed_view(ROOT / "build" / "api-sources")  # mkdocs.yml's mkdocstrings path, before any plugin reads it
