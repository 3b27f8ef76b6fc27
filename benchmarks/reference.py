"""The full-text reference (:mod:`rationale_cli.runs.reference`) on ERASER movies and the beer
aspects: sublinear term frequencies (the default) beside raw counts, each with its n-gram range
and regularisation chosen on the validation split, then scored once on the test split.

Movies: the train, val and test splits. Beer: the 9,000 / 1,000 split of the aspect's heldout
reviews that ``beer.py`` trains and validates on (a fixed shuffle), and the 994 annotated test
reviews. One row per dataset and weighting (``benchmark: reference``) in benchmarks/results/.

    python benchmarks/reference.py --data-dir ../shared/data --datasets movies beer0
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import append_result, git_commit, invocation

from rationale_cli.data import sources
from rationale_cli.data.readers import read_records
from rationale_cli.runs.reference import fit_reference, main_metric
from rationale_cli.runs.task import infer_task
from rationale_cli.training.trainer import split_validation


def splits(name: str, root: Path) -> tuple[list, list, list]:
    """The train, validation and test documents of ``movies`` or ``beerN`` (aspect N)."""
    if name == "movies":
        data = str(root / "eraser_movies")
        return sources.load(data, "train"), sources.load(data, "valid"), sources.load(data, "test")
    aspect = int(name.removeprefix("beer"))
    own = read_records(root / "beer" / f"reviews.aspect{aspect}.heldout.txt.gz", "beer", aspect=aspect)
    train, valid = split_validation(own, 0.1)
    test = sources.load(str(root / "beer" / "annotations.json"), "test", aspect=aspect)
    return train, valid, test


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data")
    parser.add_argument("--datasets", nargs="+", default=["movies"], help="movies, beer0, beer1, beer2")
    args = parser.parse_args()
    for name in args.datasets:
        train, valid, test = splits(name, Path(args.data_dir))
        task = infer_task([r.label for r in train])
        for sublinear in (True, False):
            started = time.perf_counter()
            reference = fit_reference(train, valid, task, sublinear=sublinear)
            seconds = time.perf_counter() - started
            value = reference.score(test, task)
            metric = main_metric(task)
            append_result({"benchmark": "reference", "dataset": name, "sublinear": sublinear,
                           "setting": reference.setting, "metric": metric, "valid": reference.valid["value"],
                           "test": value, "tried": reference.tried, "chosen_on": "validation",
                           "documents": {"train": len(train), "valid": len(valid), "test": len(test)},
                           "fit_seconds": round(seconds, 1), "command": invocation(), "commit": git_commit()})
            print(f"{name}, {'sublinear' if sublinear else 'raw'} tf: {reference.setting}; validation {metric} "
                  f"{reference.valid['value']:.4f}, test {value:.4f} ({seconds:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
