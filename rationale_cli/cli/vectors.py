"""``rationale vectors``: word2vec vectors trained on unlabeled text (:mod:`rationale_cli.data.word2vec`)."""

from __future__ import annotations

from pathlib import Path

import typer

from rationale_cli.cli._util import FORMAT_HELP, Command, app, friendly, progress_reporter, stderr
from rationale_cli.runtime.errors import check_at_least


@app.command(cls=Command)
@friendly
def vectors(
    corpus: list[str] = typer.Argument(..., help="Unlabeled text in any input format (several files: one corpus)."),
    out: Path = typer.Option(..., "--out", "-o", help="Vectors file to write, word2vec text (.gz: compressed)."),
    format: str = typer.Option("auto", help=f"Input format: {FORMAT_HELP}."),
    text_col: str = typer.Option("text", help="CSV/TSV text column."),
    dim: int = typer.Option(200, help="Vector size."),
    window: int = typer.Option(5, help="Context words on each side."),
    min_count: int = typer.Option(2, help="Leave out words seen fewer times."),
    epochs: int = typer.Option(10, help="Passes over the corpus."),
    seed: int = typer.Option(0, help="Random seed (one worker thread: the same vectors every run)."),
    force: bool = typer.Option(False, "--force", metavar="", help="Replace an existing --out."),
):
    """Train domain word vectors (word2vec skip-gram) on unlabeled text, for `train --embeddings`.

    Needs gensim: pip install "rationale-cli\\[vectors]". Repeated documents count once.
    """
    from rationale_cli.data.word2vec import (
        VectorOptions,
        check_vectors_output,
        corpus_texts,
        train_vectors,
        write_vectors,
    )

    for flag, value in (("--dim", dim), ("--window", window), ("--min-count", min_count), ("--epochs", epochs)):
        check_at_least(flag, value, 1)
    check_vectors_output(out, force, corpus)
    texts = corpus_texts(corpus, format=format, text_col=text_col)
    stderr().print(f"{len(texts):,} distinct documents, {sum(map(len, texts)):,} tokens", highlight=False)
    with progress_reporter(stderr(), epochs, doing="training word vectors", unit="epochs") as advance:
        trained = train_vectors(texts, VectorOptions(dim, window, min_count, epochs, seed=seed),
                                on_epoch=lambda _: advance(1))
    write_vectors(trained, out)
    stderr().print(f"wrote {len(trained):,} words x {dim} to {out}", highlight=False)
