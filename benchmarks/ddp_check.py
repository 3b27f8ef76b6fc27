"""Does training under torchrun (DDP over NCCL on a GPU, gloo on the CPU) with one process
end where plain training ends, on this device?

Trains HardKuma (Lagrange multiplier) on the demo corpus twice: plainly, and under
``torchrun --nproc-per-node 1``, which joins a process group and trains through DDP and
its collectives. The tests check this on the CPU; this is for CUDA (NCCL).

    python benchmarks/ddp_check.py --device cuda
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from resume_check import same_weights
from safetensors.torch import load_file

OPTIONS = ["--data", "demo", "--extractor", "hardkuma", "--epochs", "2", "--seed", "5", "--embedding-dim", "16",
           "--hidden-size", "16", "--batch-size", "100"]


def train(launcher: list[str], out: Path, device: str) -> str:
    done = subprocess.run([sys.executable, *launcher, "-m", "rationale_cli", "train", *OPTIONS, "--device", device,
                           "--out", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(launcher) or 'plain'} training failed:\n{done.stderr[-2000:]}")
    return done.stderr


def main(device: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder)
        train([], runs / "plain", device)
        log = train(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1"], runs / "ddp", device)
        same = same_weights(runs / "plain", runs / "ddp")
        a, b = (load_file(str(runs / name / "model.safetensors")) for name in ("plain", "ddp"))
        gap = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    print(f"torchrun, 1 process ({backend}) on {device}: trained; weights "
          f"{'identical to' if same else f'differ from (max abs diff {gap:.2e})'} plain training")
    print(log.strip().splitlines()[0])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    main(parser.parse_args().device)
