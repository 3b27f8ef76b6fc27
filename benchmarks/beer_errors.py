"""Where a beer run's false positives lie: for each selected test token outside the
aspect's gold rationale, which other aspect's gold sentences hold it (appearance,
aroma, palate, taste, overall), or none.

    python benchmarks/beer_errors.py RUN_DIR [RUN_DIR ...] --aspect 0

The test reviews (``annotations.json``) carry gold spans for all five aspects, so a
false positive in another aspect's gold text is a correlated description (a model
reading the score off taste words) and one outside every gold span is text no
annotator tied to any aspect. It also counts the spans (runs of adjacent selected
tokens) per review: how scattered the selection is. Prints a table per run; writes
nothing.
"""

from __future__ import annotations

import argparse

from rationale_cli.api import load
from rationale_cli.data.readers.beer import ASPECTS, iter_beer_annotations
from rationale_cli.data.records import mask_to_spans


def false_positives(by_aspect: list[list], aspect: int, selections: list[list[int]]) -> dict:
    """Counts for one run: ``selected``, ``true`` (in the aspect's gold), per other aspect the
    false positives its gold holds (a token may be gold for several), and ``outside``
    (false positives in no aspect's gold). ``by_aspect[a]`` are the test records read for
    aspect a (the same reviews in the same order), ``selections`` 0/1 per token."""
    others = [a for a in range(len(ASPECTS)) if a != aspect]
    counts = {"selected": 0, "true": 0, **{ASPECTS[a]: 0 for a in others}, "outside": 0}
    for row, selected in enumerate(selections):
        gold = [by_aspect[a][row].gold_mask() for a in range(len(ASPECTS))]
        for i in (i for i, z in enumerate(selected) if z):
            counts["selected"] += 1
            if gold[aspect][i]:
                counts["true"] += 1
                continue
            holders = [a for a in others if gold[a][i]]
            counts["outside"] += not holders
            for a in holders:
                counts[ASPECTS[a]] += 1
    return counts


def spans(selected: list[int]) -> int:
    """The runs of adjacent selected tokens in one review."""
    return len(mask_to_spans(selected))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--aspect", type=int, required=True)
    parser.add_argument("--annotations", default="../shared/data/beer/annotations.json")
    args = parser.parse_args()
    by_aspect = [list(iter_beer_annotations(args.annotations, a)) for a in range(len(ASPECTS))]
    for run in args.runs:
        predictions = load(run, device="cpu").predict(by_aspect[args.aspect])
        counts = false_positives(by_aspect, args.aspect, [r.selected for r in predictions])
        selected, true = counts.pop("selected"), counts.pop("true")
        false = selected - true
        per_review = sum(spans(r.selected) for r in predictions) / max(len(predictions), 1)
        print(f"{run}: {selected:,} selected in {per_review:.1f} spans per review, precision "
              f"{100 * true / max(selected, 1):.1f}%, {false:,} false positives, of which (a token may be "
              "gold for several aspects):")
        for name, n in counts.items():
            where = "in no aspect's gold" if name == "outside" else f"in {name} gold"
            print(f"  {where:20s} {n:6,}  {100 * n / max(false, 1):5.1f}%")


if __name__ == "__main__":
    main()
