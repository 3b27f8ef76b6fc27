"""Vocabulary building and persistence; word-vector loading."""

from __future__ import annotations

import json
import re

import pytest
import torch
from helpers import write

from rationale_cli.data.vectors import load_vectors
from rationale_cli.data.vocab import PAD, UNK, Vocab
from rationale_cli.runtime.errors import UserError

DOCS = [["The", "beer", "is", "good"], ["the", "head", "is", "white"], ["the", "beer"]]


# --- vocabulary -----------------------------------------------------------------------


def test_encode_looks_up_the_lower_case_of_each_token():
    lower = Vocab([PAD, UNK, "great", "head", "ıi"], lower=True)
    tokens = ["Great", "head", "HEAD", "great", "nope", "ıI", "Ünknown"]
    assert lower.encode(tokens) == [lower.stoi.get(t.lower(), 1) for t in tokens] == [2, 3, 3, 2, 1, 4, 1]
    assert lower.encode(iter(tokens)) == lower.encode(tokens)
    cased = Vocab([PAD, UNK, "Great", "head"], lower=False)
    assert cased.encode(tokens) == [2, 3, 1, 1, 1, 1, 1]


def test_encode_keeps_forms_outside_the_list_and_gives_the_same_indices(monkeypatch):
    import rationale_cli.data.vocab as vocab_module

    lower = Vocab([PAD, UNK, "great", "head"], lower=True)
    batches = [["Great", "nope", "HEAD"], ["nope", "Great", "great"], [f"w{i}" for i in range(7)] + ["Head"]]
    expected = [[lower.stoi.get(t.lower(), 1) for t in tokens] for tokens in batches]
    assert [lower.encode(tokens) for tokens in batches] == expected
    assert {"Great", "nope", "HEAD"} <= lower._forms.keys()  # kept: seen again, looked up once
    monkeypatch.setattr(vocab_module, "FORMS_KEPT", 3)  # past it, the kept forms start over
    assert [lower.encode(tokens) for tokens in batches * 2] == expected * 2
    assert len(lower._forms) <= len(lower.stoi) + 3 + 8


def test_build_orders_by_frequency_then_word():
    vocab = Vocab.build(DOCS)
    assert vocab.itos == [PAD, UNK, "the", "beer", "is", "good", "head", "white"]
    assert len(vocab) == 8 and vocab.lower


def test_min_freq_and_max_size():
    assert Vocab.build(DOCS, min_freq=2).itos == [PAD, UNK, "the", "beer", "is"]
    assert Vocab.build(DOCS, max_size=2).itos == [PAD, UNK, "the", "beer"]
    assert Vocab.build(DOCS, max_size=0).itos == [PAD, UNK]


def test_case_sensitive_vocab():
    vocab = Vocab.build(DOCS, lower=False)
    assert vocab.itos[2:4] == ["beer", "is"] and "The" in vocab.stoi
    assert vocab.encode(["The", "THE"]) == [vocab.stoi["The"], 1]


def test_encode_lowercases_and_maps_unknown_to_1():
    vocab = Vocab.build(DOCS)
    assert vocab.encode(["THE", "Beer", "stout", PAD]) == [2, 3, 1, 0]


def test_special_tokens_in_data_are_not_duplicated():
    assert Vocab.build([[PAD, UNK, "a"]]).itos == [PAD, UNK, "a"]


def test_roundtrip_and_atomic_save(tmp_path):
    vocab = Vocab.build(DOCS, lower=False)
    path = tmp_path / "vocab.json"
    vocab.save(path)
    vocab.save(path)  # overwriting works too
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]  # no temporary file left behind
    loaded = Vocab.load(path)
    assert loaded.itos == vocab.itos and loaded.lower is False
    assert Vocab.from_dict(vocab.to_dict()).stoi == vocab.stoi


@pytest.mark.parametrize(
    "content",
    ["not json", "[1, 2]", '{"itos": ["a", "b"]}', '{"itos": ["<pad>", "<unk>", "a", "a"]}', '{"itos": "ab"}'],
)
def test_load_malformed(tmp_path, content):
    path = tmp_path / "vocab.json"
    path.write_text(content)
    with pytest.raises(UserError, match=f"^{re.escape(str(path))}: not a vocabulary file"):
        Vocab.load(path)


