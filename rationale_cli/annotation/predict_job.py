"""``rationale predict`` and ``rationale merge`` as library calls.

A :class:`PredictRequest` holds the options of one ``predict``, checked once, when it is made
(one error line for the first wrong one, before anything is read). :func:`predict` carries it
out whole: the input (standard input kept in a file), the run loaded, the decoding parsed (with
``--rate-over corpus``, a first pass over the input for the threshold), then the annotation on
this machine (:func:`rationale_cli.annotation.engine.annotate`) or on a Dask cluster
(:mod:`rationale_cli.annotation.dask_engine`). It returns a :class:`Predicted`: what was done.

The command line and the Python API make the same call; what is printed is theirs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from rationale_cli.annotation.engine import (
    UNKNOWN_WARNING,
    WINDOW,
    Job,
    Shard,
    Tally,
    annotate,
    count_documents,
    refuse_finished,
)
from rationale_cli.data import sources
from rationale_cli.data.records import Record
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.output.writers import BINARY
from rationale_cli.runs.inference import asked_decoding, check_rate_over, parse_decoding
from rationale_cli.runs.run_directory import load_config, load_for_inference
from rationale_cli.runtime.errors import UserError, check_at_least
from rationale_cli.runtime.outputs import new_output, protected_output
from rationale_cli.runtime.progress import Progress, no_progress

ENGINES = ("local", "dask")


@dataclass(frozen=True)
class PredictRequest:
    """The options of one ``rationale predict`` (the same names, with underscores, and the same
    defaults), checked when the request is made: a :class:`UserError` with the command's line
    for the first wrong one. ``run`` and ``out`` become paths, ``input`` a string ('-':
    standard input; ``out`` '-': standard output), ``rate`` a share (0.1, '10%') or a count;
    ``text_col`` and ``id_field`` None: the run's columns."""

    run: Path
    input: str
    out: Path
    format: str = "auto"
    aspect: int | None = None
    split: str = "test"
    text_col: str | None = None
    id_field: str | None = None
    output_format: str = "auto"
    batch_size: int = 64
    window: int = WINDOW
    shard: str = "0/1"
    threads: int = 0
    workers: int = 1
    rate: str | float | int | None = None
    rate_over: str = "document"
    coherence: float | None = None
    sentences: bool = False
    device: str = "auto"
    force: bool = False
    engine: str = "local"
    scheduler: str | None = None

    def __post_init__(self) -> None:
        for name, kind in (("run", Path), ("input", str), ("out", Path)):
            object.__setattr__(self, name, kind(getattr(self, name)))
        for flag, value, low in (("--batch-size", self.batch_size, 1), ("--window", self.window, 1),
                                 ("--threads", self.threads, 0), ("--workers", self.workers, 1)):
            check_at_least(flag, value, low)
        check_rate_over(self.rate, self.rate_over)
        parts, written = self.parts, self.written_format
        if self.corpus_rate and parts.count > 1:
            raise UserError("--rate-over corpus holds the share over the whole input, which a shard does not see")
        if str(self.out) == "-" and written in BINARY:
            raise UserError(f"--out -: standard output takes text (jsonl, csv, eraser or label-studio), not {written}")
        if self.engine not in ENGINES:
            raise UserError(f"--engine {self.engine}: expected local or dask")
        if self.workers > 1 and (self.engine == "dask" or self.device.startswith("cuda")):
            raise UserError("--workers: processes on this machine's CPU, not with --engine dask or --device cuda")
        cpus = os.cpu_count() or 1
        for flag, value in (("--threads", self.threads), ("--workers", self.workers)):
            if value > cpus:  # torch crashes on a huge thread count; each worker holds a model
                raise UserError(f"{flag} {value}: at most {cpus}, the CPUs of this machine")
        asked = [name for name, given in (("rate", self.rate is not None), ("coherence", self.coherence is not None),
                                          ("sentences", self.sentences)) if given]
        if self.engine == "dask" and asked:
            raise UserError(f"--{asked[0]} is not available with --engine dask")

    @property
    def parts(self) -> Shard:
        """This process's shard of the input's windows."""
        return Shard.parse(self.shard)

    @property
    def written_format(self) -> str:
        """The output's format: ``output_format``, or for 'auto' the one of ``out``'s extension."""
        from rationale_cli.output.writers import output_format

        return output_format(self.out, self.output_format)

    @property
    def corpus_rate(self) -> bool:
        """Whether the decoding needs the whole input (a rate held over the corpus)."""
        return self.rate_over == "corpus"

    @property
    def reader(self) -> dict:
        """How the input is read: the keywords of :func:`rationale_cli.data.sources.run_documents`."""
        return dict(fmt=self.format, aspect=self.aspect, text_col=self.text_col, id_field=self.id_field,
                    split=self.split)

    @property
    def load_device(self) -> str:
        """Where the run is loaded: the CPU for worker processes, else ``device``."""
        return "cpu" if self.workers > 1 else self.device

    def records(self, source: str, config) -> Iterator[Record]:
        """The documents of ``source`` (the input, or the file standard input was kept in), as a run
        of ``config`` reads them (labels where the input has them), each id once (:func:`unique_ids`)."""
        return unique_ids(sources.run_documents(source, config, labelled=False, **self.reader))

    def total(self, source: str) -> int | None:
        """The documents of ``source``, for a progress bar; None where not known in advance (a shard's)."""
        total = count_documents(source) if self.parts.count == 1 else None
        if total and (self.format in ("csv", "tsv") or (self.format == "auto" and Path(source).suffix.lower()
                                                        in (".csv", ".tsv"))):
            total -= 1  # the header
        return total

    def job(self, source: str, decoding: Decoding = OWN) -> Job:
        """The engine's job (:class:`rationale_cli.annotation.engine.Job`): this request on ``source``,
        its output format and shard resolved, decoded as ``decoding`` says."""
        return Job(source, self.out, self.written_format, self.reader, self.batch_size, self.window, self.parts,
                   workers=self.workers, decoding=decoding)


