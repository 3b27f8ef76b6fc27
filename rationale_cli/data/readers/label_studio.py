"""Label Studio's exports as gold: its JSON export and its JSON-MIN export.

The JSON export is a list of tasks, the text in ``data.text`` (``--text-col`` names another data
field), the spans in ``annotations[].result[]``:

```
[{"id": 17, "data": {"text": "Great head, weak body.", "score": 0.8},
  "annotations": [{"result": [
    {"type": "labels", "from_name": "rationale", "to_name": "text",
     "value": {"start": 0, "end": 10, "text": "Great head", "labels": ["rationale"]}},
    {"type": "number", "from_name": "score", "to_name": "text", "value": {"number": 0.8}}]}]}]
```

A task's gold is its first annotation that was not cancelled (``was_cancelled``), else its first
prediction (``predictions[].result[]``, what ``rationale predict --output-format label-studio``
writes); a task with neither has no gold. Its ``labels`` results labelled ``--rationale-label``
(default: any) are the rationale, mapped onto our tokens by their character offsets
(:mod:`rationale_cli.data.readers.char_spans`). The document label is, in this order, a
``choices`` result (its one choice, a class name), a ``number`` result (a score in [0, 1]), then
the task's ``data.score`` (a score) or ``data.label`` (``--label-col``: a class name).

The JSON-MIN export is a list of flat objects: the data fields, ``id``, and one field per control
tag: a ``Labels`` tag's is a list of ``{start, end, text, labels}``, a ``Choices`` tag's its choice.
Every field holding such a list is read for spans; the label is ``score`` or ``--label-col``
(a string, or ``{"choices": [one]}``).

The id is ``data.id`` (``--id-field``), else the task's ``id``, else its place in the list (from 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from rationale_cli.data.readers.char_spans import (
    SpanLabels,
    check_char_span,
    check_label_names,
    check_text,
    class_or_score,
    text_record,
)
from rationale_cli.data.readers.common import check_score, open_binary
from rationale_cli.data.records import Record, Span
from rationale_cli.runtime.errors import UserError


def read_json(path: str | Path):
    """The JSON document of ``path``, or one line saying why not."""
    with open_binary(path) as handle:
        raw = handle.read()
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise UserError(f"{path}: expected UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg}, column {err.colno})") from None
    except RecursionError:
        raise UserError(f"{path}: not readable JSON (nested too deeply)") from None


def is_full_task(task) -> bool:
    """A task of the JSON export: ``data`` and annotations or predictions."""
    return isinstance(task, dict) and isinstance(task.get("data"), dict) and (
        "annotations" in task or "predictions" in task)


def is_span_list(value) -> bool:
    """A JSON-MIN field of a ``Labels`` tag: a non-empty list of ``{start, end, ...}``."""
    return (isinstance(value, list) and bool(value)
            and all(isinstance(item, dict) and "start" in item and "end" in item for item in value))


def is_min_task(task) -> bool:
    """A task of the JSON-MIN export: a flat object with a span field or the annotation's fields."""
    return isinstance(task, dict) and "data" not in task and (
        any(map(is_span_list, task.values())) or "annotation_id" in task)


