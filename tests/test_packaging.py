"""What the built package holds: every package folder of the source named in pyproject.toml's
``packages`` (a folder left out would be missing from the wheel, though the checkout imports
it), under its import name (``models/`` is ``rationale_cli.models``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed_under_its_import_name():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {folder: name for name, folder in setuptools["package-dir"].items()}
    found = set()
    for init in [*(ROOT / "rationale_cli").rglob("__init__.py"), *(ROOT / "models").rglob("__init__.py")]:
        parts = init.parent.relative_to(ROOT).parts
        found.add(".".join([mapped.get(parts[0], parts[0]), *parts[1:]]))
    assert found == set(setuptools["packages"])
    assert mapped == {"models": "rationale_cli.models"}
