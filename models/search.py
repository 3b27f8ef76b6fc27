"""Search spaces: the values a hyperparameter search may try for declared options, as plain data.

Each extractor's ``Options`` class declares its space beside its options, as the class
attribute ``search_space``: a tuple of :class:`Searched` (a range of numbers) and :class:`OneOf`
(a few values), each naming one of the options the class declares (:mod:`rationale_cli.models.options`);
the training options declare theirs the same way. A search library reads them (``rationale
tune`` does, through Optuna); nothing here knows of one, nor of a command line.

A rationale's size (``budget``) is never searched: it is the user's target, not a knob to tune
on validation loss, which would always prefer longer rationales.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from rationale_cli.models.options import OptionError, Spec, shown

NOT_SEARCHABLE = ("Budget",)  # kinds of option that are targets, never searched


@dataclass(frozen=True)
class Searched:
    """Numbers from ``low`` to ``high`` (both included), spread evenly on a log scale with
    ``log`` (then ``low`` must be above 0): integers for an int option, else floats."""

    name: str
    low: float
    high: float
    log: bool = False

    def values(self) -> tuple[Any, ...]:
        """The values a check tries: both ends."""
        return (self.low, self.high)

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "log": self.log}

    def describe(self) -> str:
        return f"{shown(self.low)} to {shown(self.high)}" + (" (log scale)" if self.log else "")


@dataclass(frozen=True)
class OneOf:
    """One of a few ``choices`` (numbers, strings, true/false, or None for a nullable option)."""

    name: str
    choices: tuple[Any, ...]

    def values(self) -> tuple[Any, ...]:
        return self.choices

    def to_dict(self) -> dict[str, Any]:
        return {"choices": list(self.choices)}

    def describe(self) -> str:
        return "one of " + ", ".join("none" if c is None else shown(c) for c in self.choices)


Entry = Union[Searched, OneOf]


def checked(entry: Entry, spec: Spec) -> Entry:
    """``entry`` with its values converted to ``spec``'s type (ints to floats) and checked
    against its declaration, or an :class:`~rationale_cli.models.options.OptionError` that names the option
    and what a search of it may be."""
    if spec.kind in NOT_SEARCHABLE:
        raise OptionError(spec.name, entry.describe(), "not searched: the rationale's size is the target you "
                          "give, the same for every trial")
    if isinstance(entry, OneOf):
        if not entry.choices:
            raise OptionError(spec.name, "no choices", "one choice or more")
        return OneOf(entry.name, tuple(spec.check(choice) for choice in entry.choices))
    if spec.kind not in ("int", "float"):
        raise OptionError(spec.name, entry.describe(), f"choices, not a range ({spec.allowed()})")
    ends = (entry.low, entry.high)
    if spec.kind == "int" and not all(isinstance(end, int) and not isinstance(end, bool) for end in ends):
        raise OptionError(spec.name, entry.describe(), "a range of whole numbers")
    low, high = (spec.check(end) for end in ends)
    if not low < high:
        raise OptionError(spec.name, entry.describe(), "a range whose low end is below its high end")
    if entry.log and low <= 0:
        raise OptionError(spec.name, entry.describe(), "a low end above 0 on a log scale")
    return Searched(entry.name, low, high, entry.log)
