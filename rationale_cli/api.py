"""The Python API: train, load, predict, explain and evaluate without the command line.

``train`` takes the options of ``rationale train`` as keywords and keeps the model in
memory unless ``out`` names a run directory; ``load`` opens a run directory. Both give
a :class:`Model`, whose ``predict`` turns strings, records or dicts into
:class:`Rationale` objects (or a pandas DataFrame with ``frame``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from rationale_cli.runs.config import TrainConfig, resolve
from rationale_cli.runtime.devices import resolve_device
from rationale_cli.runtime.errors import UserError
from rationale_cli.runs.inference import Output, run_model
from rationale_cli.output.prediction import prediction_json
from rationale_cli.data.records import Record
from rationale_cli.runs.task import Task
from rationale_cli.data.vocab import Vocab
from models.model import RationaleModel
from models.selection import Selector
from models.selectors import all_option_specs

Document = str | Record | dict


@dataclass
class Rationale:
    """One document's prediction and rationale: ``spans`` are token spans (end exclusive),
    ``char_spans`` character spans into ``text`` (None without raw text), ``selected``
    0/1 per token and ``scores`` the per-token selection scores."""

    id: str
    tokens: list[str]
    text: str | None
    prediction: float | str
    probabilities: dict[str, float] | None
    spans: list[tuple[int, int]]
    char_spans: list[tuple[int, int]] | None
    selected: list[int]
    scores: list[float]
    label: float | str | None = None

    @property
    def selected_tokens(self) -> list[str]:
        return [token for token, z in zip(self.tokens, self.selected) if z]

    @property
    def pieces(self) -> list[str]:
        """The rationale as text: each span's words, from the raw text where there is one."""
        if self.char_spans is not None:
            return [self.text[start:end] for start, end in self.char_spans]
        return [" ".join(self.tokens[start:end]) for start, end in self.spans]

    @property
    def rationale_text(self) -> str:
        """The pieces joined with " … " (the ``rationale_text`` column of tables)."""
        return " … ".join(self.pieces)

    @classmethod
    def of(cls, output: Output) -> "Rationale":
        line = prediction_json(output)
        record = output.record
        return cls(id=record.id, tokens=record.tokens, text=record.text, prediction=output.prediction,
                   probabilities=line.get("probabilities"), spans=[tuple(s) for s in line["rationale"]],
                   char_spans=[tuple(s) for s in line["char_spans"]] if "char_spans" in line else None,
                   selected=output.selected, scores=output.scores, label=record.label)

    def to_dict(self) -> dict[str, Any]:
        """The line ``rationale predict`` writes for this document."""
        line = {"id": self.id, "prediction": self.prediction}
        if self.probabilities is not None:
            line["probabilities"] = self.probabilities
        if self.label is not None:
            line["label"] = self.label
        line["rationale"] = [list(s) for s in self.spans]
        if self.char_spans is not None:
            line["char_spans"] = [list(s) for s in self.char_spans]
        line["selected_tokens"] = self.selected_tokens
        line["token_scores"] = self.scores
        return line


def as_records(documents: Iterable[Document]) -> list[Record]:
    """Records from a list of documents (:func:`as_record`); one string is refused, as its
    characters would each be a document."""
    if isinstance(documents, (str, dict, Record)):
        raise UserError("expected a list of documents, got one document; put it in a list")
    return [as_record(doc, i) for i, doc in enumerate(documents)]


def as_record(document: Document, index: int) -> Record:
    """A record from a string (tokenized as ``rationale`` tokenizes raw text), a
    :class:`Record`, or a dict with ``text`` or ``tokens`` (and optionally ``id``, ``label``)."""
    from rationale_cli.data.tokenize import tokenize

    if isinstance(document, Record):
        return document
    if isinstance(document, str):
        document = {"text": document}
    if not isinstance(document, dict):
        raise UserError(f"document {index}: expected a string, a Record or a dict, got {type(document).__name__}")
    name = str(document.get("id", index))
    if "tokens" in document:
        tokens, text, offsets = document["tokens"], None, None
        if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
            raise UserError(f"document {name}: 'tokens' must be a list of strings")
        tokens = list(tokens)
    elif "text" in document:
        text = document["text"]
        if not isinstance(text, str):
            raise UserError(f"document {name}: 'text' must be a string, got {type(text).__name__}")
        tokens, offsets = tokenize(text)
    else:
        raise UserError(f"document {name}: a dict needs 'text' or 'tokens'")
    if not tokens:
        raise UserError(f"document {name}: empty text")
    return Record(id=name, tokens=tokens, label=document.get("label"), text=text, offsets=offsets)


