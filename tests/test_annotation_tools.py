"""Annotation tools' files in and out: Label Studio (JSON, JSON-MIN), Prodigy and doccano span JSON
lines and spaCy DocBins read as gold, character spans mapped onto tokens; predict writing Label
Studio tasks and .spacy files that read back as the model's own rationales; bad files as one line."""

import json
import re

import pytest
from typer.testing import CliRunner

from rationale_cli.api import load
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.data.readers import detect_format, read_records
from rationale_cli.data.readers.char_spans import token_spans, widened_count
from rationale_cli.data.records import Record
from rationale_cli.output.writers import open_writer
from rationale_cli.runs.inference import Output

SMALL = ["--extractor", "attention", "--encoder", "cnn", "--epochs", "1", "--embedding-dim", "16", "--hidden-size",
         "16", "--no-reference"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def char_spans(record: Record, cut: int = 0) -> list[tuple[int, int]]:
    """The record's gold rationale in characters of its text (each span starting ``cut`` characters
    into its first token)."""
    _, offsets = record.text_offsets()
    return [(offsets[start][0] + cut, offsets[end - 1][1]) for start, end in record.rationale]


def label_studio_task(record: Record, cut: int = 0) -> dict:
    text, _ = record.text_offsets()
    result = [{"type": "labels", "from_name": "rationale", "to_name": "text",
               "value": {"start": start, "end": end, "text": text[start:end], "labels": ["rationale"]}}
              for start, end in char_spans(record, cut)]
    result.append({"type": "labels", "from_name": "rationale", "to_name": "text",  # another label: not gold
                   "value": {"start": 0, "end": len(text), "labels": ["other"]}})
    return {"id": 100 + int(record.id.split("-")[1]), "data": {"text": text, "id": record.id, "score": record.label},
            "annotations": [{"was_cancelled": True, "result": []}, {"result": result}]}


def json_min_task(record: Record) -> dict:
    text, _ = record.text_offsets()
    return {"id": record.id, "text": text, "score": record.label, "annotator": 1, "annotation_id": 7,
            "label": [{"start": start, "end": end, "text": text[start:end], "labels": ["rationale"]}
                      for start, end in char_spans(record)]}


def native_line(record: Record) -> dict:
    return {"id": record.id, "tokens": record.tokens, "score": record.label, "rationale": record.rationale}


def write_json(path, value):
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_lines(path, objects):
    path.write_text("".join(json.dumps(obj) + "\n" for obj in objects), encoding="utf-8")
    return path


def write_docbin(path, records: list[Record]):
    """A .spacy file of ``records`` made with spaCy alone, the gold in the span group ``rationale``."""
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    docs = DocBin(store_user_data=True)
    for record in records:
        doc = nlp.make_doc(record.text_offsets()[0])
        doc.spans["rationale"] = [doc.char_span(start, end) for start, end in char_spans(record)]
        doc.user_data["score"] = record.label
        doc.user_data["id"] = record.id
        docs.add(doc)
    docs.to_disk(path)
    return path


@pytest.fixture(scope="module")
def reviews():
    return sources.load("demo", "test")[:40]


@pytest.fixture(scope="module")
def files(reviews, tmp_path_factory):
    """The same reviews and gold in our JSON lines and in each tool's format."""
    folder = tmp_path_factory.mktemp("tools")
    return {
        "jsonl": write_lines(folder / "gold.jsonl", map(native_line, reviews)),
        "label-studio": write_json(folder / "export.json", [label_studio_task(r) for r in reviews]),
        "json-min": write_json(folder / "export-min.json", [json_min_task(r) for r in reviews]),
        "prodigy": write_lines(folder / "prodigy.jsonl", [
            {"text": r.text_offsets()[0], "id": r.id, "score": r.label, "answer": "accept",
             "spans": [{"start": s, "end": e, "label": "rationale"} for s, e in char_spans(r)]} for r in reviews]
            + [{"text": "rejected", "spans": [], "answer": "reject"}]),
        "doccano": write_lines(folder / "doccano.jsonl", [
            {"id": r.id, "text": r.text_offsets()[0], "score": r.label,
             "label": [[s, e, "rationale"] for s, e in char_spans(r)]} for r in reviews]),
        "spacy": write_docbin(folder / "gold.spacy", reviews),
    }


def test_character_spans_take_the_tokens_they_touch():
    offsets = [(0, 5), (6, 10), (10, 11), (13, 17)]  # "Great head,  body"
    assert token_spans([(0, 5)], offsets) == ([(0, 1)], False)
    assert token_spans([(2, 8)], offsets) == ([(0, 2)], True)  # cuts both words: both whole
    assert token_spans([(11, 13)], offsets) == ([], False)  # whitespace alone selects nothing
    assert token_spans([(6, 11), (0, 5)], offsets) == ([(0, 3)], False)  # merged and sorted
    assert widened_count([Record("a", ["x"])]) == {}
    assert widened_count([Record("a", ["x"], widened=True), Record("b", ["x"], widened=False)]) == {
        "documents_widened": 1}


@pytest.mark.parametrize("name, fmt", [("label-studio", "label-studio"), ("json-min", "label-studio"),
                                       ("prodigy", "prodigy"), ("doccano", "doccano"), ("spacy", "spacy")])
def test_each_tool_reads_as_the_same_documents_and_gold(files, reviews, name, fmt):
    assert detect_format(files[name]) == fmt
    assert detect_format(files["jsonl"]) == "jsonl"
    read = read_records(files[name], rationale_label="rationale")
    assert [(r.id, r.tokens, r.label, r.rationale, r.widened) for r in read] == [
        (r.id, r.tokens, r.label, r.rationale, False) for r in reviews]
    assert all(r.text[s:e] == t for r in read for t, (s, e) in zip(r.tokens, r.offsets))


def test_the_rationale_label_chooses_the_spans(files, reviews):
    whole = read_records(files["label-studio"])  # any label: the span over the whole text counts too
    assert all(r.rationale == [(0, len(r.tokens))] for r in whole)
    other = read_records(files["label-studio"], rationale_label="other")
    assert [r.rationale for r in other] == [[(0, len(r.tokens))] for r in reviews]


@pytest.fixture(scope="module")
def run_dir(reviews, tmp_path_factory):
    """A tiny run trained on a Label Studio export of 300 demo training reviews."""
    folder = tmp_path_factory.mktemp("run")
    data = write_json(folder / "train.json", [label_studio_task(r) for r in sources.load("demo", "train")[:300]])
    result = invoke("train", "--data", data, "--rationale-label", "rationale", "--out", folder / "run", *SMALL)
    assert result.exit_code == 0, result.output
    return folder / "run"


def evaluated(run_dir, data, tmp_path, *options) -> dict:
    out = tmp_path / f"{data.name}.metrics.json"
    result = invoke("evaluate", run_dir, data, "--no-faithfulness", "--json", out, *options)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


def test_a_label_studio_export_scores_as_our_jsonl_with_the_same_gold(run_dir, files, reviews, tmp_path):
    ours = evaluated(run_dir, files["jsonl"], tmp_path)
    theirs = evaluated(run_dir, files["label-studio"], tmp_path)  # the run's --rationale-label
    keys = ("precision", "recall", "f1", "mse", "selection_rate")
    assert {k: theirs[k] for k in keys} == {k: ours[k] for k in keys}
    assert theirs["documents_widened"] == 0 and "documents_widened" not in ours
    api = load(run_dir).evaluate(files["label-studio"], faithfulness=False)
    assert {k: api[k] for k in keys} == {k: ours[k] for k in keys}
    cut = write_json(tmp_path / "cut.json", [label_studio_task(r, cut=1) for r in reviews])
    widened = evaluated(run_dir, cut, tmp_path)  # each span starts inside its first token: taken whole
    assert {k: widened[k] for k in keys} == {k: ours[k] for k in keys}
    assert widened["documents_widened"] == len(reviews)
    result = invoke("evaluate", run_dir, cut, "--no-faithfulness")
    assert re.search(r"documents_widened\s*│\s*40", result.output), result.output


@pytest.mark.parametrize("out, options", [("pred.json", ["--output-format", "label-studio"]), ("pred.spacy", [])])
def test_predictions_read_back_as_gold_are_the_models_own(run_dir, files, tmp_path, out, options):
    target = tmp_path / out
    result = invoke("predict", run_dir, files["jsonl"], "--out", target, *options)
    assert result.exit_code == 0, result.output
    metrics = evaluated(run_dir, target, tmp_path)
    assert metrics["precision"] == metrics["recall"] == 1.0
    assert metrics["mse"] == pytest.approx(0.0, abs=1e-9)


def test_label_studio_tasks_are_pre_annotations(run_dir, files, tmp_path):
    target = tmp_path / "tasks.json"
    assert invoke("predict", run_dir, files["jsonl"], "--out", target, "--output-format", "label-studio").exit_code == 0
    tasks = json.loads(target.read_text())
    assert len(tasks) == 40 and "annotations" not in tasks[0]
    prediction = tasks[0]["predictions"][0]
    assert prediction["model_version"] == str(run_dir)
    text = tasks[0]["data"]["text"]
    for item in prediction["result"]:
        if item["type"] == "labels":
            assert text[item["value"]["start"]:item["value"]["end"]] == item["value"]["text"]
    assert [item["type"] for item in prediction["result"]][-1] == "number"


def test_a_spacy_output_loads_and_displacy_draws_its_rationale(run_dir, files, tmp_path):
    import spacy
    from spacy import displacy
    from spacy.tokens import DocBin

    target = tmp_path / "pred.spacy"
    assert invoke("predict", run_dir, files["jsonl"], "--out", target).exit_code == 0
    docs = list(DocBin().from_disk(target).get_docs(spacy.blank("en").vocab))
    assert len(docs) == 40
    doc = next(d for d in docs if len(d.spans["rationale"]) > 1)
    assert set(doc.user_data) >= {"id", "score", "model_version", "token_scores"}
    html = displacy.render(doc, style="span", options={"spans_key": "rationale"})
    marked = re.findall(r'<span style="font-weight: bold;[^>]*>\s*(\S+)', html)  # each token under a span
    assert marked == [token.text for span in doc.spans["rationale"] for token in span]
    assert all(span.label_ == "rationale" for span in doc.spans["rationale"])


def classified(i: int) -> Output:
    record = Record(id=f"d{i}", tokens=["Nice", "head", ",", "thin", "body", "."], text="Nice  head, thin body.",
                    offsets=[(0, 4), (6, 10), (10, 11), (12, 16), (17, 21), (21, 22)])
    return Output(record, [1, 1, 1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1, 0.6, 0.2], prediction="pos" if i else "neg",
                  extra={"probabilities": {"neg": 0.4, "pos": 0.6} if i else {"neg": 0.7, "pos": 0.3}})


@pytest.mark.parametrize("name", ["tasks.json", "docs.spacy"])
def test_class_predictions_read_back_as_classes_in_the_raw_text(tmp_path, name):
    target = tmp_path / name
    with open_writer(target, "label-studio" if name.endswith("json") else "auto", model_version="run") as writer:
        writer.write([classified(0), classified(1)])
    read = read_records(target)
    assert [r.label for r in read] == ["neg", "pos"]
    assert [r.rationale for r in read] == [[(0, 3), (4, 5)]] * 2
    assert read[0].text == "Nice  head, thin body." and read[0].tokens == classified(0).record.tokens


BAD = [
    ("ls.json", [{"id": 5, "data": {"text": "short"}, "annotations": [{"result": [
        {"type": "labels", "value": {"start": 2, "end": 9, "labels": ["rationale"]}}]}]}],
     "ls.json: task 1 (id 5), annotations[0].result[0].value: span [2, 9] is outside the text"),
    ("ls.json", [{"id": 5, "data": {"body": "short"}, "annotations": []}],
     "ls.json: task 1 (id 5): no data.text, expected the document's text"),
    ("min.json", [{"id": 3, "text": "short", "annotation_id": 1,
                   "label": [{"start": 0, "end": 2, "labels": ["rationale"]}]}],
     "min.json: no span is labelled 'evidence' (--rationale-label); the labels found: 'rationale'"),
    ("prodigy.jsonl", [{"text": "short", "spans": [{"start": -1, "end": 2, "label": "x"}]}],
     "prodigy.jsonl:1, spans[0]: span [-1, 2] is outside the text"),
    ("doccano.jsonl", [{"text": "short", "label": [[0, 2, "x"]]}, {"label": [[0, 2]]}],
     "doccano.jsonl:2: no text, expected the document's text"),
]


@pytest.mark.parametrize("name, content, message", BAD)
def test_a_bad_file_is_one_line_naming_file_task_and_field(tmp_path, monkeypatch, name, content, message):
    monkeypatch.chdir(tmp_path)
    if name.endswith(".jsonl"):
        write_lines(tmp_path / name, content)
    else:
        write_json(tmp_path / name, content)
    result = invoke("score", "nothing.jsonl", name, "--rationale-label", "evidence" if "min" in name else "x")
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {message}"), result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_a_file_that_is_not_a_docbin_is_one_line(tmp_path):
    (tmp_path / "x.spacy").write_bytes(b"not a docbin")
    result = invoke("score", tmp_path / "nothing.jsonl", tmp_path / "x.spacy")
    assert result.exit_code == 2 and "x.spacy: not a spaCy DocBin (.spacy) file" in result.output
