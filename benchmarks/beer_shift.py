"""How beer's training reviews differ from its annotated test reviews, and what the full-text
reference reads on the test reviews outside the aspect's annotation.

The heldout reviews of an aspect (where ``beer.py`` trains and validates) were drawn so that
the aspect's rating varies apart from the others; the 994 annotated test reviews were not. For
each aspect this prints the rating's variance and its correlation with the other four ratings
on both, then the full-text reference (:mod:`rationale_cli.runs.reference`, fitted and chosen
as ``train`` fits it) scored on the test reviews three ways: the whole review, the review with
the aspect's annotated sentences removed (the reviews that have some), and the training mean
as a constant. A predictor that reads only the aspect's rationale cannot use what the second
line measures. One row per aspect (``benchmark: beer_shift``) in benchmarks/results/.

    python benchmarks/beer_shift.py --data-dir ../shared/data --aspects 0 1 2
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
from common import append_result, git_commit, invocation
from reference import splits

from rationale_cli.runs.reference import fit_reference
from rationale_cli.runs.task import infer_task


def heldout_ratings(root: Path, aspect: int) -> np.ndarray:
    """Every rating (five per review) of the aspect's heldout reviews."""
    with gzip.open(root / "beer" / f"reviews.aspect{aspect}.heldout.txt.gz", "rt") as lines:
        return np.array([[float(v) for v in line.split("\t", 1)[0].split()] for line in lines])


def test_ratings(test: list) -> np.ndarray:
    """Every rating of the annotated reviews, read from the records' source file."""
    path = Path(test[0].source.rsplit(":", 1)[0])
    with open(path) as lines:
        return np.array([json.loads(line)["y"] for line in lines])


def outside(record):
    """The record with the tokens of its gold spans removed."""
    inside = {i for start, end in record.rationale for i in range(start, end)}
    return dataclasses.replace(record, tokens=[t for i, t in enumerate(record.tokens) if i not in inside],
                               rationale=None, evidence=None, sentences=None, text=None, offsets=None)


def mse(predictions, records) -> float:
    return float(np.mean([(p - r.label) ** 2 for p, r in zip(predictions, records)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--aspects", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    root = Path(args.data_dir)
    for aspect in args.aspects:
        train, valid, test = splits(f"beer{aspect}", root)
        labels = {"heldout": heldout_ratings(root, aspect), "test": test_ratings(test)}
        stats = {name: {"variance": round(float(y[:, aspect].var()), 4),
                        "correlation": [round(float(c), 2) for c in np.corrcoef(y.T)[aspect]]}
                 for name, y in labels.items()}
        reference = fit_reference(train, valid, infer_task([r.label for r in train]))
        annotated = [r for r in test if r.rationale]
        mean = float(np.mean([r.label for r in train]))
        scores = {"full_text": mse(reference.predict(test), test),
                  "full_text_annotated": mse(reference.predict(annotated), annotated),
                  "without_annotation": mse(reference.predict([outside(r) for r in annotated]), annotated),
                  "training_mean": mse([mean] * len(annotated), annotated)}
        append_result({"benchmark": "beer_shift", "aspect": aspect, "labels": stats, "setting": reference.setting,
                       "test_mse": scores, "annotated_documents": len(annotated), "chosen_on": "validation",
                       "command": invocation(), "commit": git_commit()})
        print(f"aspect {aspect}: rating variance heldout {stats['heldout']['variance']}, test "
              f"{stats['test']['variance']}; correlation with the other ratings heldout "
              f"{stats['heldout']['correlation']}, test {stats['test']['correlation']}")
        print(f"  reference ({reference.setting}) test MSE: whole reviews {scores['full_text']:.4f}; the "
              f"{len(annotated)} annotated reviews {scores['full_text_annotated']:.4f}, without their annotated "
              f"sentences {scores['without_annotation']:.4f}; the training mean {scores['training_mean']:.4f}",
              flush=True)


if __name__ == "__main__":
    main()
