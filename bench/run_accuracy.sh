#!/usr/bin/env bash
# Test accuracy of MGRIT training against plain LibTorch training of the benchmark network
# (Fashion-MNIST copied into 8 channels, 32 steps, batch 50, Adam 1e-3), same seeds and data.
# MGRIT: 3 levels, cf 4, 2 forward / 1 backward iteration, F-relaxation on the fine level, FCF
# on coarse levels, skip of the first down-cycle, at 2 ranks (the configuration of
# train_step_bench). The MGRIT run's test accuracy is its network's own (the exact forward);
# the last column is its MGRIT forward's (`mgrit_test_accuracy`, docs/training.md §4a).
# Usage: bash bench/run_accuracy.sh [SEED...]  (default seeds 1 2 3);
# TRAIN_SIZE and EPOCHS override 20000 images and 2 epochs, BUILD_DIR the build folder (build).
# Build first (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
build=${BUILD_DIR:-build}
out=$(mktemp -d)
common=(--open copy --channels 8 --steps 32 --batch 50 --epochs "${EPOCHS:-2}"
        --train-size "${TRAIN_SIZE:-20000}" --no-progress --threads 1)
mgrit=(--fwd-levels 3 --fwd-iters 2 --fwd-cf 4 --fwd-nrelax 0,1
       --bwd-levels 3 --bwd-iters 1 --bwd-cf 4 --bwd-nrelax 0,1)
field() {  # field FILE KEY: the value of KEY in the last JSON line of FILE
  tail -n 1 "$1" | tr ',{}' '\n\n\n' | sed -n "s/^\"$2\":\(.*\)$/\1/p"
}
summary() {  # summary FILE: "accuracy % / loss" of the last epoch
  printf '%.2f %% / %.4f' "$(awk "BEGIN{print 100*$(field "$1" test_accuracy)}")" \
    "$(field "$1" test_loss)"
}
printf '%-6s %-26s %-26s %-20s %s\n' seed "plain LibTorch: acc / loss" "weft MGRIT: acc / loss" \
  "difference [points]" "MGRIT forward acc"
sum=0
for seed in "${seeds[@]}"; do
  "$build"/apps/weft/weft train "${common[@]}" --seed "$seed" --serial \
    --metrics "$out/serial-$seed.jsonl" >/dev/null
  mpirun -np 2 "$build"/apps/weft/weft train "${common[@]}" --seed "$seed" "${mgrit[@]}" \
    --metrics "$out/mgrit-$seed.jsonl" >/dev/null
  d=$(awk "BEGIN{printf \"%+.2f\", 100*($(field "$out/mgrit-$seed.jsonl" test_accuracy) - \
      $(field "$out/serial-$seed.jsonl" test_accuracy))}")
  sum=$(awk "BEGIN{print $sum + $d}")
  printf '%-6s %-26s %-26s %-20s %.2f %%\n' "$seed" "$(summary "$out/serial-$seed.jsonl")" \
    "$(summary "$out/mgrit-$seed.jsonl")" "$d" \
    "$(awk "BEGIN{print 100*$(field "$out/mgrit-$seed.jsonl" mgrit_test_accuracy)}")"
done
awk "BEGIN{printf \"mean accuracy difference (MGRIT - plain): %+.2f points\\n\", $sum / ${#seeds[@]}}"
rm -rf "$out"
