#!/usr/bin/env bash
# On a machine with a GPU, in one go:
#   1. GPU timings: the k-subset programs (SIMPLE's path), the top-k relaxations and the
#      training step of every extractor, each against its baseline in the same run;
#   2. the CUDA path: every extractor trains one epoch on the demo corpus with
#      --device cuda and is evaluated;
#   3. beer runs of the k-subset extractors (their papers' architectures) and HardKuma,
#      in parallel, each stopped after RUN_LIMIT seconds.
# Runs from a checkout without installing (PYTHONPATH=.); needs torch with CUDA, typer,
# rich, numpy, safetensors (and entmax for sparse-attention); spaCy is not needed.
#   DATA=../shared/data OUT=/tmp/gpu-check bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
out=${OUT:-/tmp/gpu-check}
data=${DATA:-../shared/data}
limit=${RUN_LIMIT:-390}
mkdir -p "$out/logs"
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"

python benchmarks/ksubset_speed.py --device cuda --repeats 10
python benchmarks/relaxation_speed.py --device cuda --repeats 10
python benchmarks/step_cost.py --device cuda --repeats 3

beer() {  # name, then beer.py arguments
  local name=$1; shift
  timeout "$limit" python benchmarks/beer.py --data-dir "$data" --runs "$out/runs" "$@" > "$out/logs/$name.log" 2>&1 \
    || echo "beer run $name stopped: exit $?" >> "$out/logs/$name.log"
}
subset="--epochs 20 -- --batch-size 100 --lr 0.001 --hidden-size 100 --embedding-dim 50 --device cuda"
for extractor in simple corr-topk; do
  beer "$extractor-a1-k5" --extractor $extractor --aspects 1 --seeds 0 $subset --k 5 &
  beer "$extractor-a1-k15" --extractor $extractor --aspects 1 --seeds 0 $subset --k 15 &
  for seed in 0 1 2; do beer "$extractor-a1-k10-s$seed" --extractor $extractor --aspects 1 --seeds $seed $subset --k 10 & done
  for aspect in 0 2; do beer "$extractor-a$aspect-k10" --extractor $extractor --aspects $aspect --seeds 0 $subset --k 10 & done
done
beer topk-a1-k10 --extractor topk --aspects 1 --seeds 0 $subset --k 10 &
kuma="--extractor hardkuma --epochs 15 -- --dependent --transitions 0.02 --batch-size 64 --lr 0.001 --device cuda"
beer hardkuma-a1 --aspects 1 --seeds 0 $kuma &
beer hardkuma-a2 --aspects 2 --seeds 0 $kuma &
beer hardkuma-a0-s1 --aspects 0 --seeds 1 $kuma &
beer hardkuma-a0-s2 --aspects 0 --seeds 2 $kuma &

for extractor in full attention hardkuma bernoulli simple topk corr-topk sparse-attention; do
  python -m rationale_cli train --data demo --out "$out/demo/$extractor" --force --device cuda \
    --extractor "$extractor" --epochs 1 --batch-size 50 --embedding-dim 50 --hidden-size 64 > "$out/logs/demo-$extractor.log" 2>&1 \
    && python -m rationale_cli evaluate "$out/demo/$extractor" demo --device cuda --json "$out/demo/$extractor.json" \
      >> "$out/logs/demo-$extractor.log" 2>&1 && echo "demo $extractor on cuda: ok" || echo "demo $extractor on cuda: FAILED"
done
wait
cp benchmarks/results.jsonl "$out/results.jsonl"
grep -h "stopped" "$out"/logs/*.log
tar czf "$out/logs.tgz" -C "$out" logs demo $(cd "$out" && ls -d runs/*/*.json 2>/dev/null)
rm -rf "$out/runs" "$out/demo" "$out/logs"
