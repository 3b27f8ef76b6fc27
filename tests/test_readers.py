"""Readers, format detection and tokenization, on tiny files written per test."""

from __future__ import annotations

import functools
import json
import random
import re
import string
import subprocess
import sys

import pytest
from helpers import write

from rationale_cli.data.readers import FORMATS, detect_format, iter_records, read_records
from rationale_cli.data.readers.table import iter_table
from rationale_cli.data.tokenize import tokenize
from rationale_cli.runtime.errors import UserError


def jsonl(*objects) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


def raises_at(location: str, fragment: str = ""):
    """Expect one UserError line that starts with ``location: `` and contains ``fragment``."""
    return pytest.raises(UserError, match=r"^" + re.escape(f"{location}: ") + r".*" + fragment)


# --- tokenization -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["Great head, weak body.", "  two  spaces\tand\nnewlines\n\n", "Don't! Café — naïve (really).", ""],
)
def test_tokenize_offsets_map_back_onto_text(text):
    tokens, offsets = tokenize(text)
    assert len(tokens) == len(offsets)
    assert all(text[s:e] == t for t, (s, e) in zip(tokens, offsets))
    assert all(t.strip() == t and t for t in tokens)


def test_control_characters_split_tokens_as_spaces_do_and_stay_out_of_them():
    text = "good\x00beer \x1b[31mred\x7fhead\x85end"
    tokens, offsets = tokenize(text)
    assert tokens == ["good", "beer", "[", "31mred", "head", "end"]
    assert all(text[s:e] == t for t, (s, e) in zip(tokens, offsets))


def test_tokenize_splits_punctuation_and_clitics():
    assert tokenize("Don't stop.")[0] == ["Do", "n't", "stop", "."]


def test_tokenize_gives_spacys_tokens_of_each_run_alone_whatever_came_before():
    """Each whitespace-free run has spaCy's tokens of the run alone, whichever texts were
    tokenized before (their runs kept): special cases, punctuation and whitespace of every
    kind, in random texts. On the whole text spaCy would split an emoticon by the token
    before it; a run's tokens do not depend on its neighbours."""
    tokenizer = spacy_tokenizer()
    assert tokenize(") :]x")[0] == [")", ":]", "x"] and tokenize("x :]x")[0] == ["x", ":]", "x"]
    rng = random.Random(1)
    pieces = [*rng.sample(sorted(tokenizer.rules), 300), "(", ")", ".", ",", "!", '"', "'", "--", "...", ":)",
              ":]x", "http://x.org/a?b=1", "\n", "\t", "\u00a0", "\u2003", "\x1c", "\r\n", "can't", "3.5%", "a/b"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) + rng.choice(["", "", " ", "  ", "\n"]) for _ in range(rng.randrange(1, 12)))
        assert tokenize(text) == alone(text), text


def test_runs_of_ascii_letters_are_one_token_each_unless_spacy_lists_them():
    """Runs of ASCII letters, which tokenize takes whole without asking spaCy, are spaCy's
    tokens too: random words of every case, and the special cases it splits (``dont``)."""
    rng = random.Random(2)
    special = [rule for rule in spacy_tokenizer().rules if rule.isascii() and rule.isalpha()]
    words = special + ["".join(rng.choice(string.ascii_letters) for _ in range(rng.randrange(1, 13)))
                       for _ in range(20000)]
    for start in range(0, len(words), 500):
        text = " ".join(words[start : start + 500])
        assert tokenize(text) == alone(text)


@functools.cache
def spacy_tokenizer():
    import spacy

    tokenizer = spacy.blank("en").tokenizer
    tokenizer.max_cache_size = 0  # no state
    return tokenizer


def alone(text):
    """spaCy's tokens and offsets of each whitespace-free run of ``text`` alone."""
    tokens, offsets = [], []
    for match in re.finditer(r"\S+", text):
        for token in spacy_tokenizer()(match.group()):
            tokens.append(token.text)
            offsets.append((match.start() + token.idx, match.start() + token.idx + len(token)))
    return tokens, offsets


