"""The Python API: train, tune, load, predict, explain and evaluate without the command line.

``train`` takes the options of ``rationale train`` as keywords and keeps the model in
memory unless ``out`` names a run directory; ``tune`` searches their hyperparameters as
``rationale tune`` does; ``predict`` annotates a corpus into a file as ``rationale predict``
does (the same request, the same library call); ``load`` opens a run directory. Both
``train`` and ``load`` give a :class:`Model`, whose ``predict`` turns strings, records or
dicts into :class:`Rationale` objects (or a pandas DataFrame with ``frame``). ``predict``, ``frame``,
``explain`` and ``evaluate`` decode the extractor's own way unless given a :class:`Decoding`
(a rate per document, a score threshold, a transition cost); ``Model.corpus_decoding`` finds
the threshold that holds a rate over a whole corpus.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import torch

from rationale_cli.data.sources import Document, as_records
from rationale_cli.data.vocab import Vocab
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.models.model import RationaleModel
from rationale_cli.models.selection import Selector
from rationale_cli.models.selectors import all_option_specs
from rationale_cli.output.prediction import Rationale
from rationale_cli.runs.config import TrainConfig, resolve
from rationale_cli.runs.inference import at_corpus_rate, run_model
from rationale_cli.runs.reference import Reference
from rationale_cli.runs.task import Task
from rationale_cli.runtime.devices import resolve_device
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.progress import Progress, no_progress

if TYPE_CHECKING:
    from rationale_cli.annotation.predict_job import Predicted

class Model:
    """A trained model with its vocabulary and task, ready to use on documents."""

    def __init__(self, model: RationaleModel, vocab: Vocab, task: Task, config: TrainConfig,
                 metrics: dict | None = None, device: str | torch.device = "cpu", stopped: str | None = None,
                 reference: Reference | None = None):
        self.model, self.vocab, self.task, self.config, self.metrics = model, vocab, task, config, metrics
        self.reference = reference  # the full-text reference trained beside it (evaluate scores it too)
        self.stopped = stopped  # why training stopped before its last epoch (early stop, time limit, divergence)
        self.device = resolve_device(device) if isinstance(device, str) else device
        self.model.to(self.device).eval()

    def predict(self, documents: Iterable[Document], *, batch_size: int = 64,
                decoding: Decoding = OWN) -> list[Rationale]:
        """Prediction and rationale of each document, in order, decoded as ``decoding`` says."""
        records = as_records(documents)
        outputs = run_model(self.model, self.vocab, self.task, records, batch_size=batch_size, device=self.device,
                            decoding=decoding)
        return [Rationale.of(out) for out in outputs]

    def frame(self, documents: Iterable[Document], *, batch_size: int = 64, decoding: Decoding = OWN):
        """:meth:`predict` as a pandas DataFrame, one row per document (the columns of
        ``rationale predict``'s JSON lines, plus ``text`` and ``rationale_text``)."""
        import pandas as pd

        rows = []
        for result in self.predict(documents, batch_size=batch_size, decoding=decoding):
            row = {**result.to_dict(), "text": result.text, "rationale_text": result.rationale_text}
            rows.append(row)
        return pd.DataFrame(rows)

    def explain(self, documents: Iterable[Document], *, html: str | Path | None = None,
                console=None, decoding: Decoding = OWN) -> list[Rationale]:
        """:meth:`predict`, with each document printed with its rationale highlighted (on
        ``console``, a rich Console, by default the terminal) and, with ``html``, a page."""
        from rich.console import Console

        from rationale_cli.output.render import print_documents, render_html
        from rationale_cli.runtime.atomic import write_text_atomic

        outputs = list(run_model(self.model, self.vocab, self.task, as_records(documents), device=self.device,
                                 decoding=decoding))
        items = print_documents(console or Console(), outputs)
        if html is not None:
            write_text_atomic(Path(html), render_html(items, title="Rationales"))
        return [Rationale.of(out) for out in outputs]

    def evaluate(self, data: str | Path | Sequence[Document], *, format: str = "auto", aspect: int | None = None,
                 split: str = "test", faithfulness: bool = True, batch_size: int = 64,
                 decoding: Decoding = OWN, rationale_label: str | None = None, spans_key: str | None = None) -> dict:
        """The metrics of ``rationale evaluate``: the task metric, the selection rate, token
        precision/recall/F1 against gold rationales with chance levels, ERASER's metrics
        (``eraser``), with ``faithfulness`` the reruns' scores (``faithfulness``), and the
        full-text reference's beside the model's (``full_text_reference``).
        ``data``: what ``rationale evaluate`` reads (a path or 'demo'; its ``split``; in an
        annotation tool's file the spans labelled ``rationale_label`` or in the span group
        ``spans_key``, by default the run's), or labelled documents."""
        from rationale_cli.data import sources
        from rationale_cli.evaluation.scoring import evaluate_model

        if isinstance(data, (str, Path)):
            records = list(sources.run_documents(str(data), self.config, fmt=format, aspect=aspect, split=split,
                                                 rationale_label=rationale_label, spans_key=spans_key))
        else:
            records = as_records(data)
        if not records:
            raise UserError("nothing to evaluate: no documents")
        return evaluate_model(self, records, batch_size=batch_size, device=self.device, faithfulness=faithfulness,
                              decoding=decoding)[0]

    def corpus_decoding(self, documents: Iterable[Document], rate: float, *, coherence: float | None = None,
                        sentences: bool = False, batch_size: int = 64) -> Decoding:
        """The decoding that keeps the share ``rate`` of all the ``documents``' tokens, each document
        those scored above one threshold (``rationale predict --rate R --rate-over corpus``), placed
        in runs at ``coherence`` or in whole ``sentences`` if asked."""
        decoding, _ = at_corpus_rate(self, str(rate), as_records(documents), coherence=coherence,
                                     sentences=sentences, batch_size=batch_size, device=self.device)
        return decoding


def load(path: str | Path, device: str = "auto") -> Model:
    """The model of a run directory written by ``rationale train`` (or :func:`train`)."""
    from rationale_cli.runs.run_directory import load_run, read_json

    run = load_run(Path(path), resolve_device(device))
    metrics_file = Path(path) / "metrics.json"
    metrics = read_json(metrics_file) if metrics_file.is_file() else None
    return Model(run.model, run.vocab, run.task, run.config, metrics, device=run.model.device,
                 reference=run.reference)


def train(data: str | Path, *, out: str | Path | None = None, force: bool = False, config: str | Path | None = None,
          selector: Selector | type[Selector] | None = None, progress: bool = False, **options) -> Model:
    """Train as ``rationale train --data DATA`` with ``options`` (the same names, with
    underscores: ``extractor="hardkuma", budget=0.2, epochs=10``; a TOML ``config`` too).
    Nothing is written unless ``out`` names a run directory (replaced only with
    ``force``); ``progress`` prints the epoch lines. ``selector``, a
    :class:`~rationale_cli.models.selection.Selector` subclass or instance, replaces the named extractor
    (in memory only: a run directory is for registered extractors, which it can rebuild)."""
    from rich.console import Console

    from rationale_cli.training.trainer import train_config

    if selector is not None and out is not None:
        raise UserError("a run directory is written for a registered extractor only; train your own selector "
                        "without out, or add it to rationale_cli.models.selectors.SELECTORS")
    named = sorted(set(options) & ({"extractor"} | set(all_option_specs())))
    if selector is not None and named:
        raise UserError(f"{named[0]}: an option of the named extractors; give your own selector its options "
                        "when you build it")
    cfg = resolve(config, {**options, "data": str(data)})
    console = Console(stderr=True, markup=False) if progress else None
    trained = train_config(cfg, None if out is None else Path(out), console, force=force, selector=selector)
    return Model(trained.model, trained.vocab, trained.task, trained.config, trained.metrics,
                 device=trained.model.device, stopped=trained.state.stop,
                 reference=trained.reference)


def tune(data: str | Path, *, out: str | Path, trials: int, storage: str | None = None,
         search_space: str | Path | None = None, study: str | None = None, timeout: float | None = None,
         config: str | Path | None = None, progress: bool = False, **options):
    """Search hyperparameters as ``rationale tune --data DATA --out OUT --trials N`` does, with
    ``options`` of ``rationale train`` fixed for every trial (the same names, with underscores:
    ``extractor="hardkuma", budget=0.2, epochs=10``); ``progress`` prints a line per finished
    trial. Returns the finished search (:class:`rationale_cli.tuning.job.Tuned`): its
    ``leaderboard``, ``best`` trial and ``best_run``, a run directory that :func:`load` opens.
    Needs Optuna (``pip install 'rationale-cli[tune]'``)."""
    from rich.console import Console

    from rationale_cli.tuning.job import tune as tune_study

    console = Console(stderr=True, markup=False) if progress else None
    return tune_study(Path(out), {**options, "data": str(data)}, trials=trials, storage=storage,
                      search_space=None if search_space is None else Path(search_space), study=study,
                      timeout=timeout, config=None if config is None else Path(config),
                      report=(lambda line: console.print(line, highlight=False)) if console else None)


def predict(run: str | Path, input: str | Path, out: str | Path, *, progress: Progress = no_progress,
            report: Callable[[str], None] = lambda line: None, **options) -> Predicted:
    """Annotate a corpus as ``rationale predict RUN INPUT --out OUT`` does, with ``options`` of
    that command (the same names, with underscores: ``batch_size=32, rate=0.1,
    rate_over="corpus", shard="0/4", force=True``), checked the same way before anything is
    read: the same request (:class:`rationale_cli.annotation.predict_job.PredictRequest`) and
    the same library call (:func:`rationale_cli.annotation.predict_job.predict`), so the same
    file. A rerun of a stopped call continues it. Returns what was done
    (:class:`rationale_cli.annotation.predict_job.Predicted`: ``documents``, ``tokens``,
    ``unknown_share``, ``speed``, ``resumed``, ``stopped``); ``progress`` (``progress(total,
    doing=...)``, a context yielding ``advance(n)``) hears of each pass over the input and
    ``report`` gets the threshold that ``rate_over="corpus"`` finds, as a line."""
    from rationale_cli.annotation.predict_job import PredictRequest
    from rationale_cli.annotation.predict_job import predict as annotate_corpus

    request = PredictRequest(run, input, out, **options)
    return annotate_corpus(request, progress=progress, report=report)
