"""`rationale predict` on a corpus: resumable after SIGKILL and SIGTERM, refusing a changed
input, sharded and merged, with ids from a chosen field and a summary."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rationale_cli.annotation.engine import Shard, count_documents, partial_path, shard_record_path, state_path
from rationale_cli.cli import app
from rationale_cli.data import sources
from rationale_cli.data.batching import capped_batches
from rationale_cli.data.records import Record
from rationale_cli.runtime.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    result = invoke("train", "--data", "demo", "--out", out, "--extractor", "attention", "--encoder", "cnn",
                    "--epochs", 1, "--embedding-dim", 16, "--hidden-size", 16, "--no-reference")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """6,000 demo reviews as JSON lines (pre-tokenized: no spaCy in the loop)."""
    path = tmp_path_factory.mktemp("corpus") / "reviews.jsonl"
    records = sources.load("demo", "train")
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(6000):
            handle.write(json.dumps({"key": f"r{index}", "tokens": records[index % len(records)].tokens}) + "\n")
    return path


def predict(run_dir, source, out, *extra) -> subprocess.Popen:
    command = [sys.executable, "-m", "rationale_cli", "predict", str(run_dir), str(source), "--out", str(out),
               "--window", "200", "--threads", "1", *map(str, extra)]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def interrupt(process: subprocess.Popen, out: Path, sig: int) -> None:
    """Send ``sig`` once the run has finished a window or two."""
    deadline = time.time() + 120
    while not state_path(out).exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert process.poll() is None, "finished before it could be interrupted"
    process.send_signal(sig)
    process.wait(timeout=120)


@pytest.fixture(scope="module")
def whole(run_dir, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "out.jsonl"
    process = predict(run_dir, corpus, out)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert "wrote 6,000 predictions" in err and "documents/s" in err
    return out


def strays(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_a_run_killed_then_rerun_ends_with_the_bytes_of_an_uninterrupted_run(run_dir, corpus, whole, tmp_path):
    out = tmp_path / "out.jsonl"
    first = predict(run_dir, corpus, out)
    interrupt(first, out, signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    saved = json.loads(state_path(out).read_text())
    assert 0 < saved["windows"] < 30 and partial_path(out).stat().st_size >= saved["bytes"]
    assert not out.exists()  # until it is complete
    second = predict(run_dir, corpus, out)
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    assert f"predictions to {out} after the {200 * saved['windows']:,} of the interrupted run" in err
    assert out.read_bytes() == whole.read_bytes()
    assert not state_path(out).exists() and not partial_path(out).exists() and strays(tmp_path) == []


def test_sigterm_stops_at_a_window_and_leaves_no_temporary_file(run_dir, corpus, whole, tmp_path):
    out = tmp_path / "out.jsonl"
    first = predict(run_dir, corpus, out)
    interrupt(first, out, signal.SIGTERM)
    err = first.stderr.read()
    assert first.returncode == 128 + signal.SIGTERM, err
    assert "stopped by SIGTERM after" in err and "run the same command again to continue" in err
    assert strays(tmp_path) == []
    lines = partial_path(out).read_text().splitlines()
    assert len(lines) % 200 == 0 and lines == whole.read_text().splitlines()[: len(lines)]
    second = predict(run_dir, corpus, out)
    assert second.wait(timeout=300) == 0
    assert out.read_bytes() == whole.read_bytes()


def worker_processes(pid: int) -> list[int]:
    """The spawned worker processes of ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) if entry.name.isdigit() else -1
            if parent == pid and b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads worker processes from /proc")
def test_workers_stop_cleanly_survive_a_dead_worker_and_write_the_bytes_of_one_process(run_dir, corpus, whole,
                                                                                      tmp_path):
    out = tmp_path / "out.jsonl"
    first = predict(run_dir, corpus, out, "--workers", 2)
    interrupt(first, out, signal.SIGTERM)
    assert first.returncode == 128 + signal.SIGTERM, first.stderr.read()
    assert strays(tmp_path) == []
    second = predict(run_dir, corpus, out, "--workers", 2)  # continues, then loses a worker
    done = json.loads(state_path(out).read_text())["windows"]
    deadline = time.time() + 120
    while json.loads(state_path(out).read_text())["windows"] == done and time.time() < deadline:
        time.sleep(0.02)
    os.kill(worker_processes(second.pid)[0], signal.SIGKILL)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 2 and err.strip().splitlines()[-1].startswith("error: a worker process died"), err
    assert json.loads(state_path(out).read_text())["windows"] > done  # what it wrote stays
    third = predict(run_dir, corpus, out, "--workers", 2)
    _, err = third.communicate(timeout=300)
    assert third.returncode == 0, err
    assert "after the" in err and out.read_bytes() == whole.read_bytes()
    for wrong in (("--workers", 0), ("--workers", 2, "--device", "cuda")):
        result = invoke("predict", run_dir, corpus, "--out", tmp_path / "x.jsonl", *wrong)
        assert result.exit_code == 2 and "--workers" in result.output and not (tmp_path / "x.jsonl").exists()


