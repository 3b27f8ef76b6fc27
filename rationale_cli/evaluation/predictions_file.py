"""Prediction files to score: ERASER results files (written by any tool) and
``rationale predict``'s JSON lines; and the ERASER results lines ``predict`` writes.

An ERASER results line (the official ``metrics.py``'s ``--results``) holds
``annotation_id``, ``rationales`` (one entry per document: ``docid``,
``hard_rationale_predictions`` as ``{start_token, end_token}``,
``soft_rationale_predictions``, one score per token), ``classification``,
``classification_scores`` and optionally ``comprehensiveness_classification_scores``,
``sufficiency_classification_scores`` and ``thresholded_scores`` (``tokens_to_flip``,
which the official scorer reads but does not report, is not read).
Each field is checked on every line (present on all lines or on none), not guessed
from the first one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from rationale_cli.data.readers.common import iter_lines, parse_json_object
from rationale_cli.data.records import Record
from rationale_cli.metrics.eraser_scores import ScoredDocument
from rationale_cli.runtime.errors import UserError, where


def results_line(doc: ScoredDocument, docid: str) -> dict:
    """The ERASER results line of a scored document."""
    rationale = {"docid": docid,
                 "hard_rationale_predictions": [{"start_token": s, "end_token": e} for s, e in doc.spans or []]}
    if doc.soft is not None:
        rationale["soft_rationale_predictions"] = doc.soft
    line = {"annotation_id": doc.id, "rationales": [rationale], "classification": doc.prediction,
            "classification_scores": doc.class_scores}
    if doc.comprehensiveness is not None:
        line["comprehensiveness_classification_scores"] = doc.comprehensiveness
        line["sufficiency_classification_scores"] = doc.sufficiency
        line["thresholded_scores"] = doc.thresholded
    return line


def class_scores(value, at: str, name: str) -> dict[str, float]:
    if not (isinstance(value, dict) and value and all(isinstance(k, str) for k in value)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in value.values())):
        raise UserError(f"{at}: expected '{name}' to map class names to finite numbers")
    return {k: float(v) for k, v in value.items()}


def token_spans(value, at: str, name: str) -> list[tuple[int, int]]:
    if not isinstance(value, list):
        raise UserError(f"{at}: expected '{name}' to be a list of spans")
    spans = []
    for span in value:
        if isinstance(span, dict):
            span = [span.get("start_token"), span.get("end_token")]
        if not (isinstance(span, (list, tuple)) and len(span) == 2
                and all(isinstance(i, int) and not isinstance(i, bool) for i in span) and 0 <= span[0] <= span[1]):
            raise UserError(f"{at}: expected each span of '{name}' to be start <= end token indices, got {span!r}")
        spans.append((span[0], span[1]))
    return spans


def scores_list(value, at: str, name: str) -> list[float]:
    if not (isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            and math.isfinite(v) for v in value)):
        raise UserError(f"{at}: expected '{name}' to be a list of finite numbers, one per token")
    return [float(v) for v in value]


def disjoint(spans: list[tuple[int, int]], at: str, name: str) -> list[tuple[int, int]]:
    """Hard predictions may not overlap (ERASER's rule: each token is predicted once; a
    span repeated exactly, or an empty one, covers no token twice)."""
    ordered = sorted({span for span in spans if span[1] > span[0]})
    for (s1, e1), (s2, e2) in zip(ordered, ordered[1:]):
        if s2 < e1:
            raise UserError(f"{at}: spans [{s1}, {e1}) and [{s2}, {e2}) of '{name}' overlap")
    return spans


def same_classes(scores: dict[str, float], classes: dict[str, float], at: str, name: str) -> dict[str, float]:
    if set(scores) != set(classes):
        raise UserError(f"{at}: '{name}' has classes {sorted(scores)}, 'classification_scores' {sorted(classes)}")
    return scores


def from_results_line(obj: dict, at: str) -> tuple[ScoredDocument, str | None, set[str]]:
    """A scored document (its length still unknown), its docid and the optional fields it has."""
    annotation_id, rationales = obj.get("annotation_id"), obj.get("rationales")
    if not isinstance(annotation_id, str):
        raise UserError(f"{at}: expected an 'annotation_id' string")
    if not isinstance(rationales, list) or not rationales:
        raise UserError(f"{at}: no 'rationales' list: an ERASER results line needs one entry for its document")
    if len(rationales) > 1:
        raise UserError(f"{at}: rationales over {len(rationales)} documents; each line must predict for one")
    rationale = rationales[0]
    if not isinstance(rationale, dict) or not isinstance(rationale.get("docid"), str):
        raise UserError(f"{at}: expected each entry of 'rationales' to be an object with a 'docid'")
    doc = ScoredDocument(id=annotation_id, length=0)
    has = set()
    if "hard_rationale_predictions" in rationale:
        doc.spans = disjoint(token_spans(rationale["hard_rationale_predictions"], at, "hard_rationale_predictions"),
                             at, "hard_rationale_predictions")
        has.add("hard")
    if rationale.get("soft_rationale_predictions") is not None:
        doc.soft = scores_list(rationale["soft_rationale_predictions"], at, "soft_rationale_predictions")
        has.add("soft")
    if obj.get("classification") is not None:
        doc.prediction = obj["classification"]
        doc.class_scores = class_scores(obj.get("classification_scores"), at, "classification_scores")
        if not isinstance(doc.prediction, str) or doc.prediction not in doc.class_scores:
            raise UserError(f"{at}: 'classification' must be one of the classes of 'classification_scores'")
        has.add("classification")
    faithfulness = {"comprehensiveness_classification_scores", "sufficiency_classification_scores",
                    "thresholded_scores"} & {k for k, v in obj.items() if v is not None}
    if faithfulness and "classification" not in has:
        raise UserError(f"{at}: faithfulness scores need a 'classification' and its 'classification_scores'")
    for field, attr in (("comprehensiveness_classification_scores", "comprehensiveness"),
                        ("sufficiency_classification_scores", "sufficiency")):
        if field in faithfulness:
            setattr(doc, attr, same_classes(class_scores(obj[field], at, field), doc.class_scores, at, field))
            has.add(field)
    if "thresholded_scores" in faithfulness:
        doc.thresholded = thresholded(obj["thresholded_scores"], doc.class_scores, at)
        has.add("thresholded_scores")
    return doc, rationale["docid"], has


def thresholded(value, classes: dict[str, float], at: str) -> list[dict]:
    """The AOPC rows, sorted by threshold, each threshold once, each with every class."""
    if not isinstance(value, list) or not value:
        raise UserError(f"{at}: expected 'thresholded_scores' to be a list of AOPC bins")
    rows = []
    for row in value:
        if not (isinstance(row, dict) and isinstance(row.get("threshold"), (int, float))
                and not isinstance(row["threshold"], bool)):
            raise UserError(f"{at}: expected each of 'thresholded_scores' to have a 'threshold'")
        rows.append({"threshold": float(row["threshold"]), **{
            key: same_classes(class_scores(row.get(key), at, f"thresholded_scores {key}"), classes, at,
                              f"thresholded_scores {key}")
            for key in ("comprehensiveness_classification_scores", "sufficiency_classification_scores")}})
    thresholds = [row["threshold"] for row in rows]
    if len(set(thresholds)) != len(thresholds):
        raise UserError(f"{at}: a threshold twice in 'thresholded_scores'")
    return sorted(rows, key=lambda row: row["threshold"])


def from_prediction_line(obj: dict, at: str) -> tuple[ScoredDocument, None, set[str]]:
    """A scored document from a ``rationale predict`` line."""
    doc_id = obj.get("id")
    if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
        raise UserError(f"{at}: expected an 'id'")
    doc = ScoredDocument(id=str(doc_id), length=0, spans=token_spans(obj.get("rationale"), at, "rationale"))
    has = {"hard"}
    if obj.get("token_scores") is not None:
        doc.soft = scores_list(obj["token_scores"], at, "token_scores")
        has.add("soft")
    prediction = obj.get("prediction")
    if obj.get("probabilities") is not None:
        doc.class_scores = class_scores(obj["probabilities"], at, "probabilities")
        if prediction not in doc.class_scores:
            raise UserError(f"{at}: 'prediction' must be one of the classes of 'probabilities'")
        doc.prediction = prediction
        has.add("classification")
    elif isinstance(prediction, (int, float)) and not isinstance(prediction, bool):
        if not math.isfinite(prediction):
            raise UserError(f"{at}: 'prediction' is {prediction}; expected a finite number")
        doc.prediction = float(prediction)
        has.add("score")
    elif prediction is not None:
        raise UserError(f"{at}: a class 'prediction' needs its 'probabilities' (as `rationale predict` writes them)")
    return doc, None, has


# what each optional part of a line is called in the file, for error messages
FIELD_NAMES = {"eraser": {"hard": "hard_rationale_predictions", "soft": "soft_rationale_predictions",
                          "classification": "classification"},
               "predict": {"hard": "rationale", "soft": "token_scores", "classification": "probabilities",
                           "score": "a score 'prediction'"}}


def read_predictions(path: str | Path) -> list[tuple[ScoredDocument, str | None, str]]:
    """Every line of a predictions file as (document, docid or None, where); one kind of
    line throughout, each optional field on all lines or on none, ids unique."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    out, kinds, fields, seen, thresholds = [], set(), None, {}, None
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        at = where(path, line_no)
        obj = parse_json_object(line, at)
        kind = "eraser" if "annotation_id" in obj else "predict"
        kinds.add(kind)
        if len(kinds) > 1:
            raise UserError(f"{at}: mixes ERASER results lines and `rationale predict` lines")
        doc, docid, has = (from_results_line if kind == "eraser" else from_prediction_line)(obj, at)
        if fields is not None and has != fields:
            odd = sorted(has ^ fields)[0]
            name = FIELD_NAMES[kind].get(odd, odd)
            state = "lacks" if odd in fields else "has"
            raise UserError(f"{at}: {state} {name}, unlike the lines before it; a field must be on every line or "
                            "on none")
        fields = has
        bins = [row["threshold"] for row in doc.thresholded or []]
        if thresholds is not None and bins != thresholds:
            raise UserError(f"{at}: AOPC thresholds {bins} differ from the lines before ({thresholds})")
        thresholds = bins
        if doc.id in seen:
            raise UserError(f"{at}: id {doc.id!r} again (first at {seen[doc.id]})")
        seen[doc.id] = at
        out.append((doc, docid, at))
    if not out:
        raise UserError(f"{path}: no predictions found")
    return out