def test_importing_the_package_does_not_import_spacy_or_pandas():
    code = (
        "import sys, rationale_cli.data.readers, rationale_cli.data.tokenize, rationale_cli.data.vocab;"
        "print('spacy' in sys.modules, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --- beer -------------------------------------------------------------------------

BEER = "0.70 0.60 0.50 0.40 0.30\tgreat head , weak body\n0.10 0.20 0.30 0.40 1.00\tpours black\n"


def test_beer_reviews_gz_aspect_from_file_name(tmp_path):
    path = write(tmp_path / "reviews.aspect1.heldout.txt.gz", BEER)
    records = read_records(path)
    assert [r.id for r in records] == ["1", "2"]
    assert records[0].tokens == ["great", "head", ",", "weak", "body"]
    assert [r.label for r in records] == [0.6, 0.2]
    assert all(isinstance(r.label, float) and r.rationale is None and r.text is None for r in records)


def test_beer_aspect_argument_overrides_and_is_required_without_name(tmp_path):
    path = write(tmp_path / "reviews.aspect1.heldout.txt", BEER)
    assert [r.label for r in read_records(path, aspect=4)] == [0.3, 1.0]
    other = write(tmp_path / "reviews.260k.train.txt", BEER)
    assert detect_format(other) == "beer"
    with pytest.raises(UserError, match="give --aspect 0-4"):
        read_records(other)
    assert [r.label for r in read_records(other, aspect=0)] == [0.7, 0.1]


@pytest.mark.parametrize("aspect", [7, -1])
def test_beer_unknown_aspect(tmp_path, aspect):
    path = write(tmp_path / "reviews.aspect0.txt", BEER)
    with pytest.raises(UserError) as err:
        read_records(path, aspect=aspect)
    assert str(err.value) == (
        f"unknown aspect {aspect}: expected 0-4 (0 appearance, 1 aroma, 2 palate, 3 taste, 4 overall)"
    )


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("0.1 0.2 0.3 0.4\tfour scores\n", "expected 5 scores"),
        ("0.1 0.2 0.3 0.4 0.5 no tab here\n", "expected 5 scores"),
        ("0.1 0.2 0.3 0.4 0.5\t   \n", "empty document"),
        ("0.1 1.2 0.3 0.4 0.5\tscore too high\n", r"in \[0, 1\]"),
        ("0.1 x 0.3 0.4 0.5\tnot a number\n", r"in \[0, 1\]"),
    ],
)
def test_beer_malformed_lines(tmp_path, bad, fragment):
    path = write(tmp_path / "reviews.aspect1.heldout.txt.gz", BEER + bad)
    with raises_at(f"{path}:3", fragment):
        read_records(path)


# --- beer annotations -------------------------------------------------------------

ANNOTATION = {
    "x": ["clear", "copper", ",", "smells", "of", "toffee"],
    "y": [0.8, 0.7, 0.6, 1.0, 0.9],
    "0": [[0, 3]],
    "1": [[3, 5], [5, 6]],
    "2": [],
    "3": [],
    "4": [],
    "raw": "{}",
    "rid": 417578,
}


def test_beer_annotations(tmp_path):
    second = {k: v for k, v in ANNOTATION.items() if k != "rid"}
    path = write(tmp_path / "annotations.json", jsonl(ANNOTATION, second))
    assert detect_format(path) == "beer-annotations"
    records = read_records(path, aspect=1)
    assert [r.id for r in records] == ["417578", "2"]
    assert records[0].label == 0.7 and isinstance(records[0].label, float)
    assert records[0].rationale == [(3, 5), (5, 6)]
    assert records[0].tokens == ANNOTATION["x"]
    assert read_records(path, aspect=2)[0].rationale == []


def test_beer_annotations_need_an_aspect(tmp_path):
    path = write(tmp_path / "annotations.json", jsonl(ANNOTATION))
    with pytest.raises(UserError, match="give --aspect 0-4"):
        read_records(path)


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"0": [[2, 9]]}, "out of range"),
        ({"0": [[3, 3]]}, "out of range"),
        ({"0": [[0]]}, "start, end"),
        ({"y": [0.5]}, "5 scores"),
        ({"y": [1.5, 0, 0, 0, 0]}, r"in \[0, 1\]"),
        ({"x": "not a list"}, "'x'"),
        ({"x": []}, "empty document"),
    ],
)
def test_beer_annotations_malformed(tmp_path, change, fragment):
    path = write(tmp_path / "annotations.json", jsonl(ANNOTATION, {**ANNOTATION, **change}))
    with raises_at(f"{path}:2", fragment):
        read_records(path, aspect=0)