class Model:
    """A trained model with its vocabulary and task, ready to use on documents."""

    def __init__(self, model: RationaleModel, vocab: Vocab, task: Task, config: TrainConfig,
                 metrics: dict | None = None, device: str | torch.device = "cpu", stopped: str | None = None):
        self.model, self.vocab, self.task, self.config, self.metrics = model, vocab, task, config, metrics
        self.stopped = stopped  # why training stopped before its last epoch (early stop, time limit, divergence)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.model.to(self.device).eval()

    def predict(self, documents: Iterable[Document], *, batch_size: int = 64) -> list[Rationale]:
        """Prediction and rationale of each document, in order."""
        records = as_records(documents)
        outputs = run_model(self.model, self.vocab, self.task, records, batch_size=batch_size, device=self.device)
        return [Rationale.of(out) for out in outputs]

    def frame(self, documents: Iterable[Document], *, batch_size: int = 64):
        """:meth:`predict` as a pandas DataFrame, one row per document (the columns of
        ``rationale predict``'s JSON lines, plus ``text`` and ``rationale_text``)."""
        import pandas as pd

        rows = []
        for result in self.predict(documents, batch_size=batch_size):
            row = {**result.to_dict(), "text": result.text, "rationale_text": result.rationale_text}
            rows.append(row)
        return pd.DataFrame(rows)

    def explain(self, documents: Iterable[Document], *, html: str | Path | None = None,
                console=None) -> list[Rationale]:
        """:meth:`predict`, with each document printed with its rationale highlighted (on
        ``console``, a rich Console, by default the terminal) and, with ``html``, a page."""
        from rich.console import Console

        from rationale_cli.runtime.atomic import write_text_atomic
        from rationale_cli.output.render import print_documents, render_html

        outputs = list(run_model(self.model, self.vocab, self.task, as_records(documents), device=self.device))
        items = print_documents(console or Console(), outputs)
        if html is not None:
            write_text_atomic(Path(html), render_html(items, title="Rationales"))
        return [Rationale.of(out) for out in outputs]

    def evaluate(self, data: str | Path | Sequence[Document], *, format: str = "auto", aspect: int | None = None,
                 split: str = "test", faithfulness: bool = True, batch_size: int = 64) -> dict:
        """The metrics of ``rationale evaluate``: the task metric, the selection rate, token
        precision/recall/F1 against gold rationales with chance levels, ERASER's metrics
        (``eraser``) and, with ``faithfulness``, the reruns' scores (``faithfulness``).
        ``data``: what ``rationale evaluate`` reads (a path or 'demo'; its ``split``), or
        labelled documents."""
        from rationale_cli.data import sources
        from rationale_cli.evaluation.scoring import evaluate_model

        if isinstance(data, (str, Path)):
            records = list(sources.run_documents(str(data), self.config, fmt=format, aspect=aspect, split=split))
        else:
            records = as_records(data)
        if not records:
            raise UserError("nothing to evaluate: no documents")
        return evaluate_model(self, records, batch_size=batch_size, device=self.device, faithfulness=faithfulness)[0]


def load(path: str | Path, device: str = "auto") -> Model:
    """The model of a run directory written by ``rationale train`` (or :func:`train`)."""
    from rationale_cli.runs.run_directory import load_run, read_json

    run = load_run(Path(path), resolve_device(device))
    metrics_file = Path(path) / "metrics.json"
    metrics = read_json(metrics_file) if metrics_file.is_file() else None
    return Model(run.model, run.vocab, run.task, run.config, metrics, device=next(run.model.parameters()).device)


def train(data: str | Path, *, out: str | Path | None = None, force: bool = False, config: str | Path | None = None,
          selector: Selector | type[Selector] | None = None, progress: bool = False, **options) -> Model:
    """Train as ``rationale train --data DATA`` with ``options`` (the same names, with
    underscores: ``extractor="hardkuma", budget=0.2, epochs=10``; a TOML ``config`` too).
    Nothing is written unless ``out`` names a run directory (replaced only with
    ``force``); ``progress`` prints the epoch lines. ``selector``, a
    :class:`~models.selection.Selector` subclass or instance, replaces the named extractor
    (in memory only: a run directory is for registered extractors, which it can rebuild)."""
    from rich.console import Console

    from rationale_cli.training.trainer import train_config

    if selector is not None and out is not None:
        raise UserError("a run directory is written for a registered extractor only; train your own selector "
                        "without out, or add it to models.selectors.SELECTORS")
    named = sorted(set(options) & ({"extractor"} | set(all_option_specs())))
    if selector is not None and named:
        raise UserError(f"{named[0]}: an option of the named extractors; give your own selector its options "
                        "when you build it")
    cfg = resolve(config, {**options, "data": str(data)})
    console = Console(stderr=True, markup=False) if progress else None
    trained = train_config(cfg, None if out is None else Path(out), console, force=force, selector=selector)
    return Model(trained.model, trained.vocab, trained.task, trained.config, trained.metrics,
                 device=next(trained.model.parameters()).device, stopped=trained.state.stop)
