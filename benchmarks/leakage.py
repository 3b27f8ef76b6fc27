"""The leakage probe on trained runs (``rationale evaluate --leakage-probe``): how much the
0/1 shape of each run's test rationales alone tells about the label, beside chance.

For each run: ``rationale evaluate RUN DATA --leakage-probe`` (the probe trained on the run's
masks of its own training documents, scored on DATA's), one row per run (``benchmark:
leakage``) in benchmarks/results/ with the run's extractor, selector and predictor encoders and the
probe's score beside chance; RESULTS.md is regenerated.

    python benchmarks/leakage.py --run RUN DATA [--aspect 0] [--split test] --run RUN2 DATA2
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from common import append_result, git_commit, invocation, rationale
from report import write_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", nargs=2, action="append", required=True, metavar=("RUN", "DATA"),
                        help="a run directory and the documents to probe on (repeatable)")
    parser.add_argument("--aspect", default=None, help="beer aspect of the documents")
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="leakage-"))
    for number, (run, data) in enumerate(args.run):
        scores = out / f"{number}.json"
        command, seconds = rationale("evaluate", run, data, "--split", args.split, "--leakage-probe",
                                     "--no-faithfulness", "--json", str(scores),
                                     *(["--aspect", args.aspect] if args.aspect is not None else []))
        metrics = json.loads(scores.read_text())
        config = json.loads((Path(run) / "config.json").read_text())
        chance = metrics.get("leakage_majority_accuracy", metrics.get("leakage_mse_of_mean"))
        append_result({
            "benchmark": "leakage", "run": run, "data": data, "split": args.split, "extractor": config["extractor"],
            "selector_encoder": config.get("selector_encoder") or config["encoder"],
            "predictor_encoder": config.get("predictor_encoder") or config["encoder"],
            "selection_rate": metrics.get("selection_rate"), "documents": metrics.get("leakage_documents"),
            "probe": metrics.get("leakage_accuracy", metrics.get("leakage_mse")), "chance": chance,
            "measure": "accuracy" if "leakage_accuracy" in metrics else "mse",
            "seconds": round(seconds, 1), "command": command, "script": invocation(), "commit": git_commit(),
        })
        print(f"{run}: probe {metrics.get('leakage_accuracy', metrics.get('leakage_mse')):.3f} beside chance {chance:.3f}")
    write_report()


if __name__ == "__main__":
    main()