def test_a_changed_input_or_option_is_refused_unless_forced(run_dir, corpus, tmp_path):
    out = tmp_path / "out.jsonl"
    first = predict(run_dir, corpus, out)
    interrupt(first, out, signal.SIGKILL)
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(corpus.read_bytes() + corpus.read_bytes()[:200])
    result = invoke("predict", run_dir, changed, "--out", out, "--window", 200)
    assert result.exit_code == 2 and "an interrupted run with another input" in result.output
    result = invoke("predict", run_dir, corpus, "--out", out, "--window", 100)
    assert result.exit_code == 2 and "another options" in result.output
    result = invoke("predict", run_dir, corpus, "--out", out, "--window", 100, "--force")
    assert result.exit_code == 0, result.output
    assert not state_path(out).exists() and len(out.read_text().splitlines()) == 6000


def test_shards_merged_equal_the_unsharded_output(run_dir, corpus, whole, tmp_path):
    parts = []
    for index in range(3):
        part = tmp_path / f"part{index}.jsonl"
        result = invoke("predict", run_dir, corpus, "--out", part, "--window", 200, "--shard", f"{index}/3")
        assert result.exit_code == 0, result.output
        parts.append(part)
    assert sum(len(p.read_text().splitlines()) for p in parts) == 6000
    for order in (parts, [parts[1], parts[2], parts[0]]):  # the records beside the parts give the order
        result = invoke("merge", *order, "--out", tmp_path / "merged.jsonl", "--force")
        assert result.exit_code == 0, result.output
        assert (tmp_path / "merged.jsonl").read_bytes() == whole.read_bytes()


def test_merge_refuses_anything_but_one_complete_unchanged_shard_set(run_dir, corpus, tmp_path):
    parts = []
    for index in range(3):
        part = tmp_path / f"part{index}.jsonl"
        assert invoke("predict", run_dir, corpus, "--out", part, "--window", 3000, "--shard", f"{index}/3").exit_code == 0
        parts.append(part)
    other = tmp_path / "other.jsonl"  # shard 1/3 of the same input with another window
    assert invoke("predict", run_dir, corpus, "--out", other, "--window", 2000, "--shard", "1/3").exit_code == 0
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(parts[1].read_bytes())
    shard_record_path(copy).write_bytes(shard_record_path(parts[1]).read_bytes())
    out = tmp_path / "merged.jsonl"
    for given, message in (([parts[0], parts[2]], "shard 1/3 missing"),
                           ([parts[0], other, parts[2]], "(another window)"),
                           ([*parts, copy], "are both shard 1/3"),
                           ([parts[0], corpus, parts[2]], "no reviews.jsonl.shard.json beside it")):
        result = invoke("merge", *given, "--out", out)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not out.exists()
    whole = invoke("predict", run_dir, corpus, "--out", parts[2], "--window", 3000, "--force")
    assert whole.exit_code == 0 and not shard_record_path(parts[2]).exists()  # no longer a shard
    with open(parts[1], "a", encoding="utf-8") as handle:
        handle.write("{}\n")
    result = invoke("merge", parts[1], "--out", out)
    assert result.exit_code == 2 and "changed since `predict` wrote it" in result.output, result.output


def test_ids_come_from_the_chosen_field(run_dir, corpus, whole):
    lines = [json.loads(line) for line in whole.read_text().splitlines()[:3]]
    assert [line["id"] for line in lines] == ["1", "2", "3"]  # no "id" field: line numbers
    result = invoke("predict", run_dir, corpus, "--out", "-", "--id-field", "key")
    assert result.exit_code == 0
    first = json.loads(result.stdout.splitlines()[0])
    assert first["id"] == "r0"


