#!/usr/bin/env bash
# CUDA check, for a machine with a GPU: every extractor trains one epoch on the demo
# corpus with --device cuda and is evaluated, then the step-cost benchmark runs on the GPU.
# Runs from a checkout without installing (PYTHONPATH=.); needs torch with CUDA, typer,
# rich, numpy, safetensors (and entmax for sparse-attention). spaCy is not needed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=.
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"
for extractor in full attention hardkuma bernoulli simple topk corr-topk sparse-attention; do
  python -m rationale_cli train --data demo --out "$out/$extractor" --force --device cuda \
    --extractor "$extractor" --epochs 1 --batch-size 50 --embedding-dim 50 --hidden-size 64
  python -m rationale_cli evaluate "$out/$extractor" demo --device cuda --json "$out/$extractor.json"
done
python benchmarks/step_cost.py --device cuda --repeats 5
