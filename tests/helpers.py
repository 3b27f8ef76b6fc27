"""Small helpers shared by the tests."""

import gzip
import importlib.util
import sys
from pathlib import Path


def write(path, text: str):
    """Write ``text`` to ``path`` (gzip-compressed for ``*.gz``) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


DEMO_SIZES = ["--embedding-dim", "50", "--hidden-size", "64", "--batch-size", "20", "--lr", "0.002", "--patience", "0"]


def train_on_demo(tmp_path, *options: str) -> dict:
    """Train on the synthetic demo corpus with the demo's sizes and ``options`` (no full-text
    reference: these runs are about their rationales), evaluate on its test split and return the
    test metrics."""
    import json

    from typer.testing import CliRunner

    from rationale_cli.cli import app

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(run), "--force", "--no-reference", *DEMO_SIZES,
                                 *options])
    assert result.exit_code == 0, result.output
    metrics = tmp_path / "test.json"
    result = CliRunner().invoke(app, ["evaluate", str(run), "demo", "--json", str(metrics), "--no-faithfulness"])
    assert result.exit_code == 0, result.output
    return json.loads(metrics.read_text())


def trained_on_part_of_demo(out, **options):
    """A small run (CNN, 16 wide, one epoch) on the first 400 training and 80 validation
    documents of the demo corpus, read once, with the option values ``options``."""
    from rationale_cli.data import sources
    from rationale_cli.runs.config import from_values
    from rationale_cli.training.trainer import train_config

    train, valid = sources.load("demo", "train")[:400], sources.load("demo", "valid")[:80]
    config = from_values({"data": "demo", "encoder": "cnn", "embedding_dim": 16, "hidden_size": 16, "batch_size": 100,
                          "epochs": 1, "seed": 0, **options})
    return train_config(config, out, data=(train, valid))


BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_script(name: str):
    """The benchmark script ``name`` as a module; its imports of the other scripts resolve as when it
    runs (``python benchmarks/NAME.py`` puts benchmarks/ first on the path)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