def test_most_tokens_unknown_is_a_warning(run_dir, tmp_path):
    source = tmp_path / "other.jsonl"
    source.write_text("".join(json.dumps({"tokens": ["zyx", "qwv", "the"]}) + "\n" for _ in range(5)))
    result = invoke("predict", run_dir, source, "--out", tmp_path / "p.jsonl")
    assert result.exit_code == 0
    assert "67% of the tokens are unknown" in result.output


def test_batches_are_capped_in_padded_tokens():
    """Long documents make small batches (memory bounded whatever the lengths), in input order."""
    records = [Record(id=str(i), tokens=["w"] * n) for i, n in enumerate([3, 300, 10, 10, 600, 5])]
    batches = list(capped_batches(records, 2))  # at most 2 documents and 2 * 256 padded positions
    assert [[r.id for r in batch] for batch in batches] == [["0"], ["1"], ["2", "3"], ["4"], ["5"]]
    with_query = Record(id="q", tokens=["w"] * 200, query=["q"] * 100)
    assert len(list(capped_batches([with_query, with_query], 2))) == 2  # 301 positions each


def test_shard_and_count_helpers(tmp_path):
    assert Shard.parse("1/4") == Shard(1, 4)
    for bad in ("4/4", "x", "1/0", "-1/2"):
        with pytest.raises(UserError):
            Shard.parse(bad)
    path = tmp_path / "three.txt"
    path.write_text("a\nb\nc")
    assert count_documents(str(path)) == 3
    path.write_text("a\nb\nc\n")
    assert count_documents(str(path)) == 3


@pytest.mark.parametrize("options", [{}, {"rate": "0.2", "rate_over": "corpus", "window": 64, "batch_size": 16}],
                         ids=["own", "corpus-rate"])
def test_the_python_api_writes_the_file_the_command_writes(run_dir, corpus, tmp_path, options):
    import rationale_cli as rationale

    source = tmp_path / "some.jsonl"
    source.write_text("".join(corpus.read_text().splitlines(keepends=True)[:300]))
    flags = [word for key, value in options.items() for word in (f"--{key.replace('_', '-')}", value)]
    result = invoke("predict", run_dir, source, "--out", tmp_path / "cli.jsonl", *flags)
    assert result.exit_code == 0, result.output
    lines = []
    done = rationale.predict(run_dir, source, tmp_path / "api.jsonl", report=lines.append, **options)
    assert (tmp_path / "api.jsonl").read_bytes() == (tmp_path / "cli.jsonl").read_bytes()
    assert (done.documents, done.resumed, done.stopped, done.where) == (300, 0, None, str(tmp_path / "api.jsonl"))
    assert done.tokens == sum(len(json.loads(line)["tokens"]) for line in source.read_text().splitlines())
    assert f"wrote 300 predictions to {tmp_path / 'cli.jsonl'}: {done.tokens:,} tokens" in result.output
    assert [line in result.output for line in lines] == [True] * (1 if options else 0)  # the threshold's line
    assert (done.decoding.threshold is not None) == bool(options)


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 0}, "--batch-size 0: expected an integer >= 1"),
    ({"window": 0}, "--window 0: expected an integer >= 1"),
    ({"rate_over": "corpus"}, "--rate-over corpus: give the share to hold with --rate"),
    ({"shard": "2/2"}, "--shard 2/2: expected 0 <= I < N"),
    ({"engine": "dask", "rate": "0.1"}, "--rate is not available with --engine dask"),
])
def test_an_invalid_request_is_one_error_before_anything_is_read(tmp_path, monkeypatch, options, message):
    import rationale_cli as rationale
    from rationale_cli.annotation import predict_job
    from rationale_cli.annotation.predict_job import PredictRequest

    def no_work(*args, **kwargs):
        raise AssertionError("the input or the run was read before the request was checked")

    monkeypatch.setattr(predict_job, "load_for_inference", no_work)
    monkeypatch.setattr(predict_job.sources, "from_stdin", no_work)
    with pytest.raises(UserError, match=f"^{message}$"):
        PredictRequest(tmp_path / "no-run", "-", tmp_path / "out.jsonl", **options)
    with pytest.raises(UserError, match=f"^{message}$"):
        rationale.predict(tmp_path / "no-run", "-", tmp_path / "out.jsonl", **options)
    flags = [word for key, value in options.items() for word in (f"--{key.replace('_', '-')}", value)]
    result = invoke("predict", tmp_path / "no-run", "-", "--out", tmp_path / "out.jsonl", *flags)
    assert result.exit_code == 2 and message in result.output, result.output
    assert list(tmp_path.iterdir()) == []