def looks_like_label_studio(path: Path) -> bool:
    """Whether ``path`` holds a JSON list whose first element is a task of either export (read
    only as far as that element)."""
    try:
        with open_binary(path) as handle:
            text = handle.read().decode("utf-8-sig")
        start = len(text) - len(text.lstrip())
        if not text.startswith("[", start):
            return False
        decoder = json.JSONDecoder()
        index = start + 1
        while index < len(text) and text[index].isspace():
            index += 1
        first, _ = decoder.raw_decode(text, index)
    except (UserError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return is_full_task(first) or is_min_task(first)


def iter_label_studio(path: str | Path, text_col: str = "text", label_col: str | None = "label",
                      id_field: str = "id", rationale_label: str | None = None) -> Iterator[Record]:
    """Documents of a Label Studio JSON or JSON-MIN export."""
    tasks = read_json(path)
    if not isinstance(tasks, list):
        raise UserError(f"{path}: expected a JSON list of Label Studio tasks, got {type(tasks).__name__}")
    labels = SpanLabels(path, rationale_label)
    for number, task in enumerate(tasks, 1):
        at = f"{path}: task {number}" + (f" (id {task['id']})" if isinstance(task, dict) and "id" in task else "")
        if not isinstance(task, dict):
            raise UserError(f"{at}: expected a JSON object, got {type(task).__name__}")
        read = full_task if "data" in task else min_task
        yield read(task, number, at, labels, text_col, label_col, id_field)
    labels.check()


def task_id(data: dict, task: dict, id_field: str, number: int) -> str:
    for value in (data.get(id_field), task.get("id")):
        if value is not None:
            return str(value)
    return str(number)


def gold_result(task: dict, at: str) -> tuple[str, list | None]:
    """Where the task's gold is (``annotations[i].result`` or ``predictions[i].result``) and its
    results; None: no gold."""
    for key, skip_cancelled in (("annotations", True), ("predictions", False)):
        entries = task.get(key) or []
        if not isinstance(entries, list):
            raise UserError(f"{at}, {key}: expected a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise UserError(f"{at}, {key}[{i}]: expected an object with a result list")
            if skip_cancelled and entry.get("was_cancelled"):
                continue
            result = entry.get("result")
            if not isinstance(result, list):
                raise UserError(f"{at}, {key}[{i}].result: expected a list of results")
            return f"{key}[{i}].result", result
    return "", None


def full_task(task: dict, number: int, at: str, labels: SpanLabels, text_col: str, label_col: str | None,
              id_field: str) -> Record:
    """A task of the JSON export."""
    data = task["data"]
    if not isinstance(data, dict):
        raise UserError(f"{at}, data: expected an object holding the task's fields")
    text = check_text(data.get(text_col), at, f"data.{text_col}")
    place, result = gold_result(task, at)
    spans: list[Span] | None = None if result is None else []
    label = None
    for i, item in enumerate(result or []):
        field = f"{at}, {place}[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if kind in ("labels", "choices", "number") and not isinstance(value, dict):
            raise UserError(f"{field}.value: expected an object")
        if kind == "labels":
            names = check_label_names(value.get("labels", []), f"{field}.value.labels")
            span = check_char_span(value.get("start"), value.get("end"), len(text), f"{field}.value")
            if labels.counts(names):
                spans.append(span)
        elif kind == "choices":
            label = one_choice(value.get("choices"), f"{field}.value.choices")
        elif kind == "number":
            label = check_score(value.get("number"), f"{field}.value", "number")
    if label is None:
        label = class_or_score(data, label_col, at, "data.")
    return text_record(task_id(data, task, id_field, number), text, spans, label, at, f"data.{text_col}")


def one_choice(choices, at: str) -> str:
    """The class of a ``choices`` result: its one choice."""
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], str):
        raise UserError(f"{at}: expected one choice (the document's class), got {choices!r}")
    return choices[0]


def min_task(task: dict, number: int, at: str, labels: SpanLabels, text_col: str, label_col: str | None,
             id_field: str) -> Record:
    """A task of the JSON-MIN export."""
    text = check_text(task.get(text_col), at, text_col)
    span_fields = [name for name, value in task.items() if is_span_list(value)]
    spans: list[Span] | None = [] if span_fields or "annotation_id" in task else None
    for name in span_fields:
        for i, item in enumerate(task[name]):
            field = f"{at}, {name}[{i}]"
            names = check_label_names(item.get("labels", []), f"{field}.labels")
            span = check_char_span(item.get("start"), item.get("end"), len(text), field)
            if labels.counts(names):
                spans.append(span)
    label_field = None if label_col in span_fields else label_col
    chosen = task.get(label_field) if label_field is not None else None
    label = (one_choice(chosen.get("choices"), f"{at}, {label_field}.choices") if isinstance(chosen, dict)
             else class_or_score(task, label_field, at))
    return text_record(task_id(task, task, id_field, number), text, spans, label, at, text_col)
