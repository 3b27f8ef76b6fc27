"""Output formats of predict: JSON lines as before, CSV, Parquet; continuing a file."""

import csv
import json

import pytest

from rationale_cli.data.records import Record, mask_to_spans
from rationale_cli.output.prediction import Rationale
from rationale_cli.output.writers import open_writer, output_format
from rationale_cli.runs.inference import Output
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.safe_json import to_json_line

TEXT = "Nice  head, thin body."  # two spaces: a rationale from the raw text keeps them
TOKENS = ["Nice", "head", ",", "thin", "body", "."]
OFFSETS = [(0, 4), (6, 10), (10, 11), (12, 16), (17, 21), (21, 22)]
SELECTED = [1, 1, 1, 0, 1, 0]


def regression(i: int, raw: bool = True, label=None) -> Output:
    record = Record(id=str(i), tokens=TOKENS, label=label, text=TEXT if raw else None,
                    offsets=OFFSETS if raw else None)
    return Output(record, SELECTED, [0.9, 0.8, 0.7, 0.1, 0.6, 0.2], prediction=0.125 * (i % 8))


def classification(i: int) -> Output:
    record = Record(id=f"d{i}", tokens=TOKENS, label="pos" if i % 2 else None, text=TEXT, offsets=OFFSETS)
    return Output(record, SELECTED, [0.9, 0.8, 0.7, 0.1, 0.6, float("nan")], prediction="pos",
                  extra={"probabilities": {"neg": 0.25, "pos": 0.75}})


BATCHES = [[regression(i) for i in range(start, start + 3)] for start in (0, 3, 6)]


def write_all(path, fmt, batches):
    with open_writer(path, fmt) as writer:
        for batch in batches:
            writer.write(batch)


@pytest.mark.parametrize("name, fmt", [("a.jsonl", "jsonl"), ("a.JSON", "jsonl"), ("a.csv", "csv"),
                                       ("a.parquet", "parquet"), ("a.txt", "jsonl"), ("-", "jsonl")])
def test_the_format_follows_the_extension(name, fmt):
    assert output_format(name) == output_format(name, "auto") == fmt
    assert output_format(name, "csv") == "csv"


def test_an_unknown_format_name_is_refused(tmp_path):
    for call in (lambda: output_format("a.jsonl", "xml"), lambda: open_writer(tmp_path / "a", "xml")):
        with pytest.raises(UserError, match="unknown output format 'xml'") as err:
            call()
        assert "\n" not in str(err.value)


def test_jsonl_is_the_line_predict_wrote(tmp_path):
    out = tmp_path / "p.jsonl"
    outputs = [*BATCHES[0], regression(9, raw=False, label=0.5), classification(1)]
    write_all(out, "jsonl", [outputs[:2], outputs[2:]])
    assert out.read_bytes() == "".join(to_json_line(Rationale.of(o).to_dict()) for o in outputs).encode("utf-8")


def test_jsonl_scores_of_every_kind_are_written_as_json_would(tmp_path):
    """Rounded scores are looked up, others (out of range, unrounded, tiny, not finite) formatted."""
    scores = [k / 10_000 for k in range(0, 10_001, 7)] + [1.5, -0.25, 0.123456789, 1e-7, 0.0, float("inf")]
    record = Record(id="x", tokens=["w"] * len(scores))
    output = Output(record, [1] * len(scores), scores, prediction=0.5)
    out = tmp_path / "p.jsonl"
    write_all(out, "jsonl", [[output]])
    assert out.read_text(encoding="utf-8") == to_json_line(Rationale.of(output).to_dict())
    assert json.loads(out.read_text(encoding="utf-8"))["token_scores"][-6:] == [1.5, -0.25, 0.123456789, 1e-7, 0.0, None]


def test_spans_of_any_mask():
    import numpy as np

    for mask in ([0, 1, 1, 0, 1], (0, 1, 1, 0, 1), np.array([0, 1, 1, 0, 1]), [0.0, 0.5, 1.0, 0.0, 2.0],
                 [False, True, True, False, True], [0, 300, 1, 0, -1]):
        assert mask_to_spans(mask) == [(1, 3), (4, 5)]
    assert mask_to_spans([]) == [] and mask_to_spans([1, 1]) == [(0, 2)]


def test_spans_in_sentences_are_cut_where_a_sentence_starts():
    sentences = [(0, 2), (2, 5), (5, 6), (6, 8)]
    assert mask_to_spans([1, 1, 1, 1, 1, 1, 0, 1], sentences) == [(0, 2), (2, 5), (5, 6), (7, 8)]
    assert mask_to_spans([0, 1, 1, 1, 0, 0, 1, 1], sentences) == [(1, 2), (2, 4), (6, 8)]
    assert mask_to_spans([0, 1, 1, 1], []) == mask_to_spans([0, 1, 1, 1]) == [(1, 4)]


def test_jsonl_to_standard_output(capsys):
    with open_writer("-", "jsonl") as writer:
        writer.write(BATCHES[0])
        assert writer.flush() == 0
    assert capsys.readouterr().out == "".join(to_json_line(Rationale.of(o).to_dict()) for o in BATCHES[0])
    with pytest.raises(UserError, match="standard output"):
        open_writer("-", "jsonl", resume_at=0)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_continued_file_ends_as_a_straight_run(tmp_path, fmt):
    straight, resumed = tmp_path / f"straight.{fmt}", tmp_path / f"resumed.{fmt}"
    write_all(straight, fmt, BATCHES)
    with open_writer(resumed, fmt) as writer:
        writer.write(BATCHES[0])
        writer.write(BATCHES[1])
        size = writer.flush()
        assert size == resumed.stat().st_size
        writer.write([regression(99)])  # written after the last flush: to be cut off
    with open(resumed, "a", encoding="utf-8") as handle:
        handle.write('{"half a li')
    with open_writer(resumed, fmt, resume_at=size) as writer:
        writer.write(BATCHES[2])
    assert resumed.read_bytes() == straight.read_bytes()


