#!/usr/bin/env bash
# MGRIT iterations chosen by the training (--fwd-iters auto --bwd-iters auto) against exact mode
# and fixed iteration counts, same seed, data and epochs, at 2 ranks, one run after the other:
# the final test accuracy, its difference from exact mode, and the step evaluations per batch
# (forward and adjoint, every level, both ranks; the metrics' step_evaluations, exact
# recomputations of the checks included), the mean iterations and the exact-gradient checks.
#   stages: the README main job's network (--model stages, its recipe: 2 levels, cf 2), fixed
#           1/1 (the recipe) and 2/2 iterations
#   gru:    --model gru (rows), 2 levels cf 4, fixed 1/1 and 2/2 iterations
# Usage: bash bench/run_adaptive_iterations.sh [SEED...] (default 1); NETWORKS (default
# "stages gru"), TRAIN_SIZE (10000), EPOCHS (2), AUTO (extra flags for the auto runs, default
# "--auto-check 50"), BUILD_DIR (build). Build first (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1)
build=${BUILD_DIR:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--epochs "${EPOCHS:-2}" --train-size "${TRAIN_SIZE:-10000}" --no-progress --threads 1)
declare -A model
model[stages]="--model stages --fwd-cf 2 --bwd-cf 2"
model[gru]="--model gru --fwd-cf 4 --bwd-cf 4"
declare -A setting
two="--fwd-levels 2 --bwd-levels 2"
setting[exact]="--fwd-levels 1 --bwd-levels 1"
setting[fixed11]="$two --fwd-iters 1 --bwd-iters 1"
setting[fixed22]="$two --fwd-iters 2 --bwd-iters 2"
setting[auto]="$two --fwd-iters auto --bwd-iters auto ${AUTO:---auto-check 50}"
runs=(exact fixed11 fixed22 auto)
for network in ${NETWORKS:-stages gru}; do
  for seed in "${seeds[@]}"; do
    for run in "${runs[@]}"; do
      # shellcheck disable=SC2086
      mpirun -np 2 "$build"/apps/weft/weft train ${model[$network]} "${common[@]}" \
        --seed "$seed" ${setting[$run]} --metrics "$out/$network-$seed-$run.jsonl" >/dev/null
    done
  done
done
/usr/bin/python3 - "$out" "${NETWORKS:-stages gru}" "${seeds[@]}" <<'PY'
import json, statistics, sys
out, networks, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
runs = ["exact", "fixed11", "fixed22", "auto"]
def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]
print(f"{'network':8} {'seed':4} {'run':8} {'accuracy':>9} {'vs exact':>9} {'evals/batch':>11} "
      f"{'fwd it':>6} {'bwd it':>6} {'checks':>6} {'fallbacks':>9} {'grad err':>9}")
for net in networks:
    for seed in seeds:
        exact = load(f"{out}/{net}-{seed}-exact.jsonl")[-1]["test_accuracy"]
        for run in runs:
            epochs = load(f"{out}/{net}-{seed}-{run}.jsonl")
            last = epochs[-1]
            evals = statistics.mean(e.get("step_evaluations") or 0 for e in epochs)
            fwd = statistics.mean(e.get("fwd_iterations") or 0 for e in epochs)
            bwd = statistics.mean(e.get("bwd_iterations") or 0 for e in epochs)
            checks = sum(e.get("gradient_checks", 0) for e in epochs)
            fallbacks = sum(e.get("fallbacks", 0) for e in epochs)
            errs = [e["gradient_error"] for e in epochs if e.get("gradient_error") is not None]
            err = f"{statistics.mean(errs):9.3g}" if errs else f"{'-':>9}"
            print(f"{net:8} {seed:4} {run:8} {100 * last['test_accuracy']:8.2f}% "
                  f"{100 * (last['test_accuracy'] - exact):+8.2f}p {evals:11.0f} {fwd:6.2f} "
                  f"{bwd:6.2f} {checks:6d} {fallbacks:9d} {err}")
PY
