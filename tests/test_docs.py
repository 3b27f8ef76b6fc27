"""Every code example of the documentation runs (docs/**/*.md and README.md).

Each ```bash and ```python block is taken from the page, in page order, and:

- run for real (the default): each ``rationale ...`` command in-process on the real
  command line, in a temporary folder of its own per page that holds a copy of
  ``examples/`` (so the pages' relative paths work), and each Python block executed
  there. ``rationale train`` gets fast settings appended (the command line's last value
  wins): one epoch, a CNN encoder and small sizes, so the examples stay quick; an
  identical training command (fast settings included) trained once is copied, not
  trained again. A page that uses ``runs/demo`` without training it gets the tutorial's
  run (``rationale train --data demo --config examples/demo.toml --out runs/demo``,
  trained with the same settings);
- ``<!-- docs-test: parse-only -->`` before a block (too slow, a cluster, torchrun, data
  files from elsewhere): every ``rationale`` command line in it, and the ``rationale_cli``
  part of a ``torchrun``/``python -m rationale_cli`` line, must parse against the real
  command (click's ``make_context``: unknown options, missing arguments and wrong types
  fail); other lines in it (``python3 -m venv``, ``jq``) are not run;
- ``<!-- docs-test: import-only -->`` before a Python block: it must compile and its
  imports run;
- ``<!-- docs-test: not-cli -->`` before a bash block (set-up, pip, mkdocs): not run, and
  it must hold no ``rationale`` command, so no example of the toolkit hides there.

The generated parts of the site (docs/hooks.py) are checked here too.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from rationale_cli.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]
MODES = {"run", "parse-only", "import-only", "not-cli"}
BLOCK = re.compile(r"(?:^<!-- docs-test: (?P<mode>[a-z-]+) -->\n)?^```(?P<lang>[a-z]*)\n(?P<body>.*?)^```$",
                   re.S | re.M)
FAST_TRAIN = ["--epochs", "1", "--encoder", "cnn", "--embedding-dim", "16", "--hidden-size", "16",
              "--batch-size", "50"]
TUTORIAL_RUN = ["train", "--data", "demo", "--config", "examples/demo.toml", "--out", "runs/demo"]
SEPARATORS = {"|", "||", "&&", ";", "&"}
REDIRECTS = {"<", ">", ">>", "2>", "<<"}


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    mode: str
    body: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The bash and python blocks of ``page``, with the mode the comment before each gives."""
    text = page.read_text(encoding="utf-8") if text is None else text
    found = []
    for match in BLOCK.finditer(text):
        if match.group("lang") not in ("bash", "python"):
            continue
        mode = match.group("mode") or "run"
        line = text.count("\n", 0, match.start("body"))
        found.append(Block(page, line, match.group("lang"), mode, match.group("body")))
    return found


def command_lines(body: str) -> list[list[str]]:
    """Every simple command of a bash block as its words: continuation lines joined,
    comments dropped, split at pipes, ``&&`` and ``;``, redirections left out."""
    commands = []
    for line in body.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words, skip = [], False
        for word in lexer:
            if skip:
                skip = False
            elif word in SEPARATORS:
                if words:
                    commands.append(words)
                words = []
            elif word in REDIRECTS:
                skip = True
            else:
                words.append(word)
        if words:
            commands.append(words)
    return commands


def cli_args(words: list[str]) -> list[str] | None:
    """The arguments of the ``rationale`` command a command line runs, or None."""
    name = Path(words[0]).name
    if name == "rationale":
        return words[1:]
    if "-m" in words and name in ("torchrun", "python", "python3"):
        at = words.index("-m")
        if words[at + 1:at + 2] == ["rationale_cli"]:
            return words[at + 2:]
    return None


class ParseError(Exception):
    """A command line the real command refuses (click's usage error, as its message)."""


def parse(args: list[str]) -> None:
    """Parse ``rationale ARGS`` against the real command, as a shell would run it (no callback)."""
    group = typer.main.get_command(app)
    root = group.context_class(group, info_name="rationale")  # typer's own click, or click
    if not args or args[0] not in group.commands:
        raise ParseError(f"no such command: rationale {' '.join(args[:1])}")
    command = group.commands[args[0]]
    try:
        with command.make_context(args[0], list(args[1:]), parent=root):
            pass
    except Exception as err:
        if not hasattr(err, "format_message"):  # not a usage error: a bug
            raise
        raise ParseError(f"{type(err).__name__}: {err.format_message()}") from None


def examples() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


# ----------------------------------------------------------------------------- the blocks themselves

