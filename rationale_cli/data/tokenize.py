"""Tokenization of raw text with character offsets.

spaCy's blank English tokenizer (rules only, no model download) splits off
punctuation and clitics and remembers where each token starts, so a highlight on
tokens maps back onto the user's raw text. spaCy is imported on first use only.
"""

from __future__ import annotations

from functools import lru_cache

Span = tuple[int, int]


@lru_cache(maxsize=1)
def _tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


def tokenize(text: str) -> tuple[list[str], list[Span]]:
    """Token texts and their character ``(start, end)`` offsets in ``text``.

    Whitespace tokens are dropped, so ``text[start:end] == token`` for each pair.
    """
    tokens: list[str] = []
    offsets: list[Span] = []
    for token in _tokenizer()(text):
        if token.is_space:
            continue
        tokens.append(token.text)
        offsets.append((token.idx, token.idx + len(token.text)))
    return tokens, offsets