# --- ERASER -----------------------------------------------------------------------


def evidence(docid, start, end):
    return {"docid": docid, "start_token": start, "end_token": end, "start_sentence": -1, "end_sentence": -1}


def eraser_dir(tmp_path):
    root = tmp_path / "movies"
    write(root / "docs" / "negR_000.txt", "a bad film .\nreally bad acting .\n")
    write(root / "docs" / "posR_001.txt", "a great film .\n")
    neg = {
        "annotation_id": "negR_000.txt",
        "classification": "NEG",
        "evidences": [
            [evidence("negR_000.txt", 5, 7)],
            [evidence("negR_000.txt", 1, 2), evidence("negR_000.txt", 2, 3)],
        ],
        "query": "What is the sentiment of this review?",
    }
    pos = {"annotation_id": "posR_001.txt", "classification": "POS", "evidences": [[evidence("posR_001.txt", 1, 1)]]}
    write(root / "train.jsonl", jsonl(neg))
    write(root / "val.jsonl", jsonl(pos))
    return root


def test_eraser_directory_and_split_file(tmp_path):
    root = eraser_dir(tmp_path)
    assert detect_format(root) == "eraser"
    assert detect_format(root / "val.jsonl") == "eraser"
    (record,) = read_records(root)
    assert record.id == "negR_000.txt" and record.label == "NEG"
    assert record.tokens == ["a", "bad", "film", ".", "really", "bad", "acting", "."]
    assert record.rationale == [(1, 3), (5, 7)]  # union, sorted, touching spans merged
    (val,) = read_records(root, split="val")
    assert val.label == "POS" and val.rationale == []  # the empty span is skipped
    assert read_records(root / "val.jsonl")[0].id == "posR_001.txt"


def test_eraser_docid_from_evidence(tmp_path):
    root = eraser_dir(tmp_path)
    obj = {"annotation_id": "q1", "classification": "POS", "evidences": [[evidence("posR_001.txt", 0, 2)]]}
    write(root / "test.jsonl", jsonl(obj))
    (record,) = read_records(root, split="test")
    assert record.id == "q1" and record.tokens == ["a", "great", "film", "."] and record.rationale == [(0, 2)]


@pytest.mark.parametrize(
    "obj, fragment",
    [
        ({"annotation_id": "gone.txt", "classification": "NEG", "evidences": []}, "gone.txt not found"),
        ({"annotation_id": "posR_001.txt", "evidences": []}, "'classification'"),
        (
            {"annotation_id": "posR_001.txt", "classification": "POS", "evidences": [[evidence("posR_001.txt", 2, 9)]]},
            "out of range",
        ),
        (
            {"annotation_id": "posR_001.txt", "classification": "POS", "evidences": [[evidence("posR_001.txt", 3, 1)]]},
            "out of range",
        ),
        ({"annotation_id": "posR_001.txt", "classification": "POS", "evidences": [[{"docid": "x"}]]}, "start_token"),
    ],
)
def test_eraser_malformed(tmp_path, obj, fragment):
    root = eraser_dir(tmp_path)
    path = write(root / "test.jsonl", "\n" + jsonl(obj))
    with raises_at(f"{path}:2", fragment):
        read_records(root, split="test")


def test_eraser_unknown_split(tmp_path):
    with pytest.raises(UserError, match="unknown split 'dev'"):
        read_records(eraser_dir(tmp_path), split="dev")


# --- native JSON lines --------------------------------------------------------------


def test_jsonl_text_tokens_labels_ids(tmp_path):
    path = write(
        tmp_path / "data.jsonl",
        jsonl(
            {"id": "a", "text": "Great head, weak body.", "score": 0.8, "rationale": [[0, 2]]},
            {"tokens": ["great", "head"], "label": "POS"},
        )
        + "\n"
        + jsonl({"id": 7, "text": "Just text.", "label": 1}, {"text": "No label at all."}),
    )
    a, b, c, d = read_records(path)
    assert a.id == "a" and a.label == 0.8 and isinstance(a.label, float) and a.rationale == [(0, 2)]
    assert a.tokens == ["Great", "head", ",", "weak", "body", "."]
    assert a.text == "Great head, weak body." and a.offsets[2] == (10, 11)
    assert b.id == "2" and b.tokens == ["great", "head"] and b.label == "POS" and b.text is None
    assert c.id == "7" and c.label == "1"
    assert d.id == "5" and d.label is None and d.rationale is None


