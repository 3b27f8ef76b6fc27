"""Predictions as spaCy documents: a ``DocBin`` (``predict --out X.spacy``).

One ``Doc`` per document, its text the raw text (or for pre-tokenized documents the tokens
joined by spaces) and its tokens ours; the rationale is the span group ``rationale``
(``doc.spans["rationale"]``, one span per rationale span, labelled ``rationale``), which
displaCy draws::

    from spacy import displacy
    displacy.render(doc, style="span", options={"spans_key": "rationale"})

A class prediction is ``doc.cats`` (each class's probability), a score
``doc.user_data["score"]``; ``user_data`` also holds the document's ``id``, the run
(``model_version``) and the per-token selection scores (``token_scores``). Read back as gold
(:mod:`rationale_cli.data.readers.spacy_docbin`), the file gives the model's own rationales
and predictions. The file is written whole when the output closes (a ``DocBin`` is one value).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rationale_cli.data.readers.spacy_docbin import SPANS_KEY
from rationale_cli.output.prediction import Rationale
from rationale_cli.output.writer_base import Writer
from rationale_cli.runtime.atomic import atomic_path
from rationale_cli.runtime.errors import UserError

if TYPE_CHECKING:
    from rationale_cli.runs.inference import Output


def prediction_doc(output: Output, vocab, model_version: str):
    """The ``Doc`` of one decoded document."""
    from spacy.tokens import Doc
    from spacy.util import get_words_and_spaces

    result = Rationale.of(output)
    text, offsets = output.record.text_offsets()
    words, spaces = get_words_and_spaces(output.record.tokens, text)  # whitespace between them as tokens
    doc = Doc(vocab, words=words, spaces=spaces)
    doc.spans[SPANS_KEY] = [doc.char_span(offsets[start][0], offsets[end - 1][1], label=SPANS_KEY)
                            for start, end in result.spans]
    if isinstance(result.prediction, str):
        doc.cats = dict(result.probabilities or {result.prediction: 1.0})
    else:
        doc.user_data["score"] = result.prediction
    doc.user_data.update(id=result.id, model_version=model_version, token_scores=list(result.scores))
    return doc


class DocBinWriter(Writer):
    """A ``.spacy`` file, written under a temporary name beside ``path`` and renamed on close."""

    def __init__(self, path: str | Path, resume_at: int | None, model_version: str):
        if str(path) == "-":
            raise UserError("a .spacy output needs a file name, not standard output (-)")
        if resume_at is not None:
            raise UserError(f"{path}: a .spacy output cannot be continued; start it again from the beginning")
        import spacy
        from spacy.tokens import DocBin

        self.path, self.model_version = Path(path), model_version
        self.vocab = spacy.blank("en").vocab
        self.docs = DocBin(store_user_data=True)

    def write(self, outputs: list[Output]) -> None:
        for output in outputs:
            self.docs.add(prediction_doc(output, self.vocab, self.model_version))

    def flush(self) -> int:
        """Nothing is on disk before :meth:`close`."""
        return 0

    def close(self) -> None:
        with atomic_path(self.path) as tmp:
            tmp.write_bytes(self.docs.to_bytes())

    def __exit__(self, kind, error, trace) -> None:
        if error is None:  # after an error nothing is written
            self.close()
