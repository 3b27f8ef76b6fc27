"""Test-time decoding settings, an argument of :meth:`RationaleModel.decode` rather than state
on the model: the same trained weights decode the extractor's own way, at a rate, at a score
threshold, or with another transition cost.

- ``rate``: each document keeps its best-scored tokens, that share or count of them
  (a :class:`~rationale_cli.models.budget.Budget`, or what ``Budget.parse`` reads: 0.13, 10, "k=10"),
  never a token scored 0 (outside a sparse support);
- ``threshold``: each document keeps the tokens scored at least this (never 0); one threshold
  for a whole corpus holds a rate over the corpus (``rationale_cli.runs.inference.corpus_threshold``);
- ``coherence``: the cost per 0/1 transition between adjacent tokens. A mask-set selector
  subtracts it from every mask's score (Lei et al.'s coherence inside the score,
  :mod:`rationale_cli.models.selectors.marginalization.mask_set`; None keeps the trained one); every other extractor keeps
  the count its decoding chose per document and places it in runs (:mod:`rationale_cli.models.coherent`);
- ``sentences``: every extractor keeps the count its decoding chose per document and places it
  in whole sentences (:func:`rationale_cli.models.coherent.in_sentences`); the caller gives each token's
  sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from rationale_cli.models.budget import Budget


@dataclass(frozen=True)
class Decoding:
    """How a model decodes at test time: ``rate`` (a Budget, or a share or count such as 0.13
    or 10), ``threshold``, ``coherence`` or ``sentences``; all unset is the extractor's own
    decoding."""

    rate: Budget | float | int | str | None = None
    threshold: float | None = None
    coherence: float | None = None
    sentences: bool = False

    def __post_init__(self) -> None:
        if self.rate is not None and not isinstance(self.rate, Budget):
            object.__setattr__(self, "rate", Budget.parse(str(self.rate)))
        if self.rate is not None and self.threshold is not None:
            raise ValueError("decode at a rate or at a threshold, not both")
        if self.coherence is not None and self.coherence < 0:
            raise ValueError(f"coherence {self.coherence:g}: expected a number >= 0")
        if self.sentences and self.coherence is not None:
            raise ValueError("decode in whole sentences or with a transition cost, not both")

    def selector_arguments(self, taken: tuple[str, ...]) -> dict:
        """The settings a selector's own decoding takes (its ``decode_settings``, ``taken``)."""
        return {} if self.coherence is None or "coherence" not in taken else {"coherence": self.coherence}

    def to_json(self) -> dict:
        """The settings that differ from the extractor's own decoding, JSON-ready."""
        return {**({"rate": str(self.rate)} if self.rate is not None else {}),
                **({"threshold": self.threshold} if self.threshold is not None else {}),
                **({"coherence": self.coherence} if self.coherence is not None else {}),
                **({"sentences": True} if self.sentences else {})}


OWN = Decoding()  # the extractor's own decoding
