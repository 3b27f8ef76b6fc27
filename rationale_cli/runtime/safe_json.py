"""JSON that never holds NaN: non-finite floats become null, so every file the toolkit
writes is valid JSON for strict readers."""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, infinity) as None, so JSON stays valid."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def to_json_line(data: dict) -> str:
    try:  # the common case, at full speed: every number finite
        return json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        return json.dumps(finite(data), ensure_ascii=False, allow_nan=False) + "\n"
