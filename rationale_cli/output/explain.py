"""``rationale explain`` as a library call: the documents to explain (one text, or the first
few of an input), decoded by a loaded run; the caller shows them (:func:`render.print_documents`)
and writes the page (:func:`render.render_html`)."""

from __future__ import annotations

from itertools import islice
from pathlib import Path
from typing import Iterator

from rationale_cli.data import sources
from rationale_cli.data.records import Record
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.runs.inference import Output, run_model
from rationale_cli.runtime.errors import UserError


def check_request(text: str | None, input: str | None) -> None:
    """One text or one input, not both and not neither; a TEXT that names a file or folder is
    refused, where it would be explained as the words of its path."""
    if text is None and input is None:
        raise UserError("nothing to explain: give a TEXT or --input FILE")
    if text is not None and input is not None:
        raise UserError("give a TEXT to explain or --input FILE, not both")
    if text is not None and names_a_path(text):
        kind = "folder" if Path(text).is_dir() else "file"
        raise UserError(f"{text} is a {kind}: explain its documents with --input {text} (a TEXT is explained as written)")


def names_a_path(text: str) -> bool:
    """Whether ``text`` is the path of an existing file or folder (a long text or one with a NUL
    byte is not)."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


def text_record(text: str) -> Record:
    """``text`` tokenized as a document of its own (id ``text``), its offsets kept for highlighting."""
    from rationale_cli.data.tokenize import tokenize

    tokens, offsets = tokenize(text)
    if not tokens:
        raise UserError("the text to explain is empty")
    return Record(id="text", tokens=tokens, text=text, offsets=offsets)


def explain_documents(loaded, device, *, text: str | None = None, input: str | None = None, format: str = "auto",
                      aspect: int | None = None, id_field: str | None = None, limit: int = 5,
                      decoding: Decoding = OWN) -> tuple[list[Output], bool]:
    """The loaded run's (``model``, ``vocab``, ``task``, ``config``) outputs on ``text``, or on the
    first ``limit`` documents of ``input`` (all for 0; ids from ``id_field``, by default the
    run's), and whether ``input`` has more."""
    check_request(text, input)
    if text is not None:
        records: Iterator[Record] = iter([text_record(text)])
    else:
        records = sources.run_documents(input, loaded.config, fmt=format, aspect=aspect, id_field=id_field,
                                        labelled=False)
        if limit > 0:
            records = islice(records, limit + 1)
    results = list(run_model(loaded.model, loaded.vocab, loaded.task, records, device=device, decoding=decoding))
    more = text is None and limit > 0 and len(results) > limit
    return (results[:limit] if more else results), more
