"""``rationale predict`` and ``rationale merge`` as library calls: the options checked and
resolved into a :class:`Prediction` (where to read, where and how to write, how to split the
work), then the annotation itself on this machine (:func:`annotate_prediction`, through
:mod:`rationale_cli.annotation.engine`) or on a Dask cluster (:func:`annotate_on_dask`).

The command line and the Python API call these; what is printed is theirs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.annotation.engine import WINDOW, Job, Shard, Tally, annotate, count_documents, refuse_finished
from rationale_cli.data import sources
from rationale_cli.data.records import Record
from rationale_cli.runtime.atomic import writable_target
from rationale_cli.runtime.errors import UserError

ENGINES = ("local", "dask")


@dataclass
class Prediction:
    """One ``rationale predict``, its options checked: the input (a path, or a copy of standard
    input), the output and its format, how the input is read (``reader``), and how the work is
    split (batches, windows, this process's shard, worker processes, the device to load on)."""

    run: Path
    input: str
    out: Path
    output_format: str
    reader: dict = field(default_factory=dict)  # fmt, aspect, text_col, id_field, split
    batch_size: int = 64
    window: int = WINDOW
    shard: Shard = Shard()
    workers: int = 1
    device: str = "auto"
    engine: str = "local"

    def total(self) -> int | None:
        """The input's documents, for a progress bar; None where not known in advance (a shard's)."""
        total = count_documents(self.input) if self.shard.count == 1 else None
        fmt = self.reader.get("fmt", "auto")
        if total and (fmt in ("csv", "tsv") or (fmt == "auto" and Path(self.input).suffix.lower() in (".csv", ".tsv"))):
            total -= 1  # the header
        return total

    def records(self, config) -> Iterator[Record]:
        """The input's documents, as a run of ``config`` reads them (unlabelled)."""
        return sources.run_documents(self.input, config, labelled=False, **self.reader)

    def job(self, decoding: Decoding = OWN) -> Job:
        return Job(self.input, self.out, self.output_format, self.reader, self.batch_size, self.window, self.shard,
                   workers=self.workers, decoding=decoding)


def plan_prediction(run: str | Path, input: str, out: str | Path, *, format: str = "auto", aspect: int | None = None,
                    split: str = "test", text_col: str | None = None, id_field: str = "id",
                    output_format: str = "auto", batch_size: int = 64, window: int = WINDOW, shard: str = "0/1",
                    threads: int = 0, workers: int = 1, device: str = "auto", engine: str = "local",
                    whole_input: bool = False) -> Prediction:
    """The options of ``rationale predict`` checked (one error line for the first wrong one) and
    resolved: the output format from ``out``'s extension for 'auto', standard input ('-') read
    into a file, the CPU for ``workers`` > 1; torch's thread count set when ``threads`` is given.
    ``whole_input``: the decoding needs the whole input (a rate held over the corpus), which a
    shard does not see."""
    import torch

    from rationale_cli.output.prediction import check_output
    from rationale_cli.output.writers import output_format as choose_format

    parts = Shard.parse(shard)
    if whole_input and parts.count > 1:
        raise UserError("--rate-over corpus holds the share over the whole input, which a shard does not see")
    out = Path(out)
    fmt_out = choose_format(out, output_format)
    if str(out) == "-" and fmt_out == "parquet":
        raise UserError("--out -: standard output takes jsonl or csv, not parquet")
    if engine not in ENGINES:
        raise UserError(f"--engine {engine}: expected local or dask")
    if workers > 1 and (engine == "dask" or device.startswith("cuda")):
        raise UserError("--workers: processes on this machine's CPU, not with --engine dask or --device cuda")
    cpus = os.cpu_count() or 1
    for flag, value in (("--threads", threads), ("--workers", workers)):
        if value > cpus:  # torch crashes on a huge thread count; each worker holds a model
            raise UserError(f"{flag} {value}: at most {cpus}, the CPUs of this machine")
    if workers > 1:
        device = "cpu"  # what the workers run on, whatever auto would choose
    if threads:
        torch.set_num_threads(threads)
    input = sources.from_stdin() if input == "-" else input
    check_output(out, input)
    reader = dict(fmt=format, aspect=aspect, text_col=text_col, id_field=id_field, split=split)
    return Prediction(Path(run), input, out, fmt_out, reader, batch_size, window, parts, workers, device, engine)


def annotate_on_dask(prediction: Prediction, scheduler: str | None = None) -> int:
    """``prediction`` on a Dask cluster (``--engine dask``; a local one without ``scheduler``):
    the number of documents written."""
    from rationale_cli.annotation import dask_engine

    id_field = prediction.reader.get("id_field", "id")
    device = "cpu" if prediction.device == "auto" else prediction.device
    return dask_engine.annotate(prediction.input, str(prediction.run), prediction.out, scheduler=scheduler,
                                text_col=prediction.reader.get("text_col") or "text",
                                id_col=None if id_field == "id" else id_field, batch_size=prediction.batch_size,
                                device=device)


def check_model_output(prediction: Prediction, loaded) -> None:
    """Refuse an output format the loaded run's task cannot fill (ERASER results hold class scores)."""
    if prediction.output_format == "eraser" and loaded.task.name != "classification":
        raise UserError("--output-format eraser: ERASER results hold class scores; this model predicts a score "
                        "(a regression run)")


def refuse_finished_output(prediction: Prediction, force: bool) -> None:
    """Refuse, before a pass over the input, an output a finished run already wrote (unless ``force``)."""
    target = None if force or str(prediction.out) == "-" else writable_target(prediction.out)
    if target is not None:
        refuse_finished(target)


def annotate_prediction(prediction: Prediction, loaded, device, *, force: bool = False,
                        progress: Callable[[int], None] = lambda n: None,
                        decoding: Decoding = OWN) -> tuple[Tally, int | None]:
    """Annotate the input into the output with the loaded run (:func:`engine.annotate`): the
    tally, and the signal that stopped it (None when it finished)."""
    records = prediction.records(loaded.config)
    return annotate(prediction.job(decoding), loaded, records, device, force=force, progress=progress)


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
        if out.exists() and os.path.samefile(part, out):
            raise UserError(f"{out}: is one of the parts; choose another --out")
    if out.exists() and not force and str(out) != "-":
        raise UserError(f"{out}: exists; use --force to replace it")
    if len({part.suffix.lower() for part in parts}) > 1:
        raise UserError("the parts have different formats; merge JSONL parts or CSV parts")
    ordered, window = shard_set(parts)
    writable_target(out)
    return merge(ordered, out, window)