@dataclass(frozen=True)
class Predicted:
    """What one :func:`predict` did: the output (``out``), the documents written by this call
    (``documents``) beside those an interrupted run had written before (``resumed``), their
    ``tokens``, the share of them unknown to the model's vocabulary, documents per second, the
    signal that stopped it (``stopped``; None: ``out`` is complete), the decoding used, and the
    engine (``dask`` reports documents only)."""

    out: Path
    documents: int
    resumed: int = 0
    tokens: int = 0
    unknown_share: float = 0.0
    speed: float = 0.0
    stopped: int | None = None
    decoding: Decoding = OWN
    engine: str = "local"

    @classmethod
    def of(cls, out: Path, tally: Tally, stopped: int | None, decoding: Decoding) -> Predicted:
        speed = tally.documents / tally.seconds if tally.seconds else 0.0
        return cls(out, tally.documents, tally.resumed, tally.tokens, tally.unknown_share, speed, stopped, decoding)

    @property
    def where(self) -> str:
        """The output, for a message."""
        return "standard output" if str(self.out) == "-" else str(self.out)

    @property
    def mostly_unknown(self) -> bool:
        """Whether so many tokens were unknown to the model that its predictions say little."""
        return self.unknown_share > UNKNOWN_WARNING


def predict(request: PredictRequest, *, progress: Progress = no_progress,
            report: Callable[[str], None] = lambda line: None) -> Predicted:
    """Carry out ``request``: read its input, load its run, parse its decoding and annotate the
    input into its output, on this machine or on Dask. ``progress`` reports each pass over the
    input ('scoring' for a rate held over the corpus, then 'predicting'); ``report`` gets the
    threshold such a rate found, as a line. A rerun of a stopped request continues it."""
    import torch

    from rationale_cli.output.prediction import check_output

    if request.threads:
        torch.set_num_threads(request.threads)
    source = sources.from_stdin() if request.input == "-" else request.input
    check_output(request.out, source)
    if request.engine == "dask":
        return Predicted(request.out, annotate_on_dask(request, source), engine="dask")
    loaded, device = load_for_inference(request.run, request.load_device)
    asked_decoding(loaded, coherence=request.coherence, sentences=request.sentences)
    check_model_output(request, loaded)
    total, scored = request.total(source), None
    if request.corpus_rate:
        refuse_finished_output(request)  # before the scoring pass, not after it
        scored = request.records(source, loaded.config)
    decoding, _ = parse_decoding(loaded, request.rate, request.rate_over, request.coherence,
                                 sentences=request.sentences, records=scored, total=total,
                                 batch_size=request.batch_size, device=device, progress=progress, report=report)
    with progress(total, doing="predicting") as advance:
        tally, stopped = annotate(request.job(source, decoding), loaded, request.records(source, loaded.config),
                                  device, force=request.force, progress=advance)
    return Predicted.of(request.out, tally, stopped, decoding)


