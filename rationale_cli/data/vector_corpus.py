"""``rationale vectors`` as library calls: the output checked before any work, the corpus read
(any input format, several files as one corpus, repeated documents once), then
:func:`rationale_cli.data.word2vec.train_vectors` and ``write_vectors``."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rationale_cli.data import sources
from rationale_cli.data.word2vec import distinct_texts, import_gensim
from rationale_cli.runtime.atomic import writable_target
from rationale_cli.runtime.errors import UserError


def check_vectors_output(out: Path, force: bool = False) -> None:
    """gensim importable and ``out`` a file that can be written (replaced only with ``force``)."""
    import_gensim()
    if str(out) == "-":
        raise UserError("--out -: word vectors go to a file, not to standard output")
    writable_target(out)
    if out.exists() and not force:
        raise UserError(f"{out}: exists; use --force to replace it")


def corpus_texts(corpus: Sequence[str], *, format: str = "auto", text_col: str = "text") -> list[list[str]]:
    """The distinct documents of the files ``corpus`` (labels not read), as token lists."""
    return distinct_texts(record for path in corpus
                          for record in sources.stream(path, "train", fmt=format, text_col=text_col, label_col=None))
