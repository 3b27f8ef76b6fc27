"""Does ``rationale train --resume`` end where one uninterrupted run ends, on this device?

Trains dependent HardKuma (random sampling and dropout, Lagrange multipliers) on the
demo corpus three times: twice for all epochs (whether the device repeats itself
at all) and once stopped after the first epoch by its time limit, then resumed.
The tests check this on the CPU; this is for CUDA, whose random state is kept apart.

    python benchmarks/resume_check.py --device cuda
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

OPTIONS = ["--data", "demo", "--extractor", "hardkuma", "--dependent", "--epochs", "3", "--seed", "5",
           "--embedding-dim", "16", "--hidden-size", "16", "--batch-size", "100", "--dropout", "0.3"]


def train(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "rationale_cli", "train", *args], check=True, capture_output=True)


def same_weights(a: Path, b: Path) -> bool:
    x, y = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder)
        for name in ("once", "again"):
            train(*OPTIONS, "--device", args.device, "--out", str(runs / name))
        train(*OPTIONS, "--device", args.device, "--out", str(runs / "halves"), "--time-limit", "1e-6")
        train("--out", str(runs / "halves"), "--resume", "--time-limit", "0")
        repeats = same_weights(runs / "once", runs / "again")
        resumed = same_weights(runs / "once", runs / "halves")
    print(f"resume on {args.device}: two uninterrupted runs {'agree' if repeats else 'DIFFER'}; "
          f"stopped after epoch 1 and resumed: {'same weights' if resumed else 'DIFFERENT weights'}")


if __name__ == "__main__":
    main()