def unique_ids(records: Iterator[Record]) -> Iterator[Record]:
    """``records``, with one error line at the first id seen before: ``score`` and ``evaluate``
    match predictions to documents by id."""
    seen: dict[str, str] = {}
    for record in records:
        if record.id in seen:
            raise UserError(f"{record.where}: id {record.id!r} again (first at {seen[record.id]}); each document "
                            "needs its own id, which score and evaluate match predictions by (--id-field names "
                            "the field or column that holds them)")
        seen[record.id] = record.where
        yield record


def annotate_on_dask(request: PredictRequest, source: str) -> int:
    """``request`` on a Dask cluster (``--engine dask``; a local one without a scheduler) over
    ``source``: the number of documents written."""
    from rationale_cli.annotation import dask_engine

    device = "cpu" if request.device == "auto" else request.device
    config = load_config(request.run)
    id_col = config.id_col if request.id_field is None else request.id_field
    return dask_engine.annotate(source, str(request.run), request.out, scheduler=request.scheduler,
                                text_col=request.text_col or config.text_col,
                                id_col=None if id_col in ("id", "") else id_col,
                                batch_size=request.batch_size, device=device)


def check_model_output(request: PredictRequest, loaded) -> None:
    """Refuse an output format the loaded run's task cannot fill (ERASER results hold class scores)."""
    if request.written_format == "eraser" and loaded.task.name != "classification":
        raise UserError("--output-format eraser: ERASER results hold class scores; this model predicts a score "
                        "(a regression run)")


def refuse_finished_output(request: PredictRequest) -> None:
    """Refuse, before a pass over the input, an output a finished run already wrote (unless forced)."""
    target = None if request.force else protected_output(request.out)
    if target is not None:
        refuse_finished(target)


def merge_outputs(parts: Sequence[Path], out: Path, force: bool = False) -> int:
    """The outputs of a sharded ``predict`` (JSONL or CSV, in any order) merged into ``out`` in
    input order (:func:`engine.merge`); the number of documents. The parts must be one complete
    shard set (:func:`engine.shard_set`); ``out`` is never one of them, and an existing ``out`` is
    replaced only with ``force``."""
    from rationale_cli.annotation.engine import merge, shard_set

    for index, part in enumerate(parts):
        if not part.is_file():
            raise UserError(f"{part}: no such file")
        if any(os.path.samefile(part, earlier) for earlier in parts[:index]):
            raise UserError(f"{part}: given twice; give each shard's output once, in shard order")
    new_output(out, force, parts)
    if len({part.suffix.lower() for part in parts}) > 1:
        raise UserError("the parts have different formats; merge JSONL parts or CSV parts")
    ordered, window = shard_set(parts)
    return merge(ordered, out, window)
