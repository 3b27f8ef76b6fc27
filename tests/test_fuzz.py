"""Seeded random mutations of valid JSONL, CSV, beer and ERASER inputs, read and run
through what ``predict`` and ``evaluate`` do, in-process: every outcome is a result or a
UserError (one line for the user), never another exception.

RATIONALE_FUZZ_CASES=5000 python -m pytest tests/test_fuzz.py  runs more cases.
"""

import json
import os
import random

import pytest
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.output.prediction import Rationale
from rationale_cli.runs.inference import evaluate, run_model
from rationale_cli.runs.run_directory import load_run
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.safe_json import to_json_line

CASES = int(os.environ.get("RATIONALE_FUZZ_CASES", "240"))

JSONL = "".join(json.dumps(obj) + "\n" for obj in [
    {"id": "r1", "text": "Poured a hazy orange with a thick white head.", "score": 0.8, "rationale": [[0, 6]]},
    {"id": "r2", "tokens": ["murky", "brown", ",", "no", "head"], "score": 0.3, "rationale": [[0, 2]]},
    {"id": "r3", "text": "Crystal clear gold, lovely lacing.", "score": 0.9},
])
CSV = "id,text,label\n1,\"a thick, white head\",0.8\n2,murky brown with no head,0.2\n3,clear gold,0.9\n"
BEER = ("0.8 0.6 0.7 0.5 0.6\ta hazy orange with a thick white head\n"
        "0.3 0.4 0.2 0.5 0.3\tmurky brown , no head at all\n")
ERASER_ANNOTATION = {"annotation_id": "d1", "classification": "POS",
                     "evidences": [[{"docid": "d1", "start_token": 0, "end_token": 2, "text": "a fine"}]]}
