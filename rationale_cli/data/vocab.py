"""Token vocabulary: padding at index 0, unknown words at 1, then words by frequency."""

from __future__ import annotations

import json
from collections import Counter
from itertools import repeat
from pathlib import Path
from typing import Iterable, Sequence

from rationale_cli.runtime.atomic import write_text_atomic
from rationale_cli.runtime.errors import UserError

PAD = "<pad>"
UNK = "<unk>"
FORMS_KEPT = 1 << 17  # surface forms outside the word list whose index is kept (a corpus's words repeat)


class Vocab:
    """A fixed word list; ``encode`` maps tokens to indices (unknown -> 1)."""

    def __init__(self, itos: Sequence[str], lower: bool = True):
        itos = list(itos)
        if itos[:2] != [PAD, UNK]:
            raise ValueError(f"a vocabulary starts with {PAD!r} and {UNK!r}")
        if not all(isinstance(w, str) for w in itos) or len(set(itos)) != len(itos):
            raise ValueError("a vocabulary holds distinct strings")
        self.itos = itos
        self.lower = lower
        self.stoi = {word: i for i, word in enumerate(itos)}
        self._forms = dict(self.stoi)  # stoi and the forms looked up through their lower case

    @classmethod
    def build(
        cls,
        token_lists: Iterable[Sequence[str]],
        min_freq: int = 1,
        max_size: int | None = None,
        lower: bool = True,
    ) -> Vocab:
        """Words seen at least ``min_freq`` times, most frequent first (ties by word).

        ``max_size`` caps the number of words, not counting ``<pad>`` and ``<unk>``.
        """
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            counts.update([t.lower() for t in tokens] if lower else tokens)
        words = sorted(
            (w for w, n in counts.items() if n >= min_freq and w not in (PAD, UNK)),
            key=lambda w: (-counts[w], w),
        )
        return cls([PAD, UNK, *words[:max_size]], lower)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Indices of ``tokens`` (lower-cased first when the vocabulary is)."""
        unk = self.stoi[UNK]
        if not self.lower:
            return list(map(self.stoi.get, tokens, repeat(unk)))
        # a word of a lower-cased vocabulary is its own lower case: look tokens up as they
        # are, then lower only the forms not seen before (most text is lower case already,
        # and a form outside the list, unknown or not lower case, is kept with its index)
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        forms = self._forms
        if len(forms) > len(self.stoi) + FORMS_KEPT:
            forms = self._forms = dict(self.stoi)
        ids = list(map(forms.get, tokens))
        missing = -1
        try:
            while True:  # each search starts after the last miss: one pass in all
                missing = ids.index(None, missing + 1)
                form = tokens[missing]
                ids[missing] = forms[form] = self.stoi.get(form.lower(), unk)
        except ValueError:  # no more misses
            return ids

    def to_dict(self) -> dict:
        """A JSON-ready form: ``{"itos": [...], "lower": bool}``."""
        return {"itos": list(self.itos), "lower": self.lower}

    @classmethod
    def from_dict(cls, data: dict) -> Vocab:
        """The inverse of :meth:`to_dict`; ValueError when ``data`` is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("itos"), list):
            raise ValueError("expected an object with a list 'itos'")
        return cls(data["itos"], bool(data.get("lower", True)))

    def save(self, path: str | Path) -> None:
        """Write JSON atomically: a temporary file in the same folder, then a rename."""
        write_text_atomic(path, json.dumps(self.to_dict(), ensure_ascii=False))

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        """Read a vocabulary written by :meth:`save`."""
        try:
            with open(path, encoding="utf-8") as handle:
                return cls.from_dict(json.load(handle))
        except FileNotFoundError:
            raise UserError(f"{path}: no such file") from None
        except ValueError as err:  # also bad JSON and bad UTF-8
            raise UserError(f"{path}: not a vocabulary file ({err})") from None
        except OSError as err:
            raise UserError(f"{path}: cannot read ({err.strerror or err})") from None