@pytest.mark.parametrize(
    "line, fragment",
    [
        ('{"text": "unterminated', "expected one JSON object"),
        ('["a list"]', "expected a JSON object"),
        ('{"label": "POS"}', "'text'"),
        ('{"tokens": "not a list"}', "'tokens'"),
        ('{"tokens": []}', "empty document"),
        ('{"text": "   "}', "empty document"),
        ('{"text": "a b c", "score": 1.5}', r"in \[0, 1\]"),
        ('{"text": "a b c", "score": "high"}', r"in \[0, 1\]"),
        ('{"text": "a b c", "score": true}', r"in \[0, 1\]"),
        ('{"text": "a b c", "score": 0.5, "label": "POS"}', "not both"),
        ('{"text": "a b c", "label": {"x": 1}}', "'label'"),
        ('{"text": "a b c", "rationale": [[1, 4]]}', r"\[1, 4\] out of range"),
        ('{"text": "a b c", "rationale": [[2, 1]]}', "out of range"),
        ('{"text": "a b c", "rationale": [[-1, 1]]}', "out of range"),
        ('{"text": "a b c", "rationale": [[0.5, 1]]}', "start, end"),
        ('{"text": "a b c", "rationale": "0-1"}', "start, end"),
    ],
)
def test_jsonl_malformed(tmp_path, line, fragment):
    path = write(tmp_path / "data.jsonl.gz", jsonl({"text": "fine"}) + line + "\n")
    with raises_at(f"{path}:2", fragment):
        read_records(path)


# --- CSV / TSV ----------------------------------------------------------------------


def test_csv_scores_and_ids(tmp_path):
    path = write(tmp_path / "reviews.csv", 'id,text,label\nr1,"Great head, weak body.",0.8\nr2,Pours black.,1\n')
    a, b = read_records(path)
    assert (a.id, a.label, b.id, b.label) == ("r1", 0.8, "r2", 1.0)
    assert isinstance(b.label, float)
    assert a.text[slice(*a.offsets[2])] == ","


def test_csv_classes_gz_custom_columns_and_row_ids(tmp_path):
    path = write(tmp_path / "reviews.csv.gz", "review,sentiment\ngood film,1\nbad film,0\nNA,neg\n")
    assert detect_format(path) == "csv"
    records = read_records(path, text_col="review", label_col="sentiment")
    assert [(r.id, r.label, r.tokens) for r in records] == [
        ("1", "1", ["good", "film"]),
        ("2", "0", ["bad", "film"]),
        ("3", "neg", ["NA"]),
    ]
    assert all(r.label is None for r in read_records(path, text_col="review", label_col=None))


def test_tsv_keeps_quotes(tmp_path):
    path = write(tmp_path / "reviews.tsv", 'text\tlabel\n"great" beer\tPOS\n')
    (record,) = read_records(path)
    assert record.text == '"great" beer' and record.label == "POS"


def test_table_streams_in_chunks_with_one_label_type(tmp_path):
    rows = "".join(f"review {i},{i % 2}\n" for i in range(7))
    path = write(tmp_path / "reviews.csv", "text,label\n" + rows)
    records = list(iter_table(path, ",", chunk_rows=2))
    assert [r.label for r in records] == [str(i % 2) for i in range(7)]
    scores = write(tmp_path / "scores.csv", "text,label\na,0.5\nb,1\nc,0\nd,oops\n")
    with raises_at(f"{scores}:5", r"in \[0, 1\]"):
        list(iter_table(scores, ",", chunk_rows=2))


def test_table_labels_where_present_when_not_required(tmp_path):
    scores = write(tmp_path / "scores.csv", "review_id,text,label\nr1,a,\nr2,b,0.5\n")
    records = list(iter_table(scores, ",", id_col="review_id", label_required=False))
    assert [(r.id, r.label) for r in records] == [("r1", None), ("r2", 0.5)]
    unlabelled = write(tmp_path / "unlabelled.csv", "text\na\nb\n")
    records = list(iter_table(unlabelled, ",", id_col="", label_required=False))
    assert [(r.id, r.label) for r in records] == [("1", None), ("2", None)]
    with raises_at(str(unlabelled), "no id column 'review_id'; columns are: text .*--id-col ''"):
        list(iter_table(unlabelled, ",", id_col="review_id", label_required=False))


