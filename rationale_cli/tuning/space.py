"""The search space of a study: the training options' declared space and the extractor's
(:mod:`rationale_cli.models.search`, each declared once beside its options), changed by a ``--search-space``
file, less every option the user fixed; and a trial's configuration from the values drawn.

A search-space file (TOML or JSON) maps option names (as in a ``--config`` file) to

- ``{low = 0.0001, high = 0.01, log = true}``: a range (``log`` optional), integers for an
  integer option;
- ``{choices = [50, 100]}`` or just ``[50, 100]``: one of these values;
- a single value (``dependent = true``): that option fixed for every trial, out of the search.

A name the file gives replaces the declared entry of that name; other declared entries stay.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rationale_cli.models.options import OptionError, Spec
from rationale_cli.models.search import Entry, OneOf, Searched, checked
from rationale_cli.models.selectors import option_specs, selector_class
from rationale_cli.runs.config import FROM_SUPPORT, TRAIN_SPECS, TrainConfig, from_values
from rationale_cli.runs.flags import flag_of, option_line
from rationale_cli.runtime.errors import UserError

# options that are the same for every trial of a study: the data, the extractor and the size of
# its rationales (the target), how long and how a run is trained and judged; never searched
NOT_SEARCHED = ("data", "format", "aspect", "valid", "valid_fraction", "task", "text_col", "label_col", "id_col", "query",
                "extractor", "budget", "embeddings", "epochs", "keep", "rate_tolerance", "save_epochs",
                "time_limit", "seed", "device", "patience", "supervise_fraction")
RANGE_KEYS = {"low", "high", "log"}


@dataclass(frozen=True)
class Space:
    """What a study searches (``entries``, in a fixed order), the options the search-space file
    fixes (``fixed``), the names the file set (``from_file``) and why declared entries were
    left out (``notes``)."""

    entries: tuple[Entry, ...]
    fixed: dict[str, Any]
    from_file: frozenset[str] = frozenset()
    notes: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries]

    def to_dict(self) -> dict[str, dict]:
        """The entries as JSON: ``{name: {low, high, log} | {choices}}``."""
        return {entry.name: entry.to_dict() for entry in self.entries}


def spec_of(name: str, extractor: str) -> Spec | None:
    """The declaration of option ``name`` of a study of ``extractor``, if it has one."""
    return option_specs(extractor).get(name) or TRAIN_SPECS.get(name)


def declared(extractor: str) -> tuple[Entry, ...]:
    """The declared space: the training options', then the extractor's own."""
    return (*TrainConfig.search_space, *selector_class(extractor).Options.search_space)


def read_file(path: Path) -> dict[str, Any]:
    """The top-level table of a TOML or JSON file; one error line otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: search-space file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read the search-space file ({getattr(err, 'strerror', None) or err})") \
            from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    elif path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise UserError(f"{path}: not valid TOML ({err})") from None
    else:
        raise UserError(f"{path}: expected a search-space file ending in .toml or .json")
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected an object of option names, found {type(data).__name__}")
    return {str(key).replace("-", "_"): value for key, value in data.items()}


def file_entry(path: Path, name: str, value: Any, spec: Spec) -> Entry | None:
    """The entry a file gives ``name`` (None for a fixed value), checked against its declaration."""
    if isinstance(value, dict):
        keys = set(value)
        if keys == {"choices"} and isinstance(value["choices"], list):
            entry: Entry = OneOf(name, tuple(value["choices"]))
        elif {"low", "high"} <= keys <= RANGE_KEYS and isinstance(value.get("log", False), bool):
            entry = Searched(name, value["low"], value["high"], value.get("log", False))
        else:
            raise UserError(f"{path}: {name}: expected {{low, high}} with an optional log = true|false, or "
                            f"{{choices = [...]}}, found keys {', '.join(sorted(keys)) or 'none'}")
    elif isinstance(value, list):
        entry = OneOf(name, tuple(value))
    else:
        return None
    try:
        return checked(entry, spec)
    except OptionError as err:
        raise UserError(f"{path}: {err}") from None


def search_space(extractor: str, path: Path | None = None) -> Space:
    """The declared space of a study of ``extractor``, changed as the file at ``path`` says."""
    entries = {entry.name: checked(entry, spec_of(entry.name, extractor)) for entry in declared(extractor)}
    if path is None:
        return Space(tuple(entries.values()), {})
    fixed: dict[str, Any] = {}
    given = read_file(path)
    for name, value in given.items():
        spec = spec_of(name, extractor)
        if spec is None:
            raise UserError(f"{path}: {name} is no option of extractor {extractor} nor a training option "
                            "(see `rationale train --help`)")
        if name in NOT_SEARCHED:
            raise UserError(f"{path}: {name} is the same for every trial of a study: give it as {flag_of(name)}, "
                            "not in the search space")
        entry = file_entry(path, name, value, spec)
        entries.pop(name, None)
        if entry is None:
            try:
                fixed[name] = spec.check(value)
            except OptionError as err:
                raise UserError(f"{path}: {err}") from None
        else:
            entries[name] = entry
    return Space(tuple(entries.values()), fixed, frozenset(given))


