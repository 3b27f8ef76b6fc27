"""spaCy's binary corpus format, a ``DocBin`` (``.spacy``), as documents with gold rationales.

Each ``Doc`` is a document whose tokens are taken as they are (whitespace tokens left out), with
their character offsets into ``doc.text``. The span group ``--spans-key`` (default
``rationale``) holds the gold rationale (a document without that group has no gold; the spans
of a group can carry a label, the group's key standing for it where they do not, and
``--rationale-label`` keeps those of one label). The label
is ``doc.cats``' best-scored class, else ``doc.user_data["score"]`` (a number in [0, 1]);
the id is ``doc.user_data["id"]``, else the document's place in the file (from 1). What
``rationale predict --out X.spacy`` writes reads back so (:mod:`rationale_cli.output.spacy_docs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from rationale_cli.data.readers.char_spans import SpanLabels, token_spans
from rationale_cli.data.readers.common import check_score
from rationale_cli.data.records import Record
from rationale_cli.runtime.errors import UserError

SPANS_KEY = "rationale"


def read_docs(path: str | Path):
    """The documents of a ``DocBin`` file (spaCy imported here), or one line saying why not."""
    import spacy
    from spacy.tokens import DocBin

    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        return list(DocBin().from_bytes(data).get_docs(spacy.blank("en").vocab))
    except Exception as err:  # msgpack and zlib raise their own kinds on a file of another format
        raise UserError(f"{path}: not a spaCy DocBin (.spacy) file ({type(err).__name__})") from None


def iter_spacy(path: str | Path, spans_key: str = SPANS_KEY, rationale_label: str | None = None) -> Iterator[Record]:
    """Documents of a ``.spacy`` file, with gold from the span group ``spans_key``."""
    labels = SpanLabels(path, rationale_label)
    for number, doc in enumerate(read_docs(path), 1):
        at = f"{path}: document {number}"
        words = [token for token in doc if not token.is_space]
        if not words:
            raise UserError(f"{at}: empty document, expected some text")
        offsets = [(token.idx, token.idx + len(token)) for token in words]
        rationale = widened = None
        if spans_key in doc.spans:
            chosen = [(span.start_char, span.end_char) for span in doc.spans[spans_key]
                      if labels.counts([span.label_ or spans_key])]
            rationale, widened = token_spans(chosen, offsets)
        doc_id = doc.user_data.get("id")
        yield Record(id=str(doc_id) if doc_id is not None else str(number), tokens=[t.text for t in words],
                     label=doc_label(doc, at), rationale=rationale, text=doc.text, offsets=offsets, source=at,
                     widened=widened)
    labels.check()


def doc_label(doc, at: str) -> float | str | None:
    """The best-scored class of ``doc.cats``, else ``user_data["score"]``, else None."""
    if doc.cats:
        return max(doc.cats, key=doc.cats.get)
    score = doc.user_data.get("score")
    return None if score is None else check_score(score, at, 'user_data["score"]')
