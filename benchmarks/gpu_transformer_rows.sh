#!/usr/bin/env bash
# On a machine with a GPU, in about six minutes (377 s on an H200), the transformer rows CPU time
# does not allow, all started at once (the GPU shared), with the CUDA path checked beside them:
#   1. ERASER movies, two stages (FRESH, Jain et al. 2020): the full-text reference's saliency in
#      whole sentences at half of each review (--support reference --budgets 0.5, the budget
#      the linear predictor chose on validation), read by a MiniLM predictor (--predictor-encoder
#      hf) with 0 or 4 of its 6 layers fixed, chosen on validation loss; seeds 0-2, one process
#      each, every chosen run tested once (eraser_support.py);
#   2. beer appearance on the binary protocol: Bernoulli + MCD (--guidance 1, the configuration
#      chosen on validation with the RCNN) with MiniLM on both sides in place of the RCNN,
#      seeds 0-2, the decoding chosen on validation, tested once each (beer_binary.py);
#   3. the CUDA path on the demo (cuda_demo.sh), when DEVICE is cuda.
# Rows go to benchmarks/results/, copied to OUT with the logs. Runs from a checkout without
# installing (PYTHONPATH=.); needs torch, transformers, scikit-learn, typer, rich, safetensors.
#   DATA=../shared/data MINILM=all-MiniLM-L6-v2 OUT=/tmp/rows bash benchmarks/gpu_transformer_rows.sh
# MINUTES bounds each training run (default 2.5 for movies, twice that for beer) and
# SECONDS_EACH each process (default 500: what is done by then is kept); DEVICE=cpu, FREEZES="0 1" and a
# tiny transformer try the script without a GPU (SEEDS="0": one seed).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/checkout_link.sh
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2
out=${OUT:-/tmp/rows} data=${DATA:-../shared/data} device=${DEVICE:-cuda} minutes=${MINUTES:-2.5}
seconds=${SECONDS_EACH:-500} freezes=${FREEZES:-0 4}
mkdir -p "$out/logs" "$out/runs"
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu')"
tuned=(--pretrained-lr 5e-5 --batch-size 16 --device "$device")
for seed in ${SEEDS:-0 1 2}; do
  # shellcheck disable=SC2086  # the layer counts are split on purpose
  timeout "$seconds" python benchmarks/eraser_support.py --support reference --decodings sentences --budgets 0.5 --predictors hf \
    --lrs 0.002 --freezes $freezes --seed "$seed" --data-dir "$data" --runs "$out/runs/movies-s$seed" -- \
    --pretrained "$MINILM" "${tuned[@]}" --epochs 10 --time-limit "$minutes" > "$out/logs/movies-s$seed.log" 2>&1 \
    && echo "movies MiniLM predictor, seed $seed: ok" || echo "movies MiniLM predictor, seed $seed: FAILED" &
  timeout "$seconds" python benchmarks/beer_binary.py --extractor bernoulli --encoder hf --pretrained "$MINILM" --aspects 0 \
    --seeds "$seed" --data-dir "$data" --decodings own rate --runs "$out/runs/beer-s$seed" -- --lagrangian \
    --sparsity 0 --coherence 0.0006 --lagrange-rho 20 --baseline ema --guidance 1 --lr 0.002 --freeze-layers 4 \
    "${tuned[@]}" --epochs 25 --time-limit "$(python -c "print(2 * $minutes)")" > "$out/logs/beer-s$seed.log" 2>&1 \
    && echo "beer binary MiniLM, seed $seed: ok" || echo "beer binary MiniLM, seed $seed: FAILED" &
done
[ "$device" = cuda ] && timeout "$seconds" bash benchmarks/cuda_demo.sh "$out/demo" "$out/logs"
wait
cp -r benchmarks/results "$out/"
grep -h -A3 "Error\|error:" "$out"/logs/*.log | head -40
tar czf "$out/logs.tgz" -C "$out" logs $(cd "$out" && ls runs/*/*/*.json runs/*/*/*/*.json demo/*.json 2>/dev/null)
rm -rf "$out/runs" "$out/demo" "$out/logs"
