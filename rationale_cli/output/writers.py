"""What ``rationale predict`` writes: JSON lines, CSV, Parquet, ERASER results, or for
annotation tools Label Studio tasks and spaCy documents.

The format comes from the ``--out`` extension (``.jsonl``/``.json``, ``.csv``,
``.parquet``, ``.spacy``; JSON lines for any other) or is named. Each writer takes batches of
:class:`~rationale_cli.runs.inference.Output` and is a context manager:

- jsonl: one JSON line per document, as ``predict`` has always written them.
- csv: a header row, then per document ``id, prediction, [probabilities], [label],
  rationale, spans, char_spans, token_scores``: the rationale as text (its pieces
  joined with " … "), the others as JSON; probabilities for classification runs, a
  label column when the first batch has labels.
- eraser: ERASER's results format (``rationale_cli.evaluation.predictions_file``), one line per
  document with its faithfulness scores, which the official scorer reads as it is.
- label-studio: a JSON list of tasks with the rationale as pre-annotations
  (:mod:`rationale_cli.output.label_studio`).
- spacy: a ``DocBin``, the rationale as the span group ``rationale``
  (:mod:`rationale_cli.output.spacy_docs`).
- parquet: one row group per batch (:func:`parquet_schema`), written under a temporary
  name beside the target and renamed on close, so an interrupted run leaves nothing
  under the real name. Needs pyarrow.

JSON lines, CSV and ERASER files (:data:`RESUMABLE`) can be continued after an interruption:
``resume_at`` is a size that :meth:`Writer.flush` returned, and anything past it is cut off.
Standard output (``-``, not Parquet or spaCy), Parquet, Label Studio and spaCy outputs cannot
be continued. The two writers for annotation tools name the run in their files
(``model_version``).
"""

from __future__ import annotations

import contextlib
import csv
import os
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from rationale_cli.output.label_studio import LabelStudioWriter
from rationale_cli.output.prediction import Rationale, prediction_line
from rationale_cli.output.spacy_docs import DocBinWriter
from rationale_cli.output.writer_base import TextWriter, Writer, json_text
from rationale_cli.runtime.atomic import atomic_path
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.safe_json import to_json_line

if TYPE_CHECKING:
    from rationale_cli.runs.inference import Output

OUTPUT_FORMATS = ("jsonl", "csv", "parquet", "eraser", "label-studio", "spacy")
EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet", ".spacy": "spacy"}
RESUMABLE = ("jsonl", "csv", "eraser")
BINARY = ("parquet", "spacy")  # never on standard output
CSV_COLUMNS = ("id", "prediction", "probabilities", "label", "rationale", "spans", "char_spans", "token_scores")


def output_format(path: str | Path, given: str | None = None) -> str:
    """``given``, or for None and 'auto' the format of ``path``'s extension (jsonl when unknown)."""
    if given is None or given == "auto":
        return EXTENSIONS.get(Path(path).suffix.lower(), "jsonl")
    if given not in OUTPUT_FORMATS:
        raise UserError(f"unknown output format {given!r}: expected auto, {', '.join(OUTPUT_FORMATS)}")
    return given


def open_writer(path: str | Path, fmt: str, resume_at: int | None = None, model_version: str = "") -> Writer:
    """A writer of format ``fmt`` (or 'auto') on ``path`` ('-': standard output): a new
    file, or with ``resume_at`` the file cut to that many bytes and continued;
    ``model_version`` names the run in a Label Studio or spaCy output."""
    fmt = output_format(path, fmt)
    if fmt in VERSIONED:
        return VERSIONED[fmt](path, resume_at, model_version)
    return WRITERS[fmt](path, resume_at)


class JsonLinesWriter(TextWriter):
    def write(self, outputs: list[Output]) -> None:
        self.handle.writelines(map(prediction_line, outputs))


class EraserWriter(TextWriter):
    """ERASER results lines; each output carries its scored document."""

    def write(self, outputs: list[Output]) -> None:
        from rationale_cli.evaluation.predictions_file import results_line

        self.handle.writelines(to_json_line(results_line(out.scored, out.record.docid or out.record.id))
                               for out in outputs)


class CsvWriter(TextWriter):
    """CSV rows (the csv module's default dialect); a continued file keeps its header."""

    def __init__(self, path: str | Path, resume_at: int | None):
        super().__init__(path, resume_at)
        self.columns = csv_header(path) if resume_at else None
        self.rows = csv.writer(self.handle)

    def write(self, outputs: list[Output]) -> None:
        results = [Rationale.of(output) for output in outputs]
        if not results:
            return
        if self.columns is None:
            self.columns = csv_columns(results)
            self.rows.writerow(self.columns)
        self.rows.writerows([row.get(name, "") for name in self.columns] for row in map(csv_row, results))


