"""Test-time decoding asked on the command line (``--rate``, ``--rate-over``, ``--coherence`` of
predict, evaluate and explain): parsed once into a :class:`models.decoding.Decoding`, which
the commands pass to the library."""

from __future__ import annotations

from typing import Optional

from models.decoding import Decoding
from rationale_cli.cli._util import stderr
from rationale_cli.runs.inference import asked_decoding, at_corpus_rate, decoding_metrics
from rationale_cli.runtime.errors import UserError
from rationale_cli.runtime.progress import counted, no_progress

RATE_HELP = ("Hold each document's rationale at this size: a share of its tokens (0.13) or a count (10), its "
             "best-scored tokens (default: the extractor's own decoding).")


RATE_OVER_HELP = ("With --rate: document (each document at that size) or corpus (one score threshold for all "
                  "the documents, keeping that share of all their tokens: each document keeps those it "
                  "scores above it).")


COHERENCE_HELP = ("Decode with this cost per 0/1 transition between adjacent tokens, subtracted from every "
                  "mask's score: fewer, longer spans (sparsemap and topk-sparsemax; default: the run's own "
                  "--coherence).")


def check_rate_over(rate: Optional[str], rate_over: str) -> None:
    """``--rate-over``: one of its two scopes, and corpus only with a share to hold."""
    if rate_over not in ("document", "corpus"):
        raise UserError(f"--rate-over {rate_over}: expected document or corpus")
    if rate_over == "corpus" and rate is None:
        raise UserError("--rate-over corpus: give the share to hold with --rate")


def parse_decoding(loaded, rate: Optional[str], rate_over: str, coherence: Optional[float], *, records=None,
                   batch_size: int = 64, device="cpu", scoring=None) -> tuple[Decoding, dict]:
    """The decoding ``--rate``, ``--rate-over`` and ``--coherence`` ask of the loaded run, parsed
    once (:mod:`rationale_cli.runs.inference`), and what evaluate reports of it. Over a corpus,
    ``records`` (wrapped by ``scoring``, a progress reporter, if given) are read once for the
    threshold, which is then printed."""
    if rate_over != "corpus":
        decoding = asked_decoding(loaded, rate=rate, coherence=coherence)
        return decoding, decoding_metrics(decoding)
    asked_decoding(loaded, coherence=coherence)  # the cost is checked before the scoring pass
    with scoring() if scoring else no_progress(None) as advance:
        decoding, share = at_corpus_rate(loaded, rate, counted(records, advance), coherence=coherence,
                                         batch_size=batch_size, device=device)
    if scoring:
        stderr().print(f"decoding at threshold {decoding.threshold:.6g}, which keeps {100 * share:g}% of "
                       "the input's tokens", highlight=False)
    return decoding, decoding_metrics(decoding, share)
