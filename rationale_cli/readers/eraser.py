"""ERASER datasets (DeYoung et al., 2020), read in their own directory layout.

A dataset directory holds ``train.jsonl``, ``val.jsonl``, ``test.jsonl`` and
``docs/``. Each ``docs/<docid>`` is pre-tokenized text; token indices count
whitespace tokens over the whole file. Each annotation line names its document
(``annotation_id``, or the ``docid`` of its evidences), its class
(``classification``) and gold ``evidences``: groups of spans with
``start_token``/``end_token`` (end exclusive). The gold rationale is the union
of all evidence spans. Empty spans (start == end) are skipped: the official
movies ``test.jsonl`` has 20 of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from rationale_cli.errors import UserError, where
from rationale_cli.readers.common import check_spans, iter_lines, merge_spans, parse_json_object
from rationale_cli.records import Record

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


def read_doc(doc: Path, at: str) -> list[str]:
    """The whitespace tokens of one document, all lines together."""
    try:
        tokens = doc.read_text(encoding="utf-8").split()
    except FileNotFoundError:
        raise UserError(f"{at}: document {doc} not found") from None
    except UnicodeDecodeError:
        raise UserError(f"{doc}: expected UTF-8 text") from None
    except OSError as err:
        raise UserError(f"{doc}: cannot read ({err.strerror or err})") from None
    if not tokens:
        raise UserError(f"{doc}: empty document, expected at least one token")
    return tokens


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
    docs = file.parent / "docs"
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
        docids = sorted({ev["docid"] for ev in flat})
        if len(docids) > 1:
            raise UserError(f"{at}: evidence from several documents ({', '.join(docids)}) is not supported")
        tokens = read_doc(docs / confined(docids[0] if docids else annotation_id, at), at)
        spans = [(ev["start_token"], ev["end_token"]) for ev in flat if ev["start_token"] != ev["end_token"]]
        yield Record(
            id=annotation_id,
            tokens=tokens,
            label=label,
            rationale=merge_spans(check_spans(spans, len(tokens), at, "evidence")),
            source=at,
        )
