"""The house rules of the two packages, read from the source: folders of at most 12 modules,
but ``rationale_cli/cli/``, which holds one module per command and its two helpers,
modules of ``rationale_cli`` of at most 400 lines, no import cycle (imports inside functions
included), each folder of ``rationale_cli`` importing only its own floor and those below,
``models`` importing nothing of ``rationale_cli``, and no decoding setting stored on a model."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rationale_cli", "models")
# rationale_cli's floors, from the ground up (docs/architecture.md), the neural package under
# them all; a module imports its own floor and those below only
FLOORS = ["models", "runtime", "data", "metrics", "runs", "evaluation", "training", "tuning", "output", "annotation", "api",
          "cli", "__init__", "__main__"]
DECODE_STATE = {"test_rate", "test_threshold", "test_coherence", "test_sentences"}
CAP = 12  # modules in a folder, __init__.py included
COMMANDS = ROOT / "rationale_cli" / "cli"  # one module per command, beside these two
COMMAND_HELPERS = {"__init__", "_util"}


def module_name(path: Path) -> str:
    """The import name of a source file (``models/`` installs as ``rationale_cli.models``)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts = ["rationale_cli", *parts] if parts[0] == "models" else parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


MODULES = sources()


def imported(name: str, path: Path) -> set[str]:
    """The modules of the two packages that ``name`` imports anywhere in its file."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t.split(".")[0] == "rationale_cli" and t != name)
    return {t if t in MODULES else t.rpartition(".")[0] for t in found}


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}


def floor(name: str) -> int:
    parts = name.split(".")
    return FLOORS.index(parts[1] if len(parts) > 1 else "__init__")


def test_the_import_graph_is_read_from_the_source():
    assert "rationale_cli.runs.config" in GRAPH["rationale_cli.training.loop"]
    assert "rationale_cli.models.model" in GRAPH["rationale_cli.runs.run_directory"]
    assert "rationale_cli.models.selection" in GRAPH["rationale_cli.models.selectors.binary.hardkuma"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_folder_holds_more_than_12_modules(package):
    """A folder that is full grows sub-folders by family before the next module arrives;
    ``cli/`` is held by the rule of the next test instead."""
    folders = {p.parent for p in (ROOT / package).rglob("*.py")} - {COMMANDS}
    crowded = {str(f.relative_to(ROOT)): n for f in folders if (n := len(list(f.glob("*.py")))) > CAP}
    assert not crowded


def registered_commands(path: Path) -> list[str]:
    """The commands a module registers on the Typer ``app``: ``@app.command(...)`` over a
    function (named as Typer names it) or ``app.command("name", ...)(...)``."""
    tree = ast.parse(path.read_text(), str(path))
    decorated = {id(decorator): node.name.replace("_", "-") for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef) for decorator in node.decorator_list}
    names = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "command"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "app"):
            named = node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            names.append(node.args[0].value if named else decorated.get(id(node), "?"))
    return names


def test_cli_holds_one_module_per_command_named_as_the_command_and_nothing_else():
    """``rationale X`` is ``cli/X.py`` (``_`` for ``-``), registered there alone and imported by
    ``cli/__init__.py``; beside the commands only ``__init__.py`` and ``_util.py``, no sub-folder
    (a command's work lives in the floor it belongs to, not in a second helper here)."""
    assert not [str(p.relative_to(ROOT)) for p in COMMANDS.rglob("*.py") if p.parent != COMMANDS]
    modules = {p.stem: p for p in COMMANDS.glob("*.py")}
    assert COMMAND_HELPERS <= set(modules)
    wrong = {stem: names for stem, path in modules.items()
             if (names := registered_commands(path)) != ([] if stem in COMMAND_HELPERS else [stem.replace("_", "-")])}
    assert not wrong
    unimported = [stem for stem in set(modules) - COMMAND_HELPERS
                  if f"rationale_cli.cli.{stem}" not in GRAPH["rationale_cli.cli"]]
    assert not unimported


def test_no_module_of_rationale_cli_is_over_400_lines():
    long = {name: n for name, path in MODULES.items()
            if path.is_relative_to(ROOT / "rationale_cli") and (n := len(path.read_text().splitlines())) > 400}
    assert not long


def test_no_import_cycle_lazy_imports_included():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert not cycles


def test_each_floor_of_rationale_cli_imports_only_its_own_and_those_below():
    upward = [(name, target) for name, targets in GRAPH.items() if name.startswith("rationale_cli.")
              for target in targets if target.startswith("rationale_cli") and floor(target) > floor(name)]
    assert not upward


def test_models_knows_nothing_of_the_toolkit_around_it():
    assert not [(name, t) for name, targets in GRAPH.items() if name.startswith("rationale_cli.models")
                for t in targets if not t.startswith("rationale_cli.models")]


def test_no_decoding_setting_is_stored_on_a_model():
    stored = []
    for path in [*MODULES.values(), *sorted((ROOT / "benchmarks").glob("*.py"))]:
        in_selectors = "selectors" in path.relative_to(ROOT).parent.parts  # models/selectors/ and its families
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and part.attr in DECODE_STATE:
                        stored.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                    if isinstance(part, ast.Name) and part.id in DECODE_STATE and in_selectors:
                        stored.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not stored


def test_the_readme_stays_short_and_links_into_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    linked = set(re.findall(r"\]\((docs/[^)#]+)", readme))
    assert linked and all((ROOT / page).is_file() for page in linked)