@pytest.mark.parametrize(
    "content, location, fragment",
    [
        ("text,label\na,0.5\nb,1.5\n", ":3", r"in \[0, 1\]"),
        ("text,label\na,0.5\nb,\n", ":3", "missing label in column 'label'"),
        ("text,label\na,POS\nb,\n", ":3", "missing label"),
        ("text,label\na,POS\n,NEG\n", ":3", "empty document"),
        ("text,label\na,POS\nb,NEG,extra\n", ":3", "expected 2 fields, saw 3"),
        ("body,stars\na,1\n", "", "no column 'text'; columns are: body, stars"),
        ("text,stars\na,1\n", "", "no column 'label'; columns are: text, stars"),
        ("", "", "empty file"),
    ],
)
def test_csv_malformed(tmp_path, content, location, fragment):
    path = write(tmp_path / "reviews.csv", content)
    with raises_at(f"{path}{location}", fragment):
        read_records(path)


# --- plain text -----------------------------------------------------------------------


def test_text_lines(tmp_path):
    path = write(tmp_path / "reviews.txt.gz", "Great head.\n\n   \nWeak body, sadly.\r\n")
    a, b = read_records(path)
    assert (a.id, b.id) == ("1", "4")
    assert b.text == "Weak body, sadly." and b.label is None
    assert all(r.text[s:e] == t for r in (a, b) for t, (s, e) in zip(r.tokens, r.offsets))


# --- detection, streaming, generic errors -----------------------------------------------


@pytest.mark.parametrize(
    "name, content, fmt",
    [
        ("reviews.aspect0.train.txt.gz", "", "beer"),
        ("my_beer.txt", "0.1 0.2 0.3 0.4 0.5\tgood beer\n", "beer"),
        ("annotations.json", jsonl(ANNOTATION), "beer-annotations"),
        ("gold.jsonl", jsonl(ANNOTATION), "beer-annotations"),
        ("data.jsonl", jsonl({"text": "hi"}), "jsonl"),
        ("data.json", jsonl({"text": "hi"}), "jsonl"),
        ("data.jsonl.gz", jsonl({"text": "hi"}), "jsonl"),
        ("data.CSV", "text,label\n", "csv"),
        ("data.tsv.gz", "text\tlabel\n", "tsv"),
        ("notes.txt", "hello\n", "text"),
        ("README", "hello\n", "text"),
    ],
)
def test_detect_format(tmp_path, name, content, fmt):
    assert detect_format(write(tmp_path / name, content)) == fmt


def test_formats_list():
    assert tuple(FORMATS) == ("auto", "beer", "beer-annotations", "eraser", "jsonl", "csv", "tsv", "text",
                              "label-studio", "prodigy", "doccano", "spacy")


def docbin(path, text: str):
    import spacy
    from spacy.tokens import DocBin

    DocBin(docs=[spacy.blank("en").make_doc(text)]).to_disk(path)
    return path


def test_every_format_has_a_help_line_and_reads(tmp_path):
    sources = {
        "auto": write(tmp_path / "reviews.aspect1.train.txt", BEER),
        "beer": write(tmp_path / "beer.txt", BEER),
        "beer-annotations": write(tmp_path / "annotations.json", jsonl(ANNOTATION)),
        "eraser": eraser_dir(tmp_path),
        "jsonl": write(tmp_path / "data.jsonl", jsonl({"text": "hi there", "label": "POS"})),
        "csv": write(tmp_path / "data.csv", "text,label\nhi there,POS\n"),
        "tsv": write(tmp_path / "data.tsv", "text\tlabel\nhi there\tPOS\n"),
        "text": write(tmp_path / "notes.txt", "hi there\n"),
        "label-studio": write(tmp_path / "export.json", json.dumps([{"data": {"text": "hi there"}, "annotations": []}])),
        "prodigy": write(tmp_path / "prodigy.jsonl", jsonl({"text": "hi there", "spans": []})),
        "doccano": write(tmp_path / "doccano.jsonl", jsonl({"text": "hi there", "label": [[0, 2, "x"]]})),
        "spacy": docbin(tmp_path / "docs.spacy", "hi there"),
    }
    assert sources.keys() == FORMATS.keys()
    for fmt, entry in FORMATS.items():
        assert entry.help.strip() and "\n" not in entry.help
        records = read_records(sources[fmt], fmt, aspect=0)
        assert records and all(r.tokens for r in records), fmt
    assert read_records(sources["auto"])[0].label == 0.6  # detected as beer, aspect 1 from the name
    with pytest.raises(UserError, match="expected one of auto, beer, beer-annotations, eraser, jsonl, csv, tsv, text, "
                                        "label-studio, prodigy, doccano, spacy$"):
        iter_records(sources["text"], "xml")


