"""Annotating corpora beyond one machine, on Dask.

:func:`annotate` reads a CSV, JSON-lines or Parquet corpus as a Dask DataFrame in blocks
of ``blocksize``, annotates each partition on the workers (:func:`annotate_partition`;
each worker process loads the model once) and writes a folder of Parquet part files in
input order, under a temporary name until every part is written. dask[distributed] and
pyarrow are optional: ``pip install 'rationale-cli[scale]'``. :func:`annotate_partition`
needs pandas only, so other engines can map it over their partitions too.
"""

from __future__ import annotations

import os
import secrets
import shutil
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from rationale_cli.data.sources import as_record
from rationale_cli.output.prediction import Rationale
from rationale_cli.output.writers import parquet_schema, table_row
from rationale_cli.runs.inference import run_model
from rationale_cli.runs.run_directory import Run, load_run, read_json, require_run_files
from rationale_cli.runs.task import Classification, task_from_dict
from rationale_cli.runtime.devices import resolve_device
from rationale_cli.runtime.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

    from rationale_cli.runs.inference import Output

RESULT_COLUMNS = ("prediction", "probabilities", "rationale", "char_spans", "rationale_text", "token_scores")


@lru_cache(maxsize=4)
def cached_run(run: str, device: str) -> Run:
    """The run directory's model, loaded once per process and device."""
    return load_run(run, resolve_device(device))


def check_columns(columns: Sequence[str], text_col: str, id_col: str | None, source: str) -> None:
    """One error line unless the text and id columns are there and the rationale columns are not."""
    missing = [name for name in (text_col, id_col) if name is not None and name not in columns]
    if missing:
        raise UserError(f"{source}: no column {missing[0]!r}; columns are: {', '.join(map(str, columns))}")
    taken = [name for name in RESULT_COLUMNS if name in columns]
    if taken:
        raise UserError(f"{source}: already has a column {taken[0]!r}, which annotating adds; rename or drop it")


def check_unique_ids(ids, id_col: str, source: str) -> None:
    """One error line at an id that more than one row holds (``ids``: the id column, a Dask
    series; computed on the cluster): score and evaluate match predictions by id."""
    counts = ids.value_counts()
    repeated = counts[counts > 1].head(1, npartitions=-1)
    if len(repeated):
        raise UserError(f"{source}: id {repeated.index[0]!r} in {int(repeated.iloc[0])} rows of "
                        f"column {id_col!r}; each document needs its own id, which score and evaluate match "
                        "predictions by")


def result_frame(frame: pd.DataFrame, outputs: list[Output], classification: bool) -> pd.DataFrame:
    """``frame`` plus the rationale columns of ``outputs`` (one per row): prediction a float
    (or a class name), probabilities (JSON) and rationale_text strings, the others lists."""
    import pandas as pd

    rows = [table_row(Rationale.of(output)) for output in outputs]
    dtypes = {"prediction": "str" if classification else "float64", "probabilities": "str", "rationale_text": "str"}
    return frame.assign(**{name: pd.Series([row[name] for row in rows], index=frame.index,
                                           dtype=dtypes.get(name, object))
                           for name in RESULT_COLUMNS if classification or name != "probabilities"})


def annotate_partition(frame: pd.DataFrame, run: str, *, text_col: str = "text", id_col: str | None = None,
                       batch_size: int = 64, device: str = "cpu", partition_info: dict | None = None) -> pd.DataFrame:
    """The rows of ``frame`` with their rationale columns: ``prediction``, ``probabilities``
    (classification; JSON text), ``rationale`` (token spans, end exclusive), ``char_spans``
    (into the text), ``rationale_text`` and ``token_scores``. The text is tokenized as the
    readers tokenize raw text; an empty one is an error naming the row by ``id_col``
    (else by its index label, and the partition number that Dask passes in ``partition_info``)."""
    check_columns(frame.columns, text_col, id_col, "the frame")
    loaded = cached_run(str(run), device)
    names = frame.index if id_col is None else frame[id_col]
    if id_col is None and partition_info is not None:  # Dask numbers the rows of each partition from 0
        names = [f"{label} of partition {partition_info['number']}" for label in names]
    records = [as_record({"id": name, "text": text}, row)
               for row, (name, text) in enumerate(zip(names, frame[text_col].fillna("")))]
    outputs = list(run_model(loaded.model, loaded.vocab, loaded.task, records, batch_size=batch_size,
                             device=loaded.model.device))
    return result_frame(frame, outputs, isinstance(loaded.task, Classification))