def paired(predictions: Sequence[tuple[ScoredDocument, str | None, str]], gold: Sequence[Record],
           source: str) -> list[ScoredDocument]:
    """The predictions in gold order, each with its gold spans, label and length; the ids
    must match one to one and every span and score must fit its document."""
    seen: set[str] = set()
    for record in gold:
        if record.id in seen:
            raise UserError(f"{record.where}: id {record.id!r} again in the gold; each document must have its own")
        seen.add(record.id)
    by_id = {doc.id: (doc, docid, at) for doc, docid, at in predictions}
    missing = [r.id for r in gold if r.id not in by_id]
    gold_ids = {r.id for r in gold}
    extra = [doc.id for doc, _, _ in predictions if doc.id not in gold_ids]
    if missing or extra:
        detail = [f"{len(missing)} gold document(s) without a prediction (first: {missing[0]!r})"] if missing else []
        detail += [f"{len(extra)} prediction(s) for ids not in the gold (first: {extra[0]!r})"] if extra else []
        raise UserError(f"{source}: the prediction ids do not match the gold documents: {'; '.join(detail)}")
    docs = []
    for record in gold:
        doc, docid, at = by_id[record.id]
        if docid is not None and record.docid is not None and docid != record.docid:
            raise UserError(f"{at}: docid {docid!r}, but the gold annotation reads {record.docid!r}")
        n = len(record.tokens)
        for start, end in doc.spans or []:
            if end > n:
                raise UserError(f"{at}: span [{start}, {end}) goes past the end of document {record.id!r} "
                                f"({n} tokens)")
        if doc.soft is not None and len(doc.soft) != n:
            raise UserError(f"{at}: {len(doc.soft)} token scores for document {record.id!r} of {n} tokens")
        doc.length, doc.gold, doc.label = n, record.gold_spans(), record.label
        docs.append(doc)
    return docs