def test_the_docs_have_examples_and_known_modes():
    found = examples()
    assert len({block.page for block in found}) >= 8
    for block in found:
        assert block.mode in MODES, f"{block}: unknown docs-test mode {block.mode!r}"
        if block.lang == "python":
            assert block.mode in ("run", "import-only"), f"{block}: a python block runs or is import-only"


@pytest.mark.parametrize("block", [b for b in examples() if b.mode == "not-cli"], ids=str)
def test_set_up_blocks_hold_no_command_of_the_toolkit(block):
    for words in command_lines(block.body):
        assert cli_args(words) is None, f"{block}: {' '.join(words)} must be run or parsed: not in a not-cli block"


@pytest.mark.parametrize("block", [b for b in examples() if b.lang == "bash" and b.mode != "not-cli"], ids=str)
def test_every_command_line_parses(block):
    lines = [cli_args(words) for words in command_lines(block.body)]
    if block.mode == "run":
        assert all(args is not None for args in lines), f"{block}: a line that is no rationale command"
    lines = [args for args in lines if args is not None]  # parse-only blocks may hold set-up lines too
    assert lines, f"{block}: no rationale command in it"
    for args in lines:
        try:
            parse(args)
        except ParseError as err:
            pytest.fail(f"{block}: rationale {shlex.join(args)}: {err}")


@pytest.mark.parametrize("block", [b for b in examples() if b.mode == "import-only"], ids=str)
def test_import_only_blocks_compile_and_import(block):
    tree = ast.parse(block.body, filename=str(block))
    imports = ast.Module(body=[node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))],
                         type_ignores=[])
    assert imports.body, f"{block}: nothing to import"
    exec(compile(imports, str(block), "exec"), {})


class Runner:
    """Runs the blocks of pages, sharing identical training runs between them."""

    def __init__(self, base: Path):
        self.base = base
        self.cli = CliRunner()
        self.trained: dict[tuple[str, ...], Path] = {}

    def folder(self, name: str) -> Path:
        folder = self.base / name
        folder.mkdir()
        shutil.copytree(ROOT / "examples", folder / "examples")
        return folder

    def invoke(self, folder: Path, args: list[str], where: str) -> None:
        if args[0] == "train":
            args = args + FAST_TRAIN
            out = args[args.index("--out") + 1]
            key = tuple(a for i, a in enumerate(args) if a != out or args[i - 1] != "--out")
            if key in self.trained:
                shutil.copytree(self.trained[key], folder / out)
                return
        with chdir(folder):
            result = self.cli.invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 0, f"{where}: rationale {shlex.join(args)} exited {result.exit_code}:\n" \
                                      f"{result.output[-3000:]}"
        if args[0] == "train":
            self.trained[key] = folder / out

    def run_page(self, page: Path, text: str | None = None) -> Path:
        folder = self.folder(page.relative_to(ROOT).as_posix().replace("/", "-"))
        runnable = [block for block in blocks(page, text) if block.mode == "run"]
        commands = [cli_args(words) for b in runnable if b.lang == "bash" for words in command_lines(b.body)]
        trains_demo = any(args and args[0] == "train" and "runs/demo" in args for args in commands)
        uses_demo = any("runs/demo" in block.body for block in runnable)
        if uses_demo and not trains_demo:
            self.invoke(folder, TUTORIAL_RUN, f"{page.name} (its runs/demo)")
        for block in runnable:
            if block.lang == "python":
                with chdir(folder):
                    exec(compile(block.body, str(block), "exec"), {"__name__": "docs_example"})
                continue
            for words in command_lines(block.body):
                args = cli_args(words)
                assert args is not None, f"{block}: {' '.join(words)} is no rationale command: mark the block"
                self.invoke(folder, args, str(block))
        return folder


class chdir:
    def __init__(self, path: Path):
        self.path, self.old = path, None

    def __enter__(self):
        import os

        self.old = os.getcwd()
        os.chdir(self.path)

    def __exit__(self, *exc):
        import os

        os.chdir(self.old)


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner(tmp_path_factory.mktemp("docs"))


RUN_PAGES = [page for page in PAGES if any(block.mode == "run" for block in blocks(page))]


# files a page's examples must leave behind (beyond exiting with status 0)
LEAVES = {
    "docs/tutorial.md": ("runs/demo/model.safetensors", "explain.html", "metrics.json", "predictions.jsonl",
                         "report.html"),
    "docs/how-to/annotate.md": ("annotated.jsonl", "merged.jsonl", "annotated.csv", "fixed.jsonl"),
    "docs/how-to/train-your-data.md": ("reviews.csv", "runs/mine/model.safetensors"),
    "docs/reference/python-api.md": ("runs/api-demo/model.safetensors", "runs/api-demo.html", "runs/api-demo.jsonl"),
}


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_the_examples_of_a_page_run(runner, page):
    folder = runner.run_page(page)
    for name in LEAVES.get(page.relative_to(ROOT).as_posix(), ()):
        assert (folder / name).is_file(), f"{page.name} left no {name}"
    if page.name == "annotate.md":  # the shards merged are the unsharded output
        assert (folder / "merged.jsonl").read_text() == (folder / "annotated.jsonl").read_text()