ERASER_DOC = "a fine film .\nwell acted and well told .\n"


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One of: truncate, flip bytes, insert junk, swap a JSON value for another type,
    a huge number, deep nesting, or an empty file."""
    kind = rng.randrange(8)
    if kind == 0:
        return data[: rng.randrange(len(data) + 1)]
    if kind == 1:
        out = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:
        at = rng.randrange(len(data) + 1)
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[at:]
    if kind == 3:
        text = data.decode("utf-8", "replace")
        for old in ('"score": 0.8', '[[0, 6]]', '"r2"', '0.3', '"d1"', '[[{', '0.8 0.6', 'POS', '"tokens": ['):
            if old in text and rng.random() < 0.5:
                text = text.replace(old, rng.choice(['null', '[]', '{}', '"x"', '-1', 'true', '[[5, 2]]', '1e999']), 1)
        return text.encode()
    if kind == 4:
        text = data.decode()
        return text.replace("0.8", rng.choice(["1e400", str(10**30), "-0.0", "NaN", "Infinity"]), 1).encode()
    if kind == 5:
        return b"[" * rng.choice([100, 5000, 50000]) + b"\n" + data
    if kind == 6:
        return b""
    return data.replace(b"\n", rng.choice([b"\r\n", b"\n\n", b"\x00\n", b"\n\xef\xbb\xbf"]))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    out = tmp_path_factory.mktemp("fuzz") / "run"
    result = CliRunner().invoke(app, ["train", "--data", "demo", "--out", str(out), "--encoder", "cnn",
                                      "--extractor", "attention", "--embedding-dim", "8", "--hidden-size", "8",
                                      "--epochs", "1", "--batch-size", "100"])
    assert result.exit_code == 0, result.output
    return load_run(out)


def write_case(folder, kind: str, rng: random.Random):
    """A mutated input of ``kind``; returns (path, format, aspect)."""
    if kind == "eraser":
        (folder / "docs").mkdir(parents=True, exist_ok=True)
        annotation = (json.dumps(ERASER_ANNOTATION) + "\n").encode()
        doc = ERASER_DOC.encode()
        if rng.random() < 0.5:
            annotation = mutate(annotation, rng)
        else:
            doc = mutate(doc, rng)
        for split in ("train", "val", "test"):
            (folder / f"{split}.jsonl").write_bytes(annotation)
        (folder / "docs" / "d1").write_bytes(doc)
        return folder, "eraser", None
    source, name, aspect = {"jsonl": (JSONL, "in.jsonl", None), "csv": (CSV, "in.csv", None),
                            "beer": (BEER, "reviews.aspect0.txt", 0)}[kind]
    path = folder / name
    path.write_bytes(mutate(source.encode(), rng))
    return path, kind, aspect


@pytest.mark.parametrize("kind", ["jsonl", "csv", "beer", "eraser"])
def test_mutated_inputs_give_a_result_or_one_user_error(loaded, tmp_path, kind):
    rng = random.Random(f"fuzz-{kind}")
    outcomes = {"result": 0, "error": 0}
    for case in range(CASES // 4):
        folder = tmp_path / str(case)
        folder.mkdir()
        path, fmt, aspect = write_case(folder, kind, rng)
        try:
            records = sources.stream(str(path), "test", fmt=rng.choice(["auto", fmt]), aspect=aspect)
            for result in run_model(loaded.model, loaded.vocab, loaded.task, records, batch_size=2):
                json.loads(to_json_line(Rationale.of(result).to_dict()))
            labelled = sources.load(str(path), "test", fmt=fmt, aspect=aspect)
            if all(r.label is not None for r in labelled):
                metrics = evaluate(loaded.model, loaded.vocab, loaded.task, labelled, batch_size=2)
                json.dumps(metrics, allow_nan=False)
            outcomes["result"] += 1
        except UserError as err:
            assert "\n" not in str(err), str(err)
            outcomes["error"] += 1
    assert outcomes["result"] + outcomes["error"] == CASES // 4
    assert outcomes["error"] > 0  # the mutations do reach the error paths


def test_a_file_without_line_breaks_is_one_document_refused_in_one_line(tmp_path, monkeypatch):
    """What a corpus saved without its line breaks reads as: one document longer than a model reads."""
    from rationale_cli.data import batching

    monkeypatch.setattr(batching, "MAX_DOCUMENT_TOKENS", 30)
    for name, data in (("in.txt", JSONL.replace("\n", " ")), ("in.jsonl", json.dumps({"text": BEER * 5}) + "\n"),
                       ("in.csv", CSV.replace("\n", " ", 1).replace("\n", " ") + "\n")):
        path = tmp_path / name
        path.write_text(data)
        try:
            sources.load(str(path), "test")
        except UserError as err:
            assert "\n" not in str(err) and ("at most 30 are read" in str(err) or "column" in str(err)), str(err)
        else:
            pytest.fail(f"{name}: read without an error")


OPTION_VALUES = {
    "--batch-size": ["0", "-1", "1000000000", "10000000000000000000000", "x"],
    "--window": ["0", "-5", "1000000000"],
    "--shard": ["3/2", "a/b", "0/0", "-1/2", "1/1000000000"],
    "--threads": ["-1", "100000"],
    "--workers": ["0", "-2"],
    "--rate": ["-0.1", "2", "nan", "inf", "0", "1e400"],
    "--coherence": ["nan", "-inf", "1e400"],
    "--out": ["/proc/x.jsonl", "{tmp}", "{tmp}/missing/p.jsonl", "/dev/null"],
    "--format": ["beer", "eraser", "parquet", "???"],
    "--aspect": ["-1", "99"],
}


def test_extreme_option_values_give_a_result_or_one_error_line(loaded, tmp_path):
    """``predict`` with one or two options at values a user was seen to try (or worse): a
    result, or one error line and a nonzero exit; never a traceback or another exception."""
    source = tmp_path / "in.txt"
    source.write_text("a hazy orange with a thick white head\nmurky brown , no head at all\n")
    rng = random.Random("options")
    runner = CliRunner()
    for case in range(CASES // 8):
        options = rng.sample(sorted(OPTION_VALUES), rng.choice([1, 2]))
        args = ["predict", str(loaded.path), str(source)]
        for option in options:
            args += [option, rng.choice(OPTION_VALUES[option]).format(tmp=tmp_path)]
        if "--out" not in options:
            args += ["--out", str(tmp_path / f"p{case}.jsonl")]
        result = runner.invoke(app, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert "Traceback" not in result.output, (args, result.output)
        if result.exit_code != 0:
            assert result.exit_code == 2 and result.output.count("\n") <= 8, (args, result.output)