def corners(entries: tuple[Entry, ...]) -> list[dict[str, Any]]:
    """Values a check of the space tries: every entry at its first value, at its last, and each
    choice of each entry with the others at their first."""
    first = {entry.name: entry.values()[0] for entry in entries}
    tried = [first, {entry.name: entry.values()[-1] for entry in entries}]
    tried += [{**first, entry.name: choice} for entry in entries for choice in entry.values()[1:-1]]
    return tried


def configured(base: dict[str, Any], given: set[str], params: dict[str, Any]) -> TrainConfig:
    """A trial's configuration: the study's options ``base`` (``given``: those the user gave)
    with the values ``params`` drawn; an :class:`~rationale_cli.models.options.OptionError` if they clash."""
    return from_values({**base, **params}, given=given | set(params))


def without_conflicts(space: Space, base: dict[str, Any], given: set[str],
                      note: Callable[[str], None] | None = None) -> Space:
    """``space`` less the entries the user fixed, and less each declared entry that clashes with
    the fixed options (e.g. HardKuma's coherence beside a fixed ``--transitions``), with a note
    of why; a clash of an entry the file gave, or one that names no entry, is one error line."""
    entries = tuple(entry for entry in space.entries if entry.name not in given)
    notes = list(space.notes)
    while True:
        clash = first_clash(entries, base, given)
        if clash is None:
            break
        if clash.name not in {entry.name for entry in entries} or clash.name in space.from_file:
            raise UserError(f"the search space and the fixed options clash: {option_line(clash)}")
        entries = tuple(entry for entry in entries if entry.name != clash.name)
        notes.append(f"{flag_of(clash.name)} not searched: {option_line(clash)}")
    for line in notes[len(space.notes):] if note else ():
        note(line)
    return Space(entries, space.fixed, space.from_file, tuple(notes))


def for_fixed_selector(space: Space, note: Callable[[str], None] | None = None) -> Space:
    """``space`` for a run whose selector is a support run's, copied and fixed
    (:mod:`rationale_cli.training.support`): its options and sizes are the support's
    (``FROM_SUPPORT``), so only the other training options stay."""
    dropped = [entry.name for entry in space.entries if entry.name not in TRAIN_SPECS or entry.name in FROM_SUPPORT]
    if not dropped:
        return space
    line = f"{', '.join(map(flag_of, dropped))} not searched: the support run's own, fixed"
    if note:
        note(line)
    entries = tuple(entry for entry in space.entries if entry.name not in dropped)
    return Space(entries, space.fixed, space.from_file, (*space.notes, line))


def for_fitted_predictor(space: Space, note: Callable[[str], None] | None = None) -> Space:
    """``space`` for a run whose ``linear`` predictor is fitted in one pass: the training
    options change nothing there, so only the selector's options stay (a ``--support reference``
    run's ``window``, from a search-space file); one error line when nothing is left."""
    dropped = [entry.name for entry in space.entries if entry.name in TRAIN_SPECS]
    entries = tuple(entry for entry in space.entries if entry.name not in TRAIN_SPECS)
    if not entries:
        raise UserError("nothing to search: the linear predictor chooses its n-grams and penalty on validation as "
                        "it is fitted, and the training options change nothing in it; train one run per --budget "
                        "(--support-budget with a support run) instead, or search the reference's options (window) "
                        "with --search-space")
    notes = space.notes
    if dropped:
        notes += (f"{', '.join(map(flag_of, dropped))} not searched: the linear predictor is fitted, not trained",)
        if note:
            note(notes[-1])
    return Space(entries, space.fixed, space.from_file, notes)


def first_clash(entries: tuple[Entry, ...], base: dict[str, Any], given: set[str]) -> OptionError | None:
    for values in corners(entries):
        try:
            configured(base, given, values)
        except OptionError as err:
            return err
    return None


def suggest(trial, entries: tuple[Entry, ...]) -> dict[str, Any]:
    """The values an Optuna ``trial`` draws for ``entries`` (integers for an integer range)."""
    params = {}
    for entry in entries:
        if isinstance(entry, OneOf):
            params[entry.name] = trial.suggest_categorical(entry.name, list(entry.choices))
        elif isinstance(entry.low, int) and isinstance(entry.high, int):
            params[entry.name] = trial.suggest_int(entry.name, entry.low, entry.high, log=entry.log)
        else:
            params[entry.name] = trial.suggest_float(entry.name, entry.low, entry.high, log=entry.log)
    return params