def test_iter_records_streams_lazily(tmp_path):
    path = write(tmp_path / "data.jsonl", jsonl({"text": "one"}, {"text": "two"}) + "{broken\n")
    stream = iter_records(path)
    assert next(stream).tokens == ["one"]
    assert next(stream).tokens == ["two"]
    with raises_at(f"{path}:3", "JSON"):
        next(stream)


@pytest.mark.parametrize("fmt", ["text", "jsonl", "beer", "csv"])
def test_missing_file(tmp_path, fmt):
    path = tmp_path / "nope.txt"
    with pytest.raises(UserError, match=f"^{path}: no such file$"):
        read_records(path, fmt, aspect=0)


def test_missing_file_auto(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        read_records(tmp_path / "nope.jsonl")


@pytest.mark.parametrize("name", ["empty.txt", "empty.jsonl", "blank.txt.gz", "header.csv"])
def test_no_documents(tmp_path, name):
    content = {"blank.txt.gz": "\n  \n", "header.csv": "text,label\n"}.get(name, "")
    path = write(tmp_path / name, content)
    with pytest.raises(UserError, match=f"^{path}: no documents found$"):
        read_records(path)


def test_bad_utf8_names_the_line(tmp_path):
    path = tmp_path / "data.txt"
    path.write_bytes(b"fine\n\xff\xfe bad\n")
    with raises_at(f"{path}:2", "UTF-8"):
        read_records(path)


def test_unknown_format_and_bare_directory(tmp_path):
    with pytest.raises(UserError, match="unknown format 'xml'"):
        iter_records(tmp_path / "x", "xml")
    with pytest.raises(UserError, match="directory without docs/"):
        read_records(tmp_path)


@pytest.mark.parametrize("data, kind", [
    (b'{"text": "a thick head"}\n', "jsonl"),
    (b'id,text\n1,"a thick head, white"\n', "csv"),
    (b'"ID","Text"\n1,a thick head\n', "csv"),
    (b"id\ttext\n1\ta thick head\n", "tsv"),
    (b"a thick head, white lacing\n", "text"),
])
def test_standard_input_is_read_in_the_format_it_holds(monkeypatch, data, kind):
    import io

    from rationale_cli.data import sources

    monkeypatch.setattr("sys.stdin", type("Stdin", (), {"buffer": io.BytesIO(data)})())
    assert detect_format(sources.from_stdin()) == kind


def test_empty_standard_input_is_one_line(monkeypatch):
    import io

    from rationale_cli.data import sources

    monkeypatch.setattr("sys.stdin", type("Stdin", (), {"buffer": io.BytesIO(b"\n  \n")})())
    with pytest.raises(UserError, match=r"^standard input \(-\) is empty: no documents to read$"):
        sources.from_stdin()


def test_the_word_demo_is_the_corpus_whatever_the_folder_holds_and_dot_slash_demo_is_the_path(
        tmp_path, monkeypatch, capfd):
    from rationale_cli.data import sources

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sources, "_demo_path_noted", False)
    corpus = [record.id for record in sources.stream("demo", "test")]
    assert corpus and capfd.readouterr().err == ""  # no path named demo: no note
    (tmp_path / "demo").mkdir()
    write(tmp_path / "demo" / "docs.jsonl", '{"id": "mine", "text": "my own review", "label": 1}\n')
    assert [record.id for record in sources.stream("demo", "test")] == corpus
    assert [record.id for record in sources.stream("demo", "test")] == corpus
    assert capfd.readouterr().err.count("write ./demo for the path") == 1  # once
    assert not sources.is_demo("./demo") and not sources.is_demo(tmp_path / "demo")
