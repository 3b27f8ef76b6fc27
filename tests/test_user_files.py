"""A user's files are never lost: ``train --out`` writes only into nothing or a run of ours
(or, with ``--force``, only the run's files beside theirs), and ``merge`` never writes over
one of its parts or an existing file without ``--force``."""

import json
from pathlib import Path

from typer.testing import CliRunner

from rationale_cli.annotation.engine import shard_record_path
from rationale_cli.cli import app

SMALL = ["--epochs", "1", "--encoder", "cnn", "--extractor", "attention", "--embedding-dim", "8", "--hidden-size", "8",
         "--no-reference"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_train_refuses_a_folder_of_someone_elses_files_and_keeps_them(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"my": "settings"}\n')
    (folder / "notes.txt").write_text("keep me\n")
    result = invoke("train", "--data", "demo", "--out", folder, *SMALL)
    assert result.exit_code == 2 and "holds files that are not a run's (config.json, notes.txt)" in result.output
    assert (folder / "config.json").read_text() == '{"my": "settings"}\n' and len(list(folder.iterdir())) == 2
    forced = invoke("train", "--data", "demo", "--out", folder, "--force", *SMALL)  # config.json would be replaced
    assert forced.exit_code == 2 and len(forced.output.strip().splitlines()) == 1, forced.output
    assert f"{folder}: holds config.json, not a run's, which the run's files would replace" in forced.output
    assert (folder / "config.json").read_text() == '{"my": "settings"}\n' and len(list(folder.iterdir())) == 2
    (folder / "config.json").rename(tmp_path / "config.json")
    forced = invoke("train", "--data", "demo", "--out", folder, "--force", *SMALL)
    assert forced.exit_code == 0, forced.output
    assert (folder / "notes.txt").read_text() == "keep me\n" and (folder / "model.safetensors").is_file()


def test_train_writes_into_an_empty_folder_and_over_its_own_run_with_force(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    assert invoke("train", "--data", "demo", "--out", folder, *SMALL).exit_code == 0
    again = invoke("train", "--data", "demo", "--out", folder, *SMALL)
    assert again.exit_code == 2 and "a trained run is already there" in again.output
    assert invoke("train", "--data", "demo", "--out", folder, "--force", *SMALL).exit_code == 0


def parts_of(tmp_path: Path) -> list[Path]:
    """Two shards' outputs of two documents each, with the records predict writes beside them."""
    parts = []
    for index in range(2):
        part = tmp_path / f"part{index}.jsonl"
        part.write_text("".join(f'{{"id": "{index}-{i}"}}\n' for i in range(2)))
        shard_record_path(part).write_text(json.dumps({"shard": f"{index}/2", "window": 2, "bytes": part.stat().st_size,
                                                       "input": {"path": "in.jsonl"}, "model": "m"}))
        parts.append(part)
    return parts


def test_merge_never_writes_over_a_part_or_an_existing_file(tmp_path):
    parts = parts_of(tmp_path)
    before = [part.read_bytes() for part in parts]
    for args, message in (((*parts, "--out", parts[0]), "is one of the command's inputs"),
                          ((parts[0], parts[0], "--out", tmp_path / "m.jsonl"), "given twice"),
                          ((*parts, "--out", parts[1], "--force"), "is one of the command's inputs")):
        result = invoke("merge", *args)
        assert result.exit_code == 2 and message in result.output, result.output
    assert [part.read_bytes() for part in parts] == before
    merged = tmp_path / "merged.jsonl"
    merged.write_text("the user's\n")
    refused = invoke("merge", *parts, "--out", merged)
    assert refused.exit_code == 2 and "already exists; choose another --out or pass --force" in refused.output and merged.read_text() == "the user's\n"
    assert invoke("merge", *parts, "--out", merged, "--force").exit_code == 0
    assert [line[8:11] for line in merged.read_text().splitlines()] == ["0-0", "0-1", "1-0", "1-1"]
