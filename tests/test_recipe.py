"""The recipes of docs/architecture.md ("Adding things") for a new extractor and a new command,
followed on a copy of the source: a toy extractor in each family's folder of
``models/selectors/`` and in a new family, registered in ``models/selectors/__init__.py``, and
a toy command in ``rationale_cli/cli/``, imported by ``cli/__init__.py``. The house checks
(``tests/test_house.py``, run against the copy) pass, and the copy, loaded as a built wheel
would hold it, has the extractors in its registry and the command on its ``app``. And the
checks are no formality: a family's folder given a 13th module or a decoding setting, or
``cli/`` a module that is no command, fails them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = sorted(p.parent.name for p in (ROOT / "models" / "selectors").glob("*/__init__.py"))
NEW_FAMILY = "toys"

EXTRACTOR = '''"""A toy extractor of the family {family}: every token, as the recipe adds one."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from rationale_cli.models.options import Options, option
from rationale_cli.models.selection import Selection, Selector


@dataclass(frozen=True)
class {cls}Options(Options):
    toy_share: float = option(1.0, "share of the tokens the toy keeps (all of them, whatever it says)", low=0.0)


class {cls}(Selector):
    Options = {cls}Options
    needs_states = False
    summary = "every token: a toy"
    default_encoder = "cnn"

    def __init__(self, input_size: int = 0, **options):
        super().__init__(**options)

    def forward(self, states: Tensor, mask: Tensor) -> Selection:
        return Selection.single(mask)

    def decode_with_scores(self, states: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        return mask, mask
'''

COMMAND = '''"""``rationale {name}``: a toy command, as the recipe adds one."""

from __future__ import annotations

from rationale_cli.cli._util import Command, app, friendly, stdout


@app.command(cls=Command)
@friendly
def {name}():
    """Say the toy's word."""
    stdout().print("{name}")
'''

# the copy loaded as the wheel pyproject.toml describes would hold it: only the packages it
# lists, each from its folder (package-dir included); nothing from the installed checkout
LOAD_AS_BUILT = r'''
import importlib.abc, importlib.util, sys, tomllib
from pathlib import Path

root = Path(sys.argv[1])
setup = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
packages, package_dir = set(setup["packages"]), setup.get("package-dir", {})


def folder(package):
    prefix = max((p for p in package_dir if package == p or package.startswith(p + ".")), key=len, default=None)
    if prefix is None:
        return root.joinpath(*package.split("."))
    return (root / package_dir[prefix]).joinpath(*package[len(prefix):].split(".")[1:])


class Built(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] != "rationale_cli":
            return None
        if name in packages:
            where = folder(name)
            return importlib.util.spec_from_file_location(name, where / "__init__.py",
                                                          submodule_search_locations=[str(where)])
        parent, _, leaf = name.rpartition(".")
        file = folder(parent) / f"{leaf}.py"
        if parent not in packages or not file.is_file():
            raise ModuleNotFoundError(f"{name} is in no package of pyproject.toml", name=name)
        return importlib.util.spec_from_file_location(name, file)


sys.meta_path.insert(0, Built())

import torch
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.models.selectors import SELECTORS, build_selector

for name in sys.argv[3].split(","):
    selector = build_selector(name, 4, toy_share=0.5)
    assert selector.options.toy_share == 0.5, name
    assert selector.decode(torch.zeros(1, 3, 4), torch.ones(1, 3)).tolist() == [[1.0, 1.0, 1.0]], name
said = CliRunner().invoke(app, [sys.argv[2]])
assert said.exit_code == 0 and said.output == sys.argv[2] + "\n", said.output
listed = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
assert listed.exit_code == 0 and "--toy-share" in listed.output, listed.output
assert all(name in listed.output for name in sys.argv[3].split(",")), listed.output
outside = [module.__file__ for name, module in sys.modules.items() if name.split(".")[0] == "rationale_cli"
           and getattr(module, "__file__", None) and not Path(module.__file__).is_relative_to(root)]
assert not outside, outside
print("loaded", sorted(SELECTORS))
'''


@pytest.fixture
def copy(tmp_path) -> Path:
    """The source tree, as the recipe and the house checks see it."""
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info")
    for folder in ("rationale_cli", "models", "docs"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=skip)
    for file in ("pyproject.toml", "README.md", "tests/test_house.py"):
        (tmp_path / file).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / file, tmp_path / file)
    return tmp_path


def insert_after_last(path: Path, pattern: str, line: str) -> None:
    """``line`` after the last line that matches ``pattern`` (the recipe's "beside the others")."""
    lines = path.read_text().splitlines(keepends=True)
    last = max(i for i, text in enumerate(lines) if re.match(pattern, text))
    lines.insert(last + 1, line + "\n")
    path.write_text("".join(lines))


def add_extractor(root: Path, family: str, module: str = "toy") -> str:
    """The recipe for an extractor: a module in its family's folder (a new family: a folder
    with its ``__init__.py`` and its package in pyproject.toml), imported and registered by name
    in ``models/selectors/__init__.py``. Returns the name it is registered under."""
    folder = root / "models" / "selectors" / family
    if not folder.is_dir():
        folder.mkdir()
        (folder / "__init__.py").write_text(f'"""Toy extractors (the family {family}, of no paper)."""\n')
        setup = root / "pyproject.toml"
        text = setup.read_text()
        end = text.index("]", text.index("\npackages = ["))
        setup.write_text(f'{text[:end]}    "rationale_cli.models.selectors.{family}",\n{text[end:]}')
    cls = f"{module.title().replace('_', '')}{family.title()}Selector"
    (folder / f"{module}.py").write_text(EXTRACTOR.format(family=family, cls=cls))
    registry = root / "models" / "selectors" / "__init__.py"
    insert_after_last(registry, r"from rationale_cli\.models\.selectors\.",
                      f"from rationale_cli.models.selectors.{family}.{module} import {cls}")
    name = f"{module.replace('_', '-')}-{family}"
    insert_after_last(registry, r'    "[\w-]+": \w+Selector,$', f'    "{name}": {cls},')
    return name


def add_command(root: Path, name: str) -> None:
    """The recipe for a command: ``cli/NAME.py`` registering it, imported by ``cli/__init__.py``
    after the others and named in its ``__all__``."""
    (root / "rationale_cli" / "cli" / f"{name}.py").write_text(COMMAND.format(name=name))
    commands = root / "rationale_cli" / "cli" / "__init__.py"
    insert_after_last(commands, r"from rationale_cli\.cli\.(?!_util)", f"from rationale_cli.cli.{name} import {name}")
    commands.write_text(re.sub(r"(__all__ = \[.*?)\]", rf'\1, "{name}"]', commands.read_text(), count=1, flags=re.S))


def house(root: Path) -> subprocess.CompletedProcess:
    """tests/test_house.py run by pytest on the copy (its ROOT is its own checkout)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "tests/test_house.py"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_families_are_the_folders_the_page_names():
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert FAMILIES and all(f"`{family}/`" in page for family in FAMILIES)


def test_the_recipes_fit_every_family_a_new_family_and_the_commands(copy):
    names = [add_extractor(copy, family) for family in [*FAMILIES, NEW_FAMILY]]
    add_command(copy, "toy")
    checked = house(copy)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    loaded = subprocess.run([sys.executable, "-c", LOAD_AS_BUILT, str(copy), "toy", ",".join(names)], cwd=copy,
                            capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert all(name in loaded.stdout for name in names)


def test_the_house_checks_fail_a_full_folder_a_stored_decoding_setting_and_a_module_of_cli_that_is_no_command(copy):
    family = FAMILIES[0]
    folder = copy / "models" / "selectors" / family
    for i in range(13 - len(list(folder.glob("*.py")))):
        add_extractor(copy, family, f"toy_{i}")
    (copy / "rationale_cli" / "cli" / "_tables.py").write_text('"""A second helper of the commands."""\n')
    # a decoding setting held in a family's folder, one level below selectors/
    with (folder / "toy_0.py").open("a") as module:
        module.write("\ntest_rate = 0.2\n")
    checked = house(copy)
    assert checked.returncode != 0
    failed = set(re.findall(r"^FAILED tests/test_house\.py::(\S+)", checked.stdout, re.M))
    assert failed == {"test_no_folder_holds_more_than_12_modules[models]",
                      "test_cli_holds_one_module_per_command_named_as_the_command_and_nothing_else",
                      "test_no_decoding_setting_is_stored_on_a_model"}, checked.stdout
