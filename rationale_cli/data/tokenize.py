"""Tokenization of raw text with character offsets.

spaCy's blank English tokenizer (rules only, no model download) splits off
punctuation and clitics and remembers where each token starts, so a highlight on
tokens maps back onto the user's raw text. spaCy is imported on first use only.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import accumulate, repeat
from operator import add

Span = tuple[int, int]
RUNS_KEPT = 1 << 17  # whitespace-free runs whose tokens are kept (a corpus's words repeat)
# run -> its tokens' (start, end) in it; and the kept runs that are not one token. Forgotten by
# replacing both (never emptied in place), so a call that took them keeps a whole view.
_runs: dict[str, tuple[Span, ...]] = {}
_split: set[str] = set()
# control characters that are not whitespace (NUL, ESC, ...): they separate tokens as a space does
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x9f]")


@lru_cache(maxsize=1)
def _tokenizer():
    """spaCy's tokenizer, the columns read from its output, and its special cases (the runs it
    splits by a listed exception, such as ``dont``: those are the only runs of ASCII letters it
    splits at all; its prefix, suffix and infix rules all need another character)."""
    import spacy
    from spacy.attrs import IDX, LENGTH

    tokenizer = spacy.blank("en").tokenizer
    return tokenizer, [IDX, LENGTH], frozenset(tokenizer.rules)


def tokenize(text: str) -> tuple[list[str], list[Span]]:
    """Token texts and their character ``(start, end)`` offsets in ``text``.

    Whitespace and control characters (a NUL, an ESC) are dropped, so ``text[start:end] ==
    token`` for each pair and no token holds a control character. spaCy's tokenizer
    cuts a text at whitespace first and tokenizes each run of other characters, so each
    distinct run is tokenized once, alone, and its tokens kept here (:data:`RUNS_KEPT` runs
    at most): a repeated word costs a lookup, and a text of any length is read run by run.
    A run's tokens are the same wherever it stands. (spaCy on a whole text matches its
    special cases across runs, and splits an emoticon by what stands before it: ``:]`` in
    ``x :]x`` but ``:`` and ``]`` in ``) :]x``.) In a text whose runs are one space apart (most
    are), the runs' offsets are sums of their lengths, and only the runs that are not one
    token are looked at one by one.
    """
    if _CONTROL.search(text):
        text = _CONTROL.sub(" ", text)  # one for one: the offsets hold in the text given
    runs = text.split()  # at the characters spaCy calls whitespace (str.isspace)
    kept, split = _runs, _split
    learned = _learn(list(set(runs).difference(kept)))
    fresh = {run for run, spans in learned.items() if spans != ((0, len(run)),)}  # new runs that are not one token
    if " ".join(runs) != text:
        return _tokens(text, runs, kept, learned)
    lengths = list(map(len, runs))
    starts = list(accumulate(map(add, lengths, repeat(1)), initial=0))
    offsets = list(zip(starts, map(add, starts, lengths)))
    if not fresh and split.isdisjoint(runs):
        return runs, offsets
    tokens: list[str] = []
    spans_out: list[Span] = []
    done = 0
    for i in [i for i, run in enumerate(runs) if run in split or run in fresh]:
        tokens += runs[done:i]
        spans_out += offsets[done:i]
        run, start = runs[i], starts[i]
        for begin, end in kept[run] if run in kept else learned[run]:
            tokens.append(run[begin:end])
            spans_out.append((start + begin, start + end))
        done = i + 1
    return tokens + runs[done:], spans_out + offsets[done:]


def _tokens(text: str, runs: list[str], kept: dict, learned: dict) -> tuple[list[str], list[Span]]:
    """:func:`tokenize`'s result for any spacing: each run found in turn."""
    tokens: list[str] = []
    offsets: list[Span] = []
    find, token, offset = text.find, tokens.append, offsets.append
    position = 0
    for run in runs:
        start = find(run, position)
        position = start + len(run)
        spans = kept[run] if run in kept else learned[run]
        if len(spans) == 1 and spans[0] == (0, len(run)):  # the run is one token (most are)
            token(run)
            offset((start, position))
            continue
        for begin, end in spans:
            token(run[begin:end])
            offset((start + begin, start + end))
    return tokens, offsets


def _learn(runs: list[str]) -> dict[str, tuple[Span, ...]]:
    """The tokens of each of these distinct ``runs``, as spaCy splits the run alone, from one
    call over them all, a line each (a newline is a token of its own, between which and a run
    no special case is matched); kept."""
    global _runs, _split
    if not runs:
        return {}
    if len(_runs) + len(runs) > RUNS_KEPT:
        _runs, _split = {}, set()
    tokenizer, columns, special = _tokenizer()
    learned = {run: ((0, len(run)),) for run in runs if run.isascii() and run.isalpha() and run not in special}
    runs = [run for run in runs if run not in learned]  # the others as spaCy splits them
    spans = iter(tokenizer("\n".join(runs)).to_array(columns).tolist() if runs else [])  # [offset, length] per token
    start = 0
    for run in runs:
        end, parts = start + len(run), []
        for offset, length in spans:
            if offset >= end:  # the newline after the run
                break
            parts.append((offset - start, offset - start + length))
        learned[run] = tuple(parts)
        start = end + 1
    _split.update(run for run in runs if learned[run] != ((0, len(run)),))
    _runs.update(learned)
    return learned