def import_dask():
    try:
        import dask.dataframe
        import dask.distributed
        import pyarrow.parquet
    except ImportError:
        raise UserError("annotating on Dask needs dask: pip install 'rationale-cli[scale]'") from None
    return dask.dataframe, dask.distributed, pyarrow


def read_corpus(dd, source: str, blocksize):
    """``source`` as a Dask DataFrame: CSV (every cell a string, as the CSV reader reads
    them), JSON lines or Parquet (a file, a folder or a glob), by extension."""
    name = str(source).lower()
    try:
        if name.endswith(".csv"):
            return dd.read_csv(source, blocksize=blocksize, dtype=str, keep_default_na=False, encoding="utf-8")
        if name.endswith((".jsonl", ".json")):
            return dd.read_json(source, lines=True, blocksize=blocksize)
        if name.endswith(".parquet") or Path(source).is_dir():
            return dd.read_parquet(source, blocksize=blocksize)
    except FileNotFoundError:
        raise UserError(f"{source}: no such file") from None
    except OSError as err:
        raise UserError(f"{source}: cannot read ({err})") from None
    raise UserError(f"{source}: expected a .csv, .jsonl or .parquet corpus, or a folder of Parquet files")


@contextmanager
def dask_client(distributed, scheduler: str | None) -> Iterator[object]:
    """A client of the scheduler at ``scheduler``, or of a local cluster of single-threaded processes."""
    if scheduler is None:
        with distributed.LocalCluster(processes=True, threads_per_worker=1) as cluster, \
                distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(scheduler)
    except (OSError, ValueError) as err:
        raise UserError(f"{scheduler}: cannot connect to a Dask scheduler ({err})") from None
    with client:
        yield client


def part_name(index: int) -> str:
    """Part files named so that their order by name is the input order."""
    return f"part.{index:06d}.parquet"


def annotate(source: str | Path, run: str | Path, out: str | Path, *, scheduler: str | None = None,
             text_col: str = "text", id_col: str | None = None, blocksize: str | int = "64MB",
             batch_size: int = 64, device: str = "cpu") -> int:
    """Annotate the corpus ``source`` into the new Parquet folder ``out`` (the input's
    columns and :func:`annotate_partition`'s) on the Dask scheduler at ``scheduler``, or on
    a local cluster of one process per core. Paths must be readable by every worker.
    Returns the number of rows."""
    dd, distributed, pa = import_dask()
    run, target = os.path.abspath(run), Path(out).absolute()
    require_run_files(Path(run))
    classification = isinstance(task_from_dict(read_json(Path(run) / "task.json")), Classification)
    if target.exists():
        raise UserError(f"{out}: already exists; choose another output folder")
    frame = read_corpus(dd, str(source), blocksize)
    check_columns(frame.columns, text_col, id_col, str(source))
    annotated = frame.map_partitions(annotate_partition, run, text_col=text_col, id_col=id_col,
                                     batch_size=batch_size, device=device,
                                     meta=result_frame(frame._meta, [], classification))
    inferred = pa.Schema.from_pandas(frame._meta_nonempty, preserve_index=False)
    ours = parquet_schema(pa, classification)  # the list columns need their types given
    schema = pa.schema([*inferred, *(ours.field(name) for name in annotated.columns[len(inferred.names):])])
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        with dask_client(distributed, scheduler):
            if id_col is not None:
                check_unique_ids(frame[id_col], id_col, str(source))
            annotated.to_parquet(tmp, write_index=False, name_function=part_name, schema=schema)
        rows = sum(pa.parquet.read_metadata(part).num_rows for part in tmp.glob("*.parquet"))
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return rows
