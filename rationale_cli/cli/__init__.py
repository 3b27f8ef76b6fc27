"""The ``rationale`` command: train, tune, predict, merge, vectors, explain, evaluate, score, report, demo.

Thin by design, one module per command: each parses its options, calls library
functions and prints with rich. Progress and logs go to stderr, data to stdout or
files. A user error prints one line and exits with status 2. :mod:`._util` holds the
Typer ``app`` the commands register on and what they share.
"""

from __future__ import annotations

from rationale_cli.cli._util import app
from rationale_cli.cli.demo import DEMO_SETTINGS, demo
from rationale_cli.cli.evaluate import evaluate
from rationale_cli.cli.explain import explain
from rationale_cli.cli.merge import merge
from rationale_cli.cli.predict import predict
from rationale_cli.cli.report import report
from rationale_cli.cli.score import score

# each command module registers its command on ``app``, in the order --help lists them
from rationale_cli.cli.train import train
from rationale_cli.cli.tune import tune
from rationale_cli.cli.vectors import vectors

__all__ = ["app", "main", "DEMO_SETTINGS", "train", "tune", "predict", "merge", "vectors", "explain", "evaluate", "score",
           "demo", "report"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
