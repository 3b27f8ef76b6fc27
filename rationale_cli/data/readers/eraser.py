"""ERASER datasets (DeYoung et al., 2020), read in their own directory layout.

A dataset directory holds ``train.jsonl``, ``val.jsonl``, ``test.jsonl`` and the
documents: ``docs/<docid>`` files, or one ``docs.jsonl`` of ``{"docid", "document"}``
lines. Documents are pre-tokenized text, one sentence a line, tokens joined by single
spaces; token indices count tokens over the whole document exactly as ERASER's own
code does (:func:`file_lines`, :func:`jsonl_lines`), so spans mean the same here, and the
lines are kept as the document's sentences. Each annotation line names its document
(``annotation_id``, or the ``docid`` of its evidences), its class
(``classification``), an optional ``query`` (BoolQ, FEVER, MultiRC, CoS-E) and gold
``evidences``: groups of spans with ``start_token``/``end_token`` (end exclusive).
The gold rationale is the union of all evidence spans; the spans themselves are
kept as ``evidence`` for span-level scores (empty ones too: the official movies
``test.jsonl`` has 20, and ERASER's scorer counts them). Annotations over several
documents (e-SNLI's premise and hypothesis) are refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from rationale_cli.data.readers.common import check_spans, iter_lines, merge_spans, parse_json_object
from rationale_cli.data.records import Record, Span
from rationale_cli.runtime.errors import UserError, where

SPLITS = ("train", "val", "test")


def split_file(path: str | Path, split: str | None = None) -> Path:
    """The annotation file: ``path`` itself, or ``<path>/<split>.jsonl`` for a directory."""
    path = Path(path)
    if not path.is_dir():
        return path
    split = split or "train"
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}: expected one of {', '.join(SPLITS)}")
    return path / f"{split}.jsonl"


def file_lines(text: str) -> list[list[str]]:
    """A ``docs/`` file's tokens, line by line, as ERASER counts them: its lines stripped,
    empty lines left out, each split on single spaces with empty pieces left out."""
    lines = ([token for token in line.strip().split(" ") if token] for line in text.split("\n"))
    return [line for line in lines if line]


def jsonl_lines(text: str) -> list[list[str]]:
    """A ``docs.jsonl`` document's tokens, line by line, as ERASER counts them: each line
    stripped and split on single spaces, empty pieces (and lines) kept as tokens."""
    return [line.strip().split(" ") for line in text.split("\n")]


Document = tuple[list[str], list[Span]]  # tokens, and the token span of each line (a sentence)


def joined(lines: list[list[str]]) -> Document:
    """The tokens of all ``lines`` in order, and each line's span of them."""
    tokens: list[str] = []
    spans = []
    for line in lines:
        spans.append((len(tokens), len(tokens) + len(line)))
        tokens += line
    return tokens, spans