def csv_header(path: str | Path) -> list[str]:
    with open(path, encoding="utf-8", newline="") as handle:
        return next(csv.reader(handle), [])


def csv_columns(results: list[Rationale]) -> list[str]:
    """The CSV columns: probabilities for classification, label when the batch has labels."""
    left_out = set()
    if results[0].probabilities is None:
        left_out.add("probabilities")
    if all(result.label is None for result in results):
        left_out.add("label")
    return [name for name in CSV_COLUMNS if name not in left_out]


def csv_row(result: Rationale) -> dict:
    return {
        "id": result.id,
        "prediction": result.prediction,
        "probabilities": "" if result.probabilities is None else json_text(result.probabilities),
        "label": "" if result.label is None else result.label,
        "rationale": result.rationale_text,
        "spans": json_text(result.spans),
        "char_spans": "" if result.char_spans is None else json_text(result.char_spans),
        "token_scores": json_text(result.scores),
    }


def import_pyarrow(needed_by: str = "--out ...parquet"):
    """The pyarrow module (with pyarrow.parquet), or one line saying how to install it."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise UserError(f"{needed_by} needs pyarrow: pip install 'rationale-cli[scale]'") from None
    return pyarrow


def parquet_schema(pa, classification: bool):
    """The columns of a Parquet output; prediction and label are strings for a
    classification run and float64 for a regression run, probabilities (JSON text)
    are for classification only; ``pa`` is the pyarrow module."""
    value, spans = (pa.string() if classification else pa.float64()), pa.list_(pa.list_(pa.int32()))
    fields = [("id", pa.string()), ("prediction", value)]
    if classification:
        fields.append(("probabilities", pa.string()))
    fields += [("label", value), ("rationale", spans), ("char_spans", spans), ("rationale_text", pa.string()),
               ("selected_tokens", pa.list_(pa.string())), ("token_scores", pa.list_(pa.float32()))]
    return pa.schema(fields)


def table_row(result: Rationale) -> dict:
    """One document as a row of the :func:`parquet_schema` columns."""
    probabilities = None if result.probabilities is None else json_text(result.probabilities)
    return {**result.to_dict(), "probabilities": probabilities, "rationale_text": result.rationale_text}


def typed_label(result: Rationale, classification: bool) -> float | str | None:
    """The label in the type of the model's predictions."""
    if result.label is None or classification:
        return None if result.label is None else str(result.label)
    if isinstance(result.label, str):
        raise UserError(f"document {result.id}: label {result.label!r} is a class name, but this model "
                        "predicts scores; a Parquet output holds labels of the predictions' kind")
    return float(result.label)


class ParquetOutput(Writer):
    """A Parquet file, under a temporary name beside ``path`` until :meth:`close`."""

    def __init__(self, path: str | Path, resume_at: int | None):
        if str(path) == "-":
            raise UserError("a Parquet output needs a file name, not standard output (-)")
        if resume_at is not None:
            raise UserError(f"{path}: a Parquet output cannot be continued; start it again from the beginning")
        self.pa = import_pyarrow()
        self.table = None  # the pyarrow ParquetWriter, made when the first batch shows the task
        with ExitStack() as files:
            self.handle = files.enter_context(open(files.enter_context(atomic_path(path)), "wb"))
            self.files = files.pop_all()

    def start(self, classification: bool):
        if self.table is None:
            self.table = self.pa.parquet.ParquetWriter(self.handle, parquet_schema(self.pa, classification))
        return self.table

    def write(self, outputs: list[Output]) -> None:
        results = [Rationale.of(output) for output in outputs]
        if not results:
            return
        classification = isinstance(results[0].prediction, str)
        rows = [{**table_row(result), "label": typed_label(result, classification)} for result in results]
        table = self.start(classification)
        table.write_table(self.pa.Table.from_pylist(rows, schema=table.schema))

    def flush(self) -> int:
        """The bytes written so far, synced (the file is complete only after :meth:`close`)."""
        self.handle.flush()
        os.fsync(self.handle.fileno())
        return os.fstat(self.handle.fileno()).st_size

    def close(self) -> None:
        """Write the footer (with no documents: a regression run's columns) and rename the file."""
        with self.files:  # an error removes the temporary file
            self.start(False).close()

    def __exit__(self, kind, error, trace) -> None:
        if error is None:
            self.close()
            return
        if self.table is not None:
            with contextlib.suppress(Exception):
                self.table.close()
        self.files.__exit__(kind, error, trace)


WRITERS = {"jsonl": JsonLinesWriter, "csv": CsvWriter, "parquet": ParquetOutput, "eraser": EraserWriter}
VERSIONED = {"label-studio": LabelStudioWriter, "spacy": DocBinWriter}  # these also name the run
