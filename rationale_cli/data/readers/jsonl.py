"""The native JSON-lines format, one document a line.

```
{"id": "r1", "text": "Great head, weak body.", "score": 0.8, "rationale": [[0, 2]]}
{"id": "r2", "tokens": ["great", "head"], "label": "POS"}
```

``text`` is tokenized (offsets kept, so highlights map back onto it); ``tokens``
is taken as given and wins when both are present. ``score`` (a number in
[0, 1]) makes a regression label (float), ``label`` a class name (str); neither
leaves the label unknown. ``rationale`` holds token spans, end exclusive.
``id`` defaults to the line number. Blank lines are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from rationale_cli.data.readers.common import check_score, check_spans, check_tokens, iter_lines, parse_json_object
from rationale_cli.data.records import Record
from rationale_cli.data.tokenize import tokenize
from rationale_cli.runtime.errors import UserError, where


def record_from_object(obj: dict, default_id: str, at: str, id_field: str = "id") -> Record:
    """One record from one parsed JSON object."""
    text = offsets = None
    if "tokens" in obj:
        tokens = check_tokens(obj["tokens"], at)
    elif isinstance(obj.get("text"), str):
        text = obj["text"]
        tokens, offsets = tokenize(text)
        if not tokens:
            raise UserError(f"{at}: empty document, expected some text")
    else:
        raise UserError(f"{at}: expected 'text' (a string) or 'tokens' (a list of strings)")

    if "score" in obj and "label" in obj:
        raise UserError(f"{at}: expected 'score' (regression) or 'label' (classification), not both")
    if "score" in obj:
        label = check_score(obj["score"], at)
    elif obj.get("label") is None:
        label = None
    elif isinstance(obj["label"], (str, int, float)):
        label = str(obj["label"])
    else:
        raise UserError(f"{at}: expected 'label' to be a string or a number (a class name)")

    rationale = obj.get("rationale")
    return Record(
        id=str(obj[id_field]) if obj.get(id_field) is not None else default_id,
        tokens=tokens,
        label=label,
        rationale=None if rationale is None else check_spans(rationale, len(tokens), at),
        text=text,
        offsets=offsets,
        source=at,
    )


def iter_jsonl(path: str | Path, id_field: str = "id") -> Iterator[Record]:
    """Documents of a native JSON-lines file; ids from ``id_field`` (else the line number)."""
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        at = where(path, line_no)
        yield record_from_object(parse_json_object(line, at), str(line_no), at, id_field)