def test_load_missing(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        Vocab.load(tmp_path / "vocab.json")


# --- vectors --------------------------------------------------------------------------

GLOVE = "the 0.1 0.2 0.3\nbeer 1 2 3\nstout 4 5 6\n"


def expected_random(vocab: Vocab, dim: int) -> torch.Tensor:
    return torch.randn(len(vocab), dim, generator=torch.Generator().manual_seed(0)) * 0.1


@pytest.mark.parametrize(
    "name, content",
    [
        ("glove.txt", GLOVE),
        ("glove.txt.gz", GLOVE),
        ("w2v.txt", "3 3\n" + GLOVE.replace("\n", " \n")),  # word2vec: header, trailing spaces
        ("w2v.txt.gz", "3 3\n" + GLOVE),
    ],
)
def test_load_vectors_formats(tmp_path, name, content):
    vocab = Vocab.build(DOCS)
    matrix, stats = load_vectors(write(tmp_path / name, content), vocab)
    assert matrix.shape == (len(vocab), 3) and matrix.dtype == torch.float32
    assert torch.equal(matrix[vocab.stoi["the"]], torch.tensor([0.1, 0.2, 0.3]))
    assert torch.equal(matrix[vocab.stoi["beer"]], torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(matrix[0], torch.zeros(3))
    missing = [vocab.stoi[w] for w in ("is", "good", "head", "white")] + [1]
    assert torch.equal(matrix[missing], expected_random(vocab, 3)[missing])
    assert stats == {"dim": 3, "found": 2, "vocab": 6, "coverage": 2 / 6, "file_words": 3}


def test_load_vectors_is_deterministic(tmp_path):
    vocab = Vocab.build(DOCS)
    path = write(tmp_path / "glove.txt", GLOVE)
    assert torch.equal(load_vectors(path, vocab)[0], load_vectors(path, vocab)[0])


def test_exact_match_beats_lowercased_match(tmp_path):
    vocab = Vocab.build(DOCS)
    path = write(tmp_path / "vectors.txt", "Beer 9 9\nbeer 1 1\nBEER 7 7\nThe 5 5\n")
    matrix, stats = load_vectors(path, vocab)
    assert matrix[vocab.stoi["beer"]].tolist() == [1.0, 1.0]
    assert matrix[vocab.stoi["the"]].tolist() == [5.0, 5.0]
    assert stats["found"] == 2 and stats["file_words"] == 4


def test_case_sensitive_vocab_does_not_lowercase(tmp_path):
    vocab = Vocab.build(DOCS, lower=False)
    matrix, stats = load_vectors(write(tmp_path / "vectors.txt", "THE 5 5\nThe 1 1\n"), vocab)
    assert matrix[vocab.stoi["The"]].tolist() == [1.0, 1.0] and stats["found"] == 1


@pytest.mark.parametrize(
    "content, line",
    [
        ("the 0.1 0.2 0.3\nbeer 1 2\n", 2),
        ("the 0.1 0.2 0.3\nzzz 1 2 3 4\n", 2),
        ("3 3\nthe 0.1 0.2\n", 2),
        ("the 0.1 0.2 0.3\n\nbeer 1 x 3\n", 3),
        ("lonely\n", 1),
    ],
)
def test_bad_vector_lines(tmp_path, content, line):
    path = write(tmp_path / "vectors.txt.gz", content)
    with pytest.raises(UserError, match=f"^{re.escape(str(path))}:{line}: expected a word and"):
        load_vectors(path, Vocab.build(DOCS))


def test_missing_and_empty_vector_files(tmp_path):
    vocab = Vocab.build(DOCS)
    with pytest.raises(UserError, match="no such file"):
        load_vectors(tmp_path / "nope.txt", vocab)
    with pytest.raises(UserError, match="no vectors found"):
        load_vectors(write(tmp_path / "empty.txt", "3 50\n"), vocab)


def test_vocab_json_is_plain(tmp_path):
    path = tmp_path / "vocab.json"
    Vocab.build(DOCS).save(path)
    assert json.loads(path.read_text()) == {"itos": Vocab.build(DOCS).itos, "lower": True}
