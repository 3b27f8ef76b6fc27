"""Tokenization of raw text with character offsets.

spaCy's blank English tokenizer (rules only, no model download) splits off
punctuation and clitics and remembers where each token starts, so a highlight on
tokens maps back onto the user's raw text. spaCy is imported on first use only.
"""

from __future__ import annotations

from functools import lru_cache

Span = tuple[int, int]
RUNS_KEPT = 1 << 17  # whitespace-free runs whose tokens are kept (a corpus's words repeat)
_runs: dict[str, tuple[Span, ...]] = {}  # run -> its tokens' (start, end) in it


@lru_cache(maxsize=1)
def _tokenizer():
    import spacy
    from spacy.attrs import IDX, LENGTH

    return spacy.blank("en").tokenizer, [IDX, LENGTH]


def tokenize(text: str) -> tuple[list[str], list[Span]]:
    """Token texts and their character ``(start, end)`` offsets in ``text``.

    Whitespace is dropped, so ``text[start:end] == token`` for each pair. spaCy's tokenizer
    cuts a text at whitespace first and tokenizes each run of other characters, so each
    distinct run is tokenized once, alone, and its tokens kept here (:data:`RUNS_KEPT` runs
    at most): a repeated word costs a lookup, and a text of any length is read run by run.
    A run's tokens are the same wherever it stands. (spaCy on a whole text matches its
    special cases across runs, and splits an emoticon by what stands before it: ``:]`` in
    ``x :]x`` but ``:`` and ``]`` in ``) :]x``.)
    """
    runs = text.split()  # at the characters spaCy calls whitespace (str.isspace)
    new = [run for run in dict.fromkeys(runs) if run not in _runs]
    learned = _learn(new) if new else {}
    tokens: list[str] = []
    offsets: list[Span] = []
    find, kept, token, offset = text.find, _runs.get, tokens.append, offsets.append
    position = 0
    for run in runs:
        start = find(run, position)
        position = start + len(run)
        # (a run kept before may be gone: emptied by _learn when full, or by another thread)
        spans = kept(run) or learned.get(run) or _learn([run])[run]
        if len(spans) == 1:  # the run is one token (most are)
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
    if len(_runs) + len(runs) > RUNS_KEPT:
        _runs.clear()
    tokenizer, columns = _tokenizer()
    spans = iter(tokenizer("\n".join(runs)).to_array(columns).tolist())  # [offset, length] per token, in order
    learned, start = {}, 0
    for run in runs:
        end, parts = start + len(run), []
        for offset, length in spans:
            if offset >= end:  # the newline after the run
                break
            parts.append((offset - start, offset - start + length))
        learned[run] = tuple(parts)
        start = end + 1
    _runs.update(learned)
    return learned
