"""Annotating a corpus on Dask: one partition as the CSV reader and inference see it, and a
two-process cluster writing Parquet parts that read back in input order."""

import csv
import json
import logging

import pandas as pd
import pytest
from typer.testing import CliRunner

from rationale_cli.annotation.dask_engine import annotate, annotate_partition
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.data.readers.table import iter_table
from rationale_cli.data.records import mask_to_spans
from rationale_cli.runs.inference import run_model
from rationale_cli.runs.run_directory import load_run
from rationale_cli.runtime.errors import UserError

pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

COLUMNS = ["text", "prediction", "rationale", "char_spans", "rationale_text", "token_scores"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run = tmp_path_factory.mktemp("dask") / "run"
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(run), "--extractor", "attention",
                                      "--encoder", "cnn", "--epochs", "1", "--embedding-dim", "16",
                                      "--hidden-size", "16"])
    assert result.exit_code == 0, result.output
    return run


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """60 demo test reviews as a CSV of id, text."""
    path = tmp_path_factory.mktemp("corpus") / "reviews.csv"
    with open(path, "w", encoding="utf-8", newline="") as handle:
        rows = csv.writer(handle)
        rows.writerow(["id", "text"])
        for record in sources.load("demo", "test")[:60]:
            rows.writerow([f"r{record.id}", " ".join(record.tokens)])
    return path


def read_corpus(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_a_partition_is_annotated_as_predict_annotates_the_csv(run_dir, corpus):
    frame = annotate_partition(read_corpus(corpus), str(run_dir), id_col="id", batch_size=16)
    loaded = load_run(run_dir)
    outputs = list(run_model(loaded.model, loaded.vocab, loaded.task, iter_table(corpus, label_col=None),
                             batch_size=16))
    assert len(frame) == len(outputs) == 60
    assert list(frame.columns) == ["id", *COLUMNS]
    assert frame["prediction"].tolist() == [out.prediction for out in outputs]
    assert frame["rationale"].tolist() == [[list(s) for s in mask_to_spans(out.selected)] for out in outputs]
    assert frame["token_scores"].tolist() == [out.scores for out in outputs]
    first, spans = frame.iloc[0], frame.iloc[0]["char_spans"]
    assert first["rationale_text"] == " … ".join(first["text"][start:end] for start, end in spans)


def test_an_empty_text_names_its_row(run_dir):
    frame = pd.DataFrame({"id": ["a", "b"], "text": ["a fine head", ""]})
    with pytest.raises(UserError, match="document b: empty text"):
        annotate_partition(frame, str(run_dir), id_col="id")
    with pytest.raises(UserError, match="no column 'body'"):
        annotate_partition(frame, str(run_dir), text_col="body")
    with pytest.raises(UserError, match="already has a column 'rationale'"):
        annotate_partition(frame.assign(rationale=None), str(run_dir))


@pytest.fixture(scope="module")
def scheduler():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster:
        yield cluster.scheduler_address


def test_a_two_process_cluster_writes_parquet_in_input_order(run_dir, corpus, scheduler, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "annotated"
    rows = annotate(str(corpus), run_dir, out, scheduler=scheduler, id_col="id", blocksize=2000, batch_size=16)
    parts = sorted(p.name for p in out.iterdir())
    assert rows == 60 and len(parts) >= 2 and parts[0] == "part.000000.parquet"
    assert not list(tmp_path.glob(".*"))  # the temporary folder was renamed
    written = pd.read_parquet(out)
    expected = annotate_partition(read_corpus(corpus), str(run_dir), id_col="id", batch_size=16)
    assert written["id"].tolist() == expected["id"].tolist()
    assert written["prediction"].tolist() == pytest.approx(expected["prediction"].tolist(), abs=1e-5)
    for column in ("rationale", "char_spans"):
        assert [[list(s) for s in cell] for cell in written[column]] == expected[column].tolist()
    assert written["rationale_text"].tolist() == expected["rationale_text"].tolist()
    schema = pq.read_schema(out / parts[0])
    assert str(schema.field("prediction").type) == "double"
    assert str(schema.field("rationale").type.value_type.value_type) == "int32"
    assert str(schema.field("token_scores").type.value_type) == "float"


def test_an_existing_output_and_an_unknown_corpus_are_refused(run_dir, tmp_path):
    with pytest.raises(UserError, match="already exists"):
        annotate(tmp_path / "corpus.csv", run_dir, tmp_path)
    with pytest.raises(UserError, match="expected a .csv, .jsonl or .parquet corpus"):
        annotate(tmp_path / "corpus.txt", run_dir, tmp_path / "out")


def test_an_empty_text_on_the_cluster_leaves_no_output(run_dir, scheduler, tmp_path):
    corpus = tmp_path / "reviews.jsonl"
    texts = [" ".join(record.tokens) for record in sources.load("demo", "test")[:30]]
    texts[25] = ""
    corpus.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf-8")
    with pytest.raises(UserError, match=r"document \d+ of partition [1-9]\d*: empty text"):
        annotate(corpus, run_dir, tmp_path / "out", scheduler=scheduler, blocksize=2000)
    assert [p.name for p in tmp_path.iterdir()] == ["reviews.jsonl"]


def test_an_id_in_two_rows_is_refused_before_anything_is_written(run_dir, scheduler, tmp_path):
    """As the local engine does: score and evaluate match predictions by id."""
    corpus = tmp_path / "reviews.csv"
    texts = [" ".join(record.tokens) for record in sources.load("demo", "test")[:30]]
    ids = [f"r{i}" for i in range(30)]
    ids[27] = "r3"
    pd.DataFrame({"id": ids, "text": texts}).to_csv(corpus, index=False)
    with pytest.raises(UserError, match=r"id 'r3' in 2 rows of column 'id'"):
        annotate(corpus, run_dir, tmp_path / "out", scheduler=scheduler, id_col="id", blocksize=2000)
    assert [p.name for p in tmp_path.iterdir()] == ["reviews.csv"]
