"""What ``rationale evaluate`` and ``rationale score`` report: the toolkit's own
scores (task metric, token precision/recall/F1, chance levels), ERASER's (the layout
of its official score file, under ``eraser``) and, for a model, the faithfulness of
its rationales; one row of scores per document; what the scores were measured on; and
where they are written (JSON, JSON lines, or standard output)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from rationale_cli.data import sources
from rationale_cli.data.readers import detect_format
from rationale_cli.data.readers.beer import file_aspect
from rationale_cli.data.readers.char_spans import widened_count
from rationale_cli.data.records import Record, spans_to_mask
from rationale_cli.evaluation.faithfulness import faithfulness_summary, scored_documents
from rationale_cli.evaluation.predictions_file import paired, read_predictions
from rationale_cli.metrics.eraser_scores import ScoredDocument, drop, eraser_scores, iou_scores
from rationale_cli.metrics.scores import ClassificationScores, RationaleScores, RegressionScores, document_scores
from rationale_cli.models.decoding import OWN, Decoding
from rationale_cli.runs.inference import evaluate as model_metrics
from rationale_cli.runs.reference import main_metric
from rationale_cli.runtime.atomic import write_text_atomic
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.outputs import new_output
from rationale_cli.runtime.progress import Progress, counted, no_progress
from rationale_cli.runtime.safe_json import to_json_line


def masks(doc: ScoredDocument) -> tuple[list[int], list[int] | None]:
    """The document's selection and gold (None without gold) as 0/1 per token."""
    gold = None if doc.gold is None else spans_to_mask(doc.gold, doc.length)
    return spans_to_mask(doc.spans or [], doc.length), gold


def document_row(doc: ScoredDocument, extra: dict | None = None) -> dict:
    """One document's scores: its token P/R/F1 (``rationale_cli.metrics.scores`` conventions),
    IOU-F1 at 0.5, prediction and gold label, and the faithfulness drops it has."""
    own = document_scores(*masks(doc))
    row = {"id": doc.id, "label": doc.label, "prediction": doc.prediction, **own}
    if doc.gold is not None:
        row["iou_f1"] = iou_scores([doc])[0]["micro"]["f1"]
    if doc.comprehensiveness is not None:
        row["comprehensiveness"] = drop(doc.class_scores, doc.comprehensiveness, doc.prediction)
        row["sufficiency"] = drop(doc.class_scores, doc.sufficiency, doc.prediction)
    for name, value in (extra or {}).items():
        row[f"predictor_on_{name}"] = drop(doc.class_scores, value, doc.prediction)
    return row


# the datasets whose reader takes an aspect (the demo corpus is beer-like)
ASPECT_FORMATS = ("demo", "beer", "beer-annotations")


def evaluate_model(loaded, records: Sequence[Record], *, batch_size: int, device, faithfulness: bool = True,
                   decoding: Decoding = OWN, progress: Progress = no_progress) -> tuple[dict, list[dict]]:
    """A trained run's (``model``, ``vocab``, ``task``) metrics on labelled documents decoded as
    ``decoding`` says (with its full-text reference's under ``full_text_reference`` where it has
    one), and the per-document rows; ``progress`` reports each pass over them."""
    unlabelled = [r for r in records if r.label is None]
    if unlabelled:
        raise UserError(f"{unlabelled[0].where}: no label ({len(unlabelled)} such document(s)); evaluate needs "
                        "a label or score per document")
    with progress(len(records), doing="decoding") as advance:
        metrics = model_metrics(loaded.model, loaded.vocab, loaded.task, counted(records, advance),
                                batch_size=batch_size, device=device, decoding=decoding)
    with progress(len(records), doing="faithfulness reruns" if faithfulness else "ERASER scores") as advance:
        pairs = list(counted(scored_documents(loaded.model, loaded.vocab, loaded.task, records,
                                              batch_size=batch_size, device=device, faithfulness=faithfulness,
                                              decoding=decoding), advance))
    docs = [doc for doc, _ in pairs]
    if decoding.rate is not None:
        metrics["test_rate"] = decoding.rate.to_json()  # the size asked for; selection_rate is the one reached
    metrics["eraser"] = eraser_scores(docs)
    metrics["faithfulness"] = faithfulness_summary(pairs)
    metrics.update(widened_count(records))
    if loaded.reference is not None:
        metrics["full_text_reference"] = loaded.reference.compared(records, loaded.task,
                                                                   metrics.get(main_metric(loaded.task)))
    return metrics, [document_row(doc, extra) for doc, extra in pairs]


