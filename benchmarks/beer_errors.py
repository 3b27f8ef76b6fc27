"""Where a beer run's false positives lie: for each selected test token outside the
aspect's gold rationale, which other aspect's gold sentences hold it (appearance,
aroma, palate, taste, overall), or none.

    python benchmarks/beer_errors.py RUN_DIR [RUN_DIR ...] --aspect 0

The test reviews (``annotations.json``) carry gold spans for all five aspects, so a
false positive in another aspect's gold text is a correlated description (a model
reading the score off taste words) and one outside every gold span is text no
annotator tied to any aspect. Prints a table per run; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rationale_cli.api import load  # noqa: E402
from rationale_cli.readers.beer import iter_beer_annotations  # noqa: E402

ASPECTS = ["appearance", "aroma", "palate", "taste", "overall"]


def tokens_of(record) -> set[int]:
    return {i for start, end in record.rationale for i in range(start, end)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--aspect", type=int, required=True)
    parser.add_argument("--annotations", default="../shared/data/beer/annotations.json")
    args = parser.parse_args()
    by_aspect = [list(iter_beer_annotations(args.annotations, a)) for a in range(len(ASPECTS))]
    records = by_aspect[args.aspect]
    others = [a for a in range(len(ASPECTS)) if a != args.aspect]
    for run in args.runs:
        counts = {ASPECTS[a]: 0 for a in others}
        selected = true = outside = 0
        for row, rationale in enumerate(load(run, device="cpu").predict(records)):
            gold = [tokens_of(by_aspect[a][row]) for a in range(len(ASPECTS))]
            for i, z in enumerate(rationale.selected):
                if not z:
                    continue
                selected += 1
                if i in gold[args.aspect]:
                    true += 1
                    continue
                holders = [a for a in others if i in gold[a]]
                outside += not holders
                for a in holders:
                    counts[ASPECTS[a]] += 1
        false = selected - true
        print(f"{run}: {selected:,} selected, precision {100 * true / max(selected, 1):.1f}%, "
              f"{false:,} false positives, of which (a token may be gold for several aspects):")
        for name, n in counts.items():
            print(f"  in {name:10s} gold  {n:6,}  {100 * n / max(false, 1):5.1f}%")
        print(f"  in no aspect's gold  {outside:6,}  {100 * outside / max(false, 1):5.1f}%")


if __name__ == "__main__":
    main()