def read_doc(doc: Path, at: str) -> Document:
    """The tokens of one ``docs/`` file, all lines together, and its lines' spans."""
    try:
        document = joined(file_lines(doc.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise UserError(f"{at}: document {doc} not found") from None
    except UnicodeDecodeError:
        raise UserError(f"{doc}: expected UTF-8 text") from None
    except OSError as err:
        raise UserError(f"{doc}: cannot read ({err.strerror or err})") from None
    if not document[0]:
        raise UserError(f"{doc}: empty document, expected at least one token")
    return document


def docs_jsonl(file: Path) -> dict[str, Document]:
    """Every document of a ``docs.jsonl``: docid -> tokens and lines' spans."""
    docs: dict[str, Document] = {}
    for line_no, line in iter_lines(file):
        if not line.strip():
            continue
        at = where(file, line_no)
        obj = parse_json_object(line, at)
        docid, text = obj.get("docid"), obj.get("document")
        if not (isinstance(docid, str) and isinstance(text, str)):
            raise UserError(f"{at}: expected a document line with 'docid' and 'document' strings")
        if not text.split():
            raise UserError(f"{at}: empty document, expected at least one token")
        docs[docid] = joined(jsonl_lines(text))
    return docs


def doc_reader(folder: Path) -> Callable[[str, str], Document]:
    """Tokens and lines' spans of a document by id: from ``docs/`` or, without it, ``docs.jsonl``."""
    if not (folder / "docs").is_dir() and (folder / "docs.jsonl").is_file():
        docs = docs_jsonl(folder / "docs.jsonl")

        def from_jsonl(docid: str, at: str) -> Document:
            if docid not in docs:
                raise UserError(f"{at}: document {docid!r} is not in {folder / 'docs.jsonl'}")
            return docs[docid]
        return from_jsonl
    return lambda docid, at: read_doc(folder / "docs" / confined(docid, at), at)


def evidence_spans(evidences, at: str) -> list[dict]:
    """The evidence dicts of all groups, checked for the keys we use."""
    flat = [ev for group in evidences for ev in (group if isinstance(group, list) else [group])]
    for ev in flat:
        if not (
            isinstance(ev, dict)
            and isinstance(ev.get("docid"), str)
            and all(isinstance(ev.get(k), int) for k in ("start_token", "end_token"))
        ):
            raise UserError(f"{at}: expected each evidence to have 'docid', 'start_token' and 'end_token'")
    return flat


def confined(docid: str, at: str) -> str:
    """A document id that names a file inside ``docs/``: no folders, no way out of it."""
    if not docid or docid in (".", "..") or "/" in docid or "\\" in docid or "\0" in docid:
        raise UserError(f"{at}: document id {docid!r} is not a file name inside docs/")
    return docid


def iter_eraser(path: str | Path, split: str | None = None) -> Iterator[Record]:
    """Documents with labels and gold rationales of one ERASER split.

    ``path`` is the dataset directory (``split`` picks the file, default
    ``train``) or one annotation file inside it (``split`` is then unused).
    """
    file = split_file(path, split)
    document = doc_reader(file.parent)
    for line_no, line in iter_lines(file):
        if not line.strip():
            continue
        at = where(file, line_no)
        obj = parse_json_object(line, at)
        annotation_id, label, evidences = obj.get("annotation_id"), obj.get("classification"), obj.get("evidences")
        if not (isinstance(annotation_id, str) and isinstance(label, str) and isinstance(evidences, list)):
            raise UserError(
                f"{at}: expected an ERASER annotation with 'annotation_id', 'classification' and 'evidences'"
            )
        flat = evidence_spans(evidences, at)
        docids = sorted({ev["docid"] for ev in flat} | set(listed_docids(obj, at)))
        if len(docids) > 1:
            raise UserError(f"{at}: an annotation over several documents ({', '.join(docids)}, as in e-SNLI) "
                            "is not supported: each annotation must read one document")
        docid = docids[0] if docids else annotation_id
        tokens, lines = document(docid, at)
        spans = [(ev["start_token"], ev["end_token"]) for ev in flat]
        nonempty = check_spans([span for span in spans if span[0] != span[1]], len(tokens), at, "evidence")
        query = obj.get("query")
        yield Record(
            id=annotation_id,
            tokens=tokens,
            label=label,
            rationale=merge_spans(nonempty),
            source=at,
            docid=docid,
            query=query.split() or None if isinstance(query, str) else None,
            evidence=[span for span in spans if 0 <= span[0] <= span[1] <= len(tokens)],
            sentences=lines,
        )


def listed_docids(obj: dict, at: str) -> list[str]:
    """The annotation's own ``docids`` list (null in most datasets)."""
    docids = obj.get("docids")
    if docids is None:
        return []
    if not (isinstance(docids, list) and all(isinstance(d, str) for d in docids)):
        raise UserError(f"{at}: expected 'docids' to be a list of document ids or null")
    return docids
