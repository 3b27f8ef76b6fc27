"""BeerAdvocate multi-aspect reviews in the format of Lei et al. (2016).

Review files (``reviews.aspectN.{train,heldout}.txt[.gz]``, ``reviews.260k...``):
one review a line, ``s0 s1 s2 s3 s4<TAB>token token ...``: five scores in
[0, 1] (appearance, aroma, palate, taste, overall), then the lower-cased,
pre-tokenized review. The label is the score of one aspect.

Gold rationales (``annotations.json``): JSON lines with ``x`` (tokens), ``y``
(five scores), ``"0"`` ... ``"4"`` (token spans ``[start, end]``, end exclusive,
per aspect) and ``rid`` (review id).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from rationale_cli.data.readers.common import check_score, check_spans, check_tokens, iter_lines, parse_json_object
from rationale_cli.data.records import Record
from rationale_cli.runtime.errors import UserError, where

ASPECTS = ("appearance", "aroma", "palate", "taste", "overall")
FILE_ASPECT = re.compile(r"reviews\.aspect(\d+)")


def check_aspect(aspect) -> int:
    """An aspect index 0-4."""
    if isinstance(aspect, bool) or not isinstance(aspect, int) or not 0 <= aspect < len(ASPECTS):
        names = ", ".join(f"{i} {name}" for i, name in enumerate(ASPECTS))
        raise UserError(f"unknown aspect {aspect}: expected 0-4 ({names})")
    return aspect


def file_aspect(path: str | Path) -> int | None:
    """N of a review file named ``reviews.aspectN...``, else None."""
    match = FILE_ASPECT.match(Path(path).name)
    return int(match.group(1)) if match else None


def iter_beer(path: str | Path, aspect: int | None = None) -> Iterator[Record]:
    """Reviews of a Lei et al. review file; ``aspect`` defaults to N of ``reviews.aspectN``."""
    if aspect is None:
        aspect = file_aspect(path)
        if aspect is None:
            raise UserError(f"{path}: the file name does not name an aspect (reviews.aspectN...); give --aspect 0-4")
    aspect = check_aspect(aspect)
    for line_no, line in iter_lines(path):
        at = where(path, line_no)
        head, tab, body = line.partition("\t")
        scores = head.split()
        if not tab or len(scores) != len(ASPECTS):
            raise UserError(f"{at}: expected 5 scores, a tab, then the tokens (got {len(scores)} scores)")
        label = check_score(scores[aspect], at, f"the {ASPECTS[aspect]} score")
        yield Record(id=str(line_no), tokens=check_tokens(body.split(), at), label=label, source=at)


def iter_beer_annotations(path: str | Path, aspect: int | None = None) -> Iterator[Record]:
    """Reviews with gold rationales for one aspect (``annotations.json``)."""
    if aspect is None:
        raise UserError(f"{path}: beer annotations hold all five aspects; give --aspect 0-4")
    aspect = check_aspect(aspect)
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        at = where(path, line_no)
        obj = parse_json_object(line, at)
        tokens = check_tokens(obj.get("x"), at, "x")
        scores = obj.get("y")
        if not isinstance(scores, list) or len(scores) != len(ASPECTS):
            raise UserError(f"{at}: expected 'y' to be a list of 5 scores")
        yield Record(
            id=str(obj["rid"]) if "rid" in obj else str(line_no),
            tokens=tokens,
            label=check_score(scores[aspect], at, f"the {ASPECTS[aspect]} score"),
            source=at,
            rationale=check_spans(obj.get(str(aspect), []), len(tokens), at, f"'{aspect}'"),
        )
