"""The walk of one document through ``rationale predict`` that docs/architecture.md shows,
traced: the modules it passes from the line read to the line written, in the page's order,
and none entered twice but those the page names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rationale_cli as rationale
import rationale_cli.models.native as native
from rationale_cli.cli import app

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
GENERATOR = 0x20 | 0x200  # CO_GENERATOR, CO_ASYNC_GENERATOR
# the model runs the encoder modules twice, for its selector encoder and its predictor encoder;
# the dependent scan asks HardKuma's selector and distribution for each token's z in turn;
# HardKuma's distribution is built, then asked for its atoms and mean; a record is built by the
# reader, and its rationale mask turned into spans for the line
TWICE_BY_DESIGN = {"rationale_cli.models.encoders.base", "rationale_cli.models.encoders.rcnn", "rationale_cli.models.encoders.recurrence", "rationale_cli.models.native",
                   "rationale_cli.models.native.dropout", "rationale_cli.models.native.token_rows", "rationale_cli.models.native.rcnn",
                   "rationale_cli.models.native.hardkuma_scan", "rationale_cli.models.distributions.hardkuma",
                   "rationale_cli.data.records"}


def module_of(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name.split(".")[0] == "rationale_cli" else None


def documented_walk() -> list[str]:
    block = re.search(r"<!-- walk: hardkuma rcnn -->\n```\n(.*?)```", PAGE.read_text(), re.S).group(1)
    return [line.split()[0] for line in block.splitlines() if line.strip()]


def traced_entries(run: Path, document: Path, out: Path) -> list[str]:
    """The toolkit's modules entered while predict runs, in order: a call from another module
    (a call within a module, a return or a generator resumed is no entry)."""
    entries, generators = [], {}  # generator frames kept alive, so that no id is reused

    def profile(frame, event, arg):
        if event != "call":
            return
        module = module_of(frame)
        if module is None:
            return
        if frame.f_code.co_flags & GENERATOR:
            if id(frame) in generators:
                return
            generators[id(frame)] = frame
        caller = frame.f_back
        if caller is None or module_of(caller) != module:
            entries.append(module)

    sys.setprofile(profile)
    try:
        result = CliRunner().invoke(app, ["predict", str(run), str(document), "--format", "text", "--out", str(out)])
    finally:
        sys.setprofile(None)
    assert result.exit_code == 0, result.output
    return entries


@pytest.fixture(scope="module")
def hardkuma_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("walk") / "run"
    rationale.train("demo", out=out, extractor="hardkuma", encoder="rcnn", embedding_dim=8, hidden_size=8,
                    epochs=1, seed=0, budget=0.6)
    return out


@pytest.mark.skipif(native.library("rcnn_steps") is None, reason="no C compiler: the PyTorch loops run instead")
def test_one_document_walks_through_predict_as_the_architecture_page_says(hardkuma_run, tmp_path):
    document = tmp_path / "one.txt"
    document.write_text("a deep amber pour with a thick white head and a smell of caramel\n")
    entries = traced_entries(hardkuma_run, document, tmp_path / "out.jsonl")
    read = entries.index("rationale_cli.data.readers.text")
    # the window that asks for the document is where its walk starts (annotation is pulled)
    start = max(i for i in range(read) if entries[i] == "rationale_cli.annotation.windows")
    end = entries.index("rationale_cli.runtime.safe_json", start)
    walk = entries[start : end + 1]
    assert list(dict.fromkeys(walk)) == documented_walk()
    assert {module for module in walk if walk.count(module) > 1} == TWICE_BY_DESIGN
