"""Declared options: each is written once, with its type, default, range and help.

An extractor declares its options as a frozen dataclass of :func:`option` fields
(a subclass of :class:`Options`); the training options are declared the same way.
Everything else reads the declarations: the TOML keys, the configuration saved in a
run, the one validation path (:meth:`Spec.check`), whose errors name the option and
what is allowed, and whatever shows options to people (how a command line spells
and groups them is its own business, not part of a declaration). A text that names
another option (a help, a role, an extractor's summary, what an error allows) names
it by its declared name as a placeholder, ``{budget}``, which :func:`spelled` writes
out as its reader spells options. Texts are for people only: what code decides from a
declaration it reads from a typed field (``kind``, ``requires``, a budget's ``use``), never
from a help or a role.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from rationale_cli.models.budget import ALLOWED as BUDGET_ALLOWED
from rationale_cli.models.budget import Budget, BudgetUse

KINDS = ("bool", "int", "float", "str", "Budget")


class OptionError(ValueError):
    """An option's value is not allowed: ``name``, the value, what is allowed and, once
    known, the extractor whose option it is. ``unknown``: the extractor has no such option
    (``known``: the ones it has); ``needs``: the boolean option without which it means nothing.

    ``str()`` names options as they are declared; :meth:`describe` spells them as a caller
    shows them (a command line, as its flags). ``allowed`` may name options as placeholders
    (:func:`spelled`)."""

    def __init__(self, name: str, value: Any, allowed: str, *, extractor: str | None = None,
                 unknown: bool = False, needs: str | None = None, known: tuple[str, ...] = ()):
        self.name, self.value, self.allowed, self.extractor = name, value, allowed, extractor
        self.unknown, self.needs, self.known = unknown, needs, tuple(known)
        super().__init__(self.describe())

    def describe(self, spell: Callable[[str], str] = str) -> str:
        """The error in one line, each option name written as ``spell`` writes it."""
        who = f"{spell('extractor')} {self.extractor}" if self.extractor else "this extractor"
        if self.unknown:
            own = ", ".join(map(spell, self.known)) or "none"
            return f"{spell(self.name)} does not apply to {who}; its options: {own}"
        if self.needs:
            return f"{spell(self.name)} {shown(self.value)}: applies to {who} only with {spell(self.needs)}"
        expects = f"{who} expects" if self.extractor else "expected"
        return f"{spell(self.name)} {shown(self.value)}: {expects} {spelled(self.allowed, spell)}"

    def of(self, extractor: str) -> OptionError:
        """The same error, naming the extractor."""
        return OptionError(self.name, self.value, self.allowed, extractor=extractor, unknown=self.unknown,
                           needs=self.needs, known=self.known)


class _Spelling(dict):
    def __init__(self, spell: Callable[[str], str]):
        super().__init__()
        self.spell = spell

    def __missing__(self, name: str) -> str:
        return self.spell(name)


def spelled(text: str, spell: Callable[[str], str] = str) -> str:
    """``text`` with each option it names as a placeholder (``{budget}``) written as ``spell``
    writes option names: plain (``budget``) by default; a command line gives its flags."""
    return text.format_map(_Spelling(spell))


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def option(default: Any, help: str, *, low: float | None = None, high: float | None = None,
           above: float | None = None, choices: tuple[str, ...] | dict | None = None,
           default_text: str | None = None, role: str | None = None, requires: str | None = None,
           use: BudgetUse | None = None) -> Any:
    """A declared field. ``low``/``high``: inclusive bounds, ``above``: exclusive lower bound;
    ``default_text``: how a default that depends on other options is described; ``role``:
    what a budget is for this extractor, in words (documentation only); ``use``: the same,
    typed, for code (a budget's only); ``requires``: a boolean option without which this
    one means nothing."""
    meta = dict(help=help, low=low, high=high, above=above, choices=tuple(choices) if choices else None,
                default_text=default_text, role=role, requires=requires, use=use)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Spec:
    """One declared option, read off a dataclass field."""

    name: str
    kind: str
    nullable: bool
    default: Any
    help: str
    low: float | None = None
    high: float | None = None
    above: float | None = None
    choices: tuple[str, ...] | None = None
    default_text: str | None = None
    role: str | None = None
    requires: str | None = None
    use: BudgetUse | None = None

    def allowed(self) -> str:
        """What a value may be, in words."""
        if self.kind == "Budget":
            text = BUDGET_ALLOWED
        elif self.choices:
            text = "one of " + ", ".join(self.choices)
        elif self.kind in ("int", "float"):
            word = "an integer" if self.kind == "int" else "a number"
            bounds = [f"> {self.above:g}" if self.above is not None else None,
                      f">= {self.low:g}" if self.low is not None else None,
                      f"<= {self.high:g}" if self.high is not None else None]
            bounds = [b for b in bounds if b]
            text = f"{word} {' and '.join(bounds)}" if bounds else word
        else:
            text = {"bool": "true or false", "str": "a string"}[self.kind]
        return text + (" (or nothing)" if self.nullable and self.kind != "bool" else "")

    def default_shown(self) -> str:
        if self.default_text is not None:
            return self.default_text
        if self.default is None:
            return "none"
        return shown(self.default)

    def check(self, value: Any, ranges: bool = True) -> Any:
        """``value`` converted to the declared type (ints to floats, budgets parsed) and,
        with ``ranges``, checked against the range, or an :class:`OptionError`."""
        if value is None:
            if self.nullable:
                return None
            raise OptionError(self.name, "(nothing)", self.allowed())
        try:
            value = self.convert(value)
        except (TypeError, ValueError):
            raise OptionError(self.name, value, self.allowed()) from None
        if ranges and self.kind in ("int", "float") and not self.in_range(value):
            raise OptionError(self.name, value, self.allowed())
        if self.choices and value not in self.choices:
            raise OptionError(self.name, value, self.allowed())
        return value

    def convert(self, value: Any) -> Any:
        if self.kind == "Budget":
            return Budget.parse(value)
        if isinstance(value, bool) != (self.kind == "bool"):
            raise TypeError(value)
        if self.kind == "float" and isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, {"bool": bool, "int": int, "str": str}.get(self.kind, ())):
            return value
        raise TypeError(value)

    def in_range(self, value: float) -> bool:
        return ((self.low is None or value >= self.low) and (self.high is None or value <= self.high)
                and (self.above is None or value > self.above))


@functools.cache
def specs(declared: type) -> dict[str, Spec]:
    """The options declared by a dataclass, by name in declaration order (read once per class)."""
    out = {}
    for f in dataclasses.fields(declared):
        if "help" not in f.metadata:
            continue
        kind = str(f.type).replace(" | None", "")
        if kind not in KINDS:
            raise TypeError(f"{declared.__name__}.{f.name}: undeclarable type {f.type}")
        if f.metadata.get("use") is not None and kind != "Budget":
            raise TypeError(f"{declared.__name__}.{f.name}: use= declares what a budget is for; this is a {kind}")
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        out[f.name] = Spec(f.name, kind, "None" in str(f.type), default, **f.metadata)
    return out


@dataclass(frozen=True)
class Options:
    """Base of every extractor's options: values are checked when the object is made, once;
    whatever takes the object (a selector, :func:`rationale_cli.models.selectors.build_selector`)
    keeps it as it is. ``search_space``: what a hyperparameter search tries for some of them
    (:mod:`rationale_cli.models.search`; none by default)."""

    search_space: ClassVar[tuple] = ()

    def __post_init__(self) -> None:
        for spec in specs(type(self)).values():
            object.__setattr__(self, spec.name, spec.check(getattr(self, spec.name)))
        self.check()

    def check(self) -> None:
        """Rules between options; an :class:`OptionError` when one is broken."""

    @classmethod
    def create(cls, values: dict[str, Any], given: set[str] | frozenset[str] = frozenset()) -> Options:
        """The options from ``values`` (defaults for the rest). ``given``: the names a user
        gave explicitly, refused where an option they need is off (``requires``)."""
        declared = specs(cls)
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise OptionError(unknown[0], values[unknown[0]], "", unknown=True, known=tuple(declared))
        made = cls(**values)
        for name in sorted(given & set(declared)):
            needed = declared[name].requires
            if needed is not None and not getattr(made, needed):
                raise OptionError(name, values[name], "", needs=needed)
        return made

    def held_budget(self, any_use: bool = False) -> Budget | None:
        """The budget these options hold as a selection rate in training: the one declared
        ``use=BudgetUse.HELD``, while its ``requires`` option is on; else None. With ``any_use``,
        the budget that sizes the rationale in any way (held, exact, a cap, the test-time size)."""
        for spec in specs(type(self)).values():
            if (spec.use is BudgetUse.HELD or (any_use and spec.use is not None)) and \
                    (spec.requires is None or getattr(self, spec.requires)):
                return getattr(self, spec.name)
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (a budget as a share or a count)."""
        return {name: to_json(getattr(self, name)) for name in specs(type(self))}


def to_json(value: Any) -> Any:
    return value.to_json() if isinstance(value, Budget) else value


@dataclass(frozen=True)
class NoOptions(Options):
    """An extractor without options."""