def test_a_file_is_continued_only_from_a_size_it_has(tmp_path):
    out = tmp_path / "p.csv"
    with pytest.raises(UserError, match="no such file to continue"):
        open_writer(out, "csv", resume_at=10)
    write_all(out, "csv", BATCHES[:1])
    with pytest.raises(UserError, match="cannot continue at byte"):
        open_writer(out, "csv", resume_at=out.stat().st_size + 1)


def test_csv_columns_and_rationale_text(tmp_path):
    out = tmp_path / "p.csv"
    write_all(out, "csv", [[regression(1, label=0.5), regression(2, raw=False)]])
    with open(out, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["id", "prediction", "label", "rationale", "spans", "char_spans", "token_scores"]
    assert rows[0]["rationale"] == "Nice  head, … body"  # from the raw text
    assert rows[1]["rationale"] == "Nice head , … body"  # tokens joined by spaces
    assert json.loads(rows[0]["spans"]) == [[0, 3], [4, 5]]
    assert json.loads(rows[0]["char_spans"]) == [[0, 11], [17, 21]]
    assert rows[1]["char_spans"] == "" and rows[1]["label"] == ""
    assert (rows[0]["label"], float(rows[0]["prediction"])) == ("0.5", 0.125)
    assert json.loads(rows[0]["token_scores"]) == [0.9, 0.8, 0.7, 0.1, 0.6, 0.2]


def test_csv_of_a_classification_run(tmp_path):
    out = tmp_path / "p.csv"
    write_all(out, "csv", [[classification(0), classification(1)]])
    with open(out, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:4] == ["id", "prediction", "probabilities", "label"]
    assert json.loads(rows[0]["probabilities"]) == {"neg": 0.25, "pos": 0.75}
    assert [row["label"] for row in rows] == ["", "pos"]
    assert json.loads(rows[0]["token_scores"])[-1] is None  # NaN as null


def test_parquet_round_trip(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    out = tmp_path / "p.parquet"
    write_all(out, "parquet", [BATCHES[0], [regression(7, raw=False, label=0.5)]])
    assert [p.name for p in tmp_path.iterdir()] == ["p.parquet"]
    table = pq.read_table(out)
    assert pq.ParquetFile(out).metadata.num_row_groups == 2
    spans = pa.list_(pa.list_(pa.int32()))
    assert table.schema.types == [pa.string(), pa.float64(), pa.float64(), spans, spans, pa.string(),
                                  pa.list_(pa.string()), pa.list_(pa.float32())]
    assert table.column_names == ["id", "prediction", "label", "rationale", "char_spans", "rationale_text",
                                  "selected_tokens", "token_scores"]
    rows = table.to_pylist()
    assert rows[0]["id"] == "0" and rows[1]["prediction"] == 0.125 and rows[0]["label"] is None
    assert rows[0]["rationale"] == [[0, 3], [4, 5]] and rows[0]["char_spans"] == [[0, 11], [17, 21]]
    assert rows[0]["rationale_text"] == "Nice  head, … body"
    assert rows[0]["selected_tokens"] == ["Nice", "head", ",", "body"]
    assert rows[0]["token_scores"] == pytest.approx([0.9, 0.8, 0.7, 0.1, 0.6, 0.2])
    assert rows[3]["char_spans"] is None and rows[3]["label"] == 0.5
    assert rows[3]["rationale_text"] == "Nice head , … body"


def test_parquet_of_a_classification_run(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")

    out = tmp_path / "p.parquet"
    write_all(out, "parquet", [[classification(0), classification(1)]])
    table = pq.read_table(out)
    assert table.column_names[:4] == ["id", "prediction", "probabilities", "label"]
    assert str(table.schema.field("prediction").type) == "string"
    rows = table.to_pylist()
    assert json.loads(rows[0]["probabilities"]) == {"neg": 0.25, "pos": 0.75}
    assert [row["label"] for row in rows] == [None, "pos"]


def test_parquet_labels_are_of_the_predictions_kind(tmp_path):
    pytest.importorskip("pyarrow")
    with pytest.raises(UserError, match="document 1: label 'pos' is a class name"):
        write_all(tmp_path / "p.parquet", "parquet", [[regression(1, label="pos")]])
    assert list(tmp_path.iterdir()) == []


def test_parquet_leaves_nothing_after_an_error(tmp_path):
    pytest.importorskip("pyarrow")
    with pytest.raises(RuntimeError, match="stop"):
        with open_writer(tmp_path / "p.parquet", "parquet") as writer:
            writer.write(BATCHES[0])
            assert writer.flush() > 0
            raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_parquet_without_documents_is_a_valid_file(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    write_all(tmp_path / "p.parquet", "parquet", [])
    assert pq.read_table(tmp_path / "p.parquet").num_rows == 0


def test_parquet_cannot_be_continued_nor_go_to_standard_output(tmp_path):
    pytest.importorskip("pyarrow")
    with pytest.raises(UserError, match="a Parquet output cannot be continued"):
        open_writer(tmp_path / "p.parquet", "parquet", resume_at=0)
    with pytest.raises(UserError, match="standard output"):
        open_writer("-", "parquet")
    assert list(tmp_path.iterdir()) == []