# ----------------------------------------------------------------------------- the checks can fail

BROKEN = """
```bash
rationale train --data demo --out runs/x --no-such-option 3
```
"""


def test_a_broken_example_fails(runner, tmp_path):
    page = tmp_path / "broken.md"
    page.write_text(BROKEN)
    (block,) = blocks(page)
    with pytest.raises(ParseError, match="NoSuchOption.*no-such-option"):
        parse(command_lines(block.body)[0][1:])
    with pytest.raises(ParseError, match="MissingParameter"):
        parse(["evaluate", "runs/x"])
    with pytest.raises(ParseError, match="BadParameter.*--batch-size"):
        parse(["predict", "runs/x", "in.jsonl", "--out", "o.jsonl", "--batch-size", "many"])
    with pytest.raises(ParseError, match="no such command"):
        parse(["trian", "--data", "demo"])
    with pytest.raises(AssertionError, match="exited"):
        runner.invoke(runner.folder("failing"), ["explain", "runs/none", "text"], "broken.md")


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="needs the git checkout")
def test_the_files_the_tutorial_writes_are_ignored_by_git():
    import subprocess

    written = [words[at + 1] for block in blocks(DOCS / "tutorial.md") for words in command_lines(block.body)
               for at, word in enumerate(words[:-1]) if word in ("--out", "--json", "--html", "--per-document")]
    assert "metrics.json" in written
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *written], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert sorted(set(written) - set(ignored)) == []


def test_command_lines_are_split_as_a_shell_would():
    body = ("rationale predict RUN - --out - < reviews.jsonl | jq .prediction   # a comment\n"
            "torchrun --nproc-per-node 2 -m rationale_cli train \\\n  --data demo --out runs/ddp\n")
    lines = command_lines(body)
    assert lines == [["rationale", "predict", "RUN", "-", "--out", "-"], ["jq", ".prediction"],
                     ["torchrun", "--nproc-per-node", "2", "-m", "rationale_cli", "train", "--data", "demo",
                      "--out", "runs/ddp"]]
    assert [cli_args(words) for words in lines] == [["predict", "RUN", "-", "--out", "-"], None,
                                                     ["train", "--data", "demo", "--out", "runs/ddp"]]


# ----------------------------------------------------------------------------- the generated parts

def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_has_every_command_and_option():
    started = time.monotonic()
    text = hooks().cli_reference()
    group = typer.main.get_command(app)
    root = group.context_class(group, info_name="rationale")
    for name, command in group.commands.items():
        assert f"\n## {name}\n" in text, name
        for param in command.get_params(command.context_class(command, info_name=name, parent=root)):
            for opt in param.opts if param.param_type_name == "option" else [param.name]:
                assert opt in text, f"{name} {opt}"
    assert "**Arguments**" in text and "**Extractor options (each applies to the extractors it names)**" in text
    assert "[default: 4096]" in text.replace("\\[", "[")  # predict --window's default
    assert time.monotonic() - started < 30


def test_the_extractor_table_is_the_registry():
    from rationale_cli.models.options import spelled
    from rationale_cli.models.selectors import SELECTORS, option_specs
    from rationale_cli.runs.flags import flag_of

    module = hooks()
    table = module.extractor_table()
    rows = [line for line in table.splitlines() if line.startswith("| `") and not line.startswith("| `--")]
    assert [row.split("|")[1].strip().strip("`") for row in rows] == list(SELECTORS)
    for row, (name, cls) in zip(rows, SELECTORS.items()):
        assert module.inline(spelled(cls.summary, flag_of)) in row
        budget = option_specs(name).get("budget")
        if budget is not None:
            assert spelled(budget.role, flag_of) in row and f"<code>{budget.default_shown()}</code>" in row


def test_every_marker_names_a_generated_part():
    module = hooks()
    for page in DOCS.rglob("*.md"):
        for name in module.MARKER.findall(page.read_text(encoding="utf-8")):
            assert name in module.GENERATORS, f"{page}: {name}"
    with pytest.raises(ValueError, match="unknown generated part"):
        module.expand("<!-- generated: no-such-part -->\n")
