"""Domain word vectors from unlabeled text (``rationale vectors``): word2vec skip-gram
with negative sampling (Mikolov et al., 2013), as the beer papers used (Lei et al., 2016;
Bastings et al., 2019, appendix B: 200-d vectors trained on the beer reviews), through
gensim (the optional ``vectors`` extra).

One worker thread and a fixed seed make the vectors the same on every run. The output
is word2vec's text format (a ``COUNT DIM`` header, then one word and its numbers a
line), gzip-compressed for a ``.gz`` name, which ``rationale train --embeddings`` reads.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from rationale_cli.data import sources
from rationale_cli.data.records import Record
from rationale_cli.runtime.atomic import atomic_path
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.outputs import new_output


@dataclass
class VectorOptions:
    dim: int = 200
    window: int = 5
    min_count: int = 2
    epochs: int = 10
    negative: int = 5
    seed: int = 0


def import_gensim():
    try:
        from gensim.models import Word2Vec
    except ImportError:
        raise UserError('rationale vectors needs gensim: pip install "rationale-cli[vectors]"') from None
    return Word2Vec


def distinct_texts(records: Iterable[Record]) -> list[list[str]]:
    """Each distinct document's tokens once (corpora such as beer repeat reviews across files)."""
    seen, out = set(), []
    for record in records:
        key = "\0".join(record.tokens)
        if key not in seen:
            seen.add(key)
            out.append(record.tokens)
    return out


def train_vectors(sentences: Sequence[list[str]], options: VectorOptions,
                  on_epoch: Callable[[int], None] = lambda epoch: None):
    """Word2vec keyed vectors of ``sentences``; ``on_epoch`` is called after each epoch."""
    Word2Vec = import_gensim()
    from gensim.models.callbacks import CallbackAny2Vec

    class Progress(CallbackAny2Vec):
        def __init__(self):
            self.epoch = 0

        def on_epoch_end(self, model):
            self.epoch += 1
            on_epoch(self.epoch)

    if not sentences:
        raise UserError("no text to train word vectors on")
    model = Word2Vec(vector_size=options.dim, window=options.window, min_count=options.min_count, sg=1,
                     negative=options.negative, epochs=options.epochs, workers=1, seed=options.seed)
    model.build_vocab(sentences)
    if len(model.wv) == 0:
        raise UserError(f"no word occurs at least --min-count {options.min_count} times")
    model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs, callbacks=[Progress()])
    return model.wv


def write_vectors(vectors, path: str | Path) -> None:
    """Word2vec text format, gzip for ``.gz``; written whole or not at all."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with atomic_path(Path(path)) as tmp, opener(tmp, "wt", encoding="utf-8") as handle:
        handle.write(f"{len(vectors)} {vectors.vector_size}\n")
        for word in vectors.index_to_key:
            handle.write(word + " " + " ".join(f"{v:.5g}" for v in vectors[word]) + "\n")


def check_vectors_output(out: Path, force: bool = False, corpus: Sequence[str] = ()) -> None:
    """gensim importable and ``out`` a file that can be written, not one of the ``corpus`` files
    (replaced only with ``force``)."""
    import_gensim()
    if str(out) == "-":
        raise UserError("--out -: word vectors go to a file, not to standard output")
    new_output(out, force, corpus)


def corpus_texts(corpus: Sequence[str], *, format: str = "auto", text_col: str = "text") -> list[list[str]]:
    """The distinct documents of the files ``corpus`` (labels not read), as token lists."""
    return distinct_texts(record for path in corpus
                          for record in sources.stream(path, "train", fmt=format, text_col=text_col, label_col=None))
