#!/usr/bin/env bash
# The CUDA path on the demo corpus: every extractor trains one epoch with --device cuda and is
# evaluated, and the Python API trains and predicts on cuda. One line per check ("ok" or
# "FAILED"); each command's output in LOGS.
#   PYTHONPATH=. bash benchmarks/cuda_demo.sh RUNS LOGS
set -uo pipefail
runs=$1 logs=$2
mkdir -p "$runs" "$logs"
for extractor in full attention hardkuma bernoulli simple topk corr-topk sparse-attention sparsemap topk-sparsemax; do
  python -m rationale_cli train --data demo --out "$runs/$extractor" --force --device cuda \
    --extractor "$extractor" --epochs 1 --batch-size 50 --embedding-dim 50 --hidden-size 64 > "$logs/demo-$extractor.log" 2>&1 \
    && python -m rationale_cli evaluate "$runs/$extractor" demo --device cuda --json "$runs/$extractor.json" \
      >> "$logs/demo-$extractor.log" 2>&1 && echo "demo $extractor on cuda: ok" || echo "demo $extractor on cuda: FAILED"
done
python - <<'PY' || echo "python API on cuda: FAILED"
import rationale_cli as rationale
model = rationale.train("demo", device="cuda", epochs=2, embedding_dim=16, hidden_size=16, batch_size=50)
assert next(model.model.parameters()).is_cuda
result = model.predict([{"tokens": "pours a hazy golden color with a white head".split()}])[0]
print("python API on cuda: ok", result.prediction, result.spans, model.evaluate("demo")["precision"])
PY
