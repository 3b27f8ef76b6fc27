"""`rationale vectors`: domain word vectors from unlabeled text (needs the vectors extra)."""

import gzip

import pytest
from typer.testing import CliRunner

from rationale_cli.cli import app
from rationale_cli.data.vectors import load_vectors
from rationale_cli.data.vocab import Vocab
from tests.helpers import write

pytest.importorskip("gensim", reason='rationale vectors needs gensim: pip install "rationale-cli[vectors]"')

CORPUS = "\n".join([
    "the beer pours a dark amber with a thick head",
    "the aroma is sweet malt and caramel",
    "the beer pours a golden color with a thin head",
    "a thick creamy head and dark color",
    "the beer pours a dark amber with a thick head",  # a repeat: counted once
]) + "\n"


def invoke(*args):
    return CliRunner().invoke(app, ["vectors", *map(str, args)])


def test_vectors_are_deterministic_and_load_as_embeddings(tmp_path):
    corpus = write(tmp_path / "corpus.txt", CORPUS)
    first, second = tmp_path / "a.txt.gz", tmp_path / "b.txt.gz"
    for out in (first, second):
        result = invoke(corpus, "--out", out, "--dim", 6, "--min-count", 2, "--epochs", 2)
        assert result.exit_code == 0, result.output
    assert "4 distinct documents" in result.output
    text = gzip.open(first, "rt").read()
    assert text == gzip.open(second, "rt").read()  # same seed, one worker: the same vectors
    lines = text.splitlines()
    words = [line.split()[0] for line in lines[1:]]
    assert lines[0] == f"{len(words)} 6" and {"the", "beer", "head", "thick"} <= set(words)
    assert "caramel" not in words  # seen once, under --min-count 2
    vocab = Vocab.build([["the", "beer", "caramel"]])
    vectors, stats = load_vectors(first, vocab)
    assert vectors.shape == (len(vocab.itos), 6) and stats["found"] == 2


def test_vectors_refuse_an_existing_output_and_an_empty_vocabulary(tmp_path):
    corpus = write(tmp_path / "corpus.txt", CORPUS)
    out = write(tmp_path / "mine.txt", "keep me\n")
    result = invoke(corpus, "--out", out)
    assert result.exit_code == 2 and "--force" in result.output and out.read_text() == "keep me\n"
    result = invoke(corpus, "--out", tmp_path / "v.txt", "--min-count", 100)
    assert result.exit_code == 2 and "--min-count 100" in result.output
    assert not (tmp_path / "v.txt").exists()