def evaluated_on(run: Path, data: str, config, *, fmt: str = "auto", aspect: int | None = None,
                 split: str = "test") -> dict:
    """What evaluate scored, for its metrics: the run directory and the data (absolute paths,
    or ``demo``), the split where the data has splits and the aspect where its reader takes
    one (else None); ``config``: the run's, whose aspect is the default."""
    kind = "demo" if sources.is_demo(data) else fmt if fmt != "auto" else detect_format(data)
    return {"run": os.path.abspath(run), "data": data if kind == "demo" else os.path.abspath(data),
            "split": sources.SPLITS[split] if sources.has_own_validation(data, fmt) else None,
            "aspect": read_aspect(data, kind, config.aspect if aspect is None else aspect)}


def read_aspect(data: str, kind: str, aspect: int | None) -> int | None:
    """The aspect a reader of ``kind`` reads from ``data``: the one asked for, else its default
    (0 for the demo corpus, N of a beer file ``reviews.aspectN``); None for a reader without aspects."""
    if kind not in ASPECT_FORMATS:
        return None
    if aspect is not None:
        return aspect
    if kind == "demo":
        return 0
    return file_aspect(data)


def own_scores(docs: Sequence[ScoredDocument], hard: bool) -> dict:
    """The toolkit's task and token scores, from predictions read off a file."""
    out: dict = {}
    if all(d.prediction is not None and d.label is not None for d in docs):
        classes = isinstance(docs[0].prediction, str)
        if any(isinstance(d.label, str) != classes for d in docs):
            raise UserError("the predictions are " + ("classes" if classes else "scores") + " but the gold holds " +
                            ("scores" if classes else "class labels") + "; score them against gold of their kind")
        task = ClassificationScores(sorted({str(d.label) for d in docs})) if classes else RegressionScores()
        for d in docs:
            task.add(d.prediction, d.label)
        out.update(task.result())
    if hard:
        rationale = RationaleScores()
        for d in docs:
            rationale.add(*masks(d))
        out.update(rationale.result())
    return out


def score_file(predictions: str | Path, gold: Sequence[Record], leakage: bool = False) -> tuple[dict, list[dict]]:
    """The scores of a predictions file (ERASER results or ``rationale predict`` lines)
    against gold documents, and the per-document rows; with ``leakage``, the leakage probe
    cross-fitted on the file's masks (:func:`rationale_cli.evaluation.leakage.cross_fitted_probe`)."""
    lines = read_predictions(predictions)
    docs = paired(lines, gold, str(predictions))
    hard = all(doc.spans is not None for doc, _, _ in lines)
    metrics = {**own_scores(docs, hard), "eraser": eraser_scores(docs, hard=hard), **widened_count(gold)}
    if leakage:
        metrics.update(file_leakage(docs, hard, str(predictions)))
    return metrics, [document_row(d) for d in docs]


def file_leakage(docs: Sequence[ScoredDocument], hard: bool, source: str) -> dict:
    """The leakage probe on a file's rationale masks and the gold labels."""
    import torch

    from rationale_cli.evaluation.leakage import cross_fitted_probe

    labelled = [d for d in docs if d.label is not None]
    if not hard or not labelled:
        raise UserError(f"--leakage-probe: {source} needs rationale spans, and the gold documents labels")
    masks = [torch.tensor(spans_to_mask(d.spans, d.length), dtype=torch.float) for d in labelled]
    return cross_fitted_probe(masks, [d.label for d in labelled])


def check_score_outputs(json_out: Path | None, per_document: Path | None, force: bool = False,
                        inputs: Sequence[str | Path] = ()) -> None:
    """Refuse outputs that cannot be written, one of the command's ``inputs`` or a run's file,
    or that exist (unless ``force``), before any work (:func:`~rationale_cli.runtime.outputs.new_output`)."""
    if str(json_out) == "-" and str(per_document) == "-":
        raise UserError("--json - and --per-document -: only one of them can go to standard output")
    targets = [new_output(path, force, inputs, flag) for path, flag in ((json_out, "--json"),
                                                                        (per_document, "--per-document"))
               if path is not None]
    if len(targets) == 2 and targets[0] is not None and targets[0] == targets[1]:
        raise UserError(f"--json and --per-document: both name {per_document}; give each its own file")


def to_standard_output(json_out: Path | None, per_document: Path | None) -> bool:
    """Whether one of the outputs is standard output (which then holds data only)."""
    return "-" in (str(json_out), str(per_document))


def write_metrics(json_out: Path, metrics: dict) -> None:
    """The metrics as JSON (no NaN) at ``json_out``, or on standard output for '-'."""
    from rationale_cli.runs.run_directory import write_json

    write_json(json_out, metrics)


def write_document_scores(per_document: Path, rows: list[dict]) -> None:
    """One JSON line per document at ``per_document``, or on standard output for '-'."""
    write_text_atomic(per_document, "".join(to_json_line(row) for row in rows))
