"""Predictions as Label Studio tasks with pre-annotations (``predict --output-format label-studio``).

The output is one JSON list, a task per document, which a Label Studio project imports as it is:

```
[{"data": {"text": "Great head, weak body.", "id": "r1"},
  "predictions": [{"model_version": "runs/beer", "result": [
    {"from_name": "rationale", "to_name": "text", "type": "labels",
     "value": {"start": 0, "end": 10, "text": "Great head", "labels": ["rationale"]}},
    {"from_name": "score", "to_name": "text", "type": "number", "value": {"number": 0.81}}]}]}]
```

One ``labels`` result per rationale span, in character offsets into ``data.text`` (the raw text,
or for pre-tokenized documents the tokens joined by spaces); the prediction as a ``choices``
result (``label``; ``score`` beside it: the class's probability) or a ``number`` result
(``score``); ``model_version`` is the run. The names fit the labelling configuration in
docs/concepts/formats.md; read back as gold (:mod:`rationale_cli.data.readers.label_studio`),
the file gives the model's own rationales and predictions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rationale_cli.output.prediction import Rationale
from rationale_cli.output.writer_base import TextWriter, json_text
from rationale_cli.runtime.errors import UserError

if TYPE_CHECKING:
    from rationale_cli.runs.inference import Output

RATIONALE = "rationale"  # the from_name and the label of the rationale's spans


def task(output: Output, model_version: str) -> dict:
    """The Label Studio task of one decoded document."""
    result = Rationale.of(output)
    text, offsets = output.record.text_offsets()
    regions = []
    for start, end in result.spans:
        begin, finish = offsets[start][0], offsets[end - 1][1]
        regions.append({"from_name": RATIONALE, "to_name": "text", "type": "labels",
                        "value": {"start": begin, "end": finish, "text": text[begin:finish], "labels": [RATIONALE]}})
    prediction = {"model_version": model_version, "result": regions}
    if isinstance(result.prediction, str):
        regions.append({"from_name": "label", "to_name": "text", "type": "choices",
                        "value": {"choices": [result.prediction]}})
        if result.probabilities is not None:
            prediction["score"] = result.probabilities[result.prediction]
    else:
        regions.append({"from_name": "score", "to_name": "text", "type": "number",
                        "value": {"number": result.prediction}})
    return {"data": {"text": text, "id": result.id}, "predictions": [prediction]}


class LabelStudioWriter(TextWriter):
    """A JSON list of tasks, written as the documents come and closed at the end; it cannot
    be continued after an interruption (a list is one JSON value)."""

    def __init__(self, path: str | Path, resume_at: int | None, model_version: str):
        if resume_at is not None:
            raise UserError(f"{path}: a Label Studio output cannot be continued; start it again from the beginning")
        super().__init__(path, None)
        self.model_version = model_version
        self.written = 0
        self.handle.write("[")

    def write(self, outputs: list[Output]) -> None:
        for output in outputs:
            self.handle.write(("," if self.written else "") + "\n" + json_text(task(output, self.model_version)))
            self.written += 1

    def close(self) -> None:
        self.handle.write("\n]\n")
        super().close()
