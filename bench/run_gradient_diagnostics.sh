#!/usr/bin/env bash
# What kind of gradient error MGRIT's iterations leave: runs held at fixed counts
# (--fwd-iters auto --bwd-iters auto --auto-min N --auto-max N, which only measures) with
# --auto-diagnostics 1, a check every 10 batches, and prints per run the mean relative
# gradient error e, the exact gradient's sampling noise (from the batch's two halves), their
# ratio, and the persistence of the error (the cosine between consecutive checks' errors).
# A random error (persistence near 0) averages out over SGD steps like the sampling noise; a
# systematic one does not. Same data and epochs as run_adaptive_iterations.sh, at 2 ranks.
# Usage: bash bench/run_gradient_diagnostics.sh [SEED...] (default 1); RUNS (default
# "stages:1 gru:4 gru:5": network:count), TRAIN_SIZE (10000), EPOCHS (2), BUILD_DIR (build),
# OUT (keep the metrics there; runs whose metrics are there are not run again).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1)
build=${BUILD_DIR:-build}
if [ -n "${OUT:-}" ]; then
  out=$OUT
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
declare -A model
# Both solves skip, as when these figures were first measured (the stages recipe's forward no
# longer does).
model[stages]="--model stages --fwd-cf 2 --bwd-cf 2 --fwd-skip 1"
model[gru]="--model gru --fwd-cf 4 --bwd-cf 4"
runs=(${RUNS:-stages:1 gru:4 gru:5})
for run in "${runs[@]}"; do
  if [[ ! $run =~ ^(stages|gru):([1-9])$ ]]; then
    echo "run_gradient_diagnostics.sh: unknown run '$run' (stages:N or gru:N)" >&2
    exit 2
  fi
done
for run in "${runs[@]}"; do
  network=${run%%:*} count=${run##*:}
  for seed in "${seeds[@]}"; do
    metrics="$out/$network-$count-$seed.jsonl"
    [ -s "$metrics" ] && continue
    # shellcheck disable=SC2086
    mpirun -np 2 "$build"/apps/weft/weft train ${model[$network]} --epochs "${EPOCHS:-2}" \
      --train-size "${TRAIN_SIZE:-10000}" --no-progress --threads 1 --seed "$seed" \
      --fwd-levels 2 --bwd-levels 2 --fwd-iters auto --bwd-iters auto --auto-min "$count" \
      --auto-max "$count" --auto-check 10 --auto-diagnostics 1 --metrics "$metrics.part" >/dev/null
    mv "$metrics.part" "$metrics"
  done
done
/usr/bin/python3 - "$out" "${runs[*]}" "${seeds[@]}" <<'PY'
import json, statistics, sys
out, runs, seeds = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
print(f"{'network':8} {'iters':>5} {'seed':>4} {'epoch':>5} {'error':>6} {'noise':>6} "
      f"{'error/noise':>11} {'persistence':>11}")
for run in runs:
    network, count = run.split(":")
    per_seed = []
    for seed in seeds:
        for line in open(f"{out}/{network}-{count}-{seed}.jsonl"):
            if not line.strip():
                continue
            e = json.loads(line)
            err, noise, pers = (e["gradient_error"], e["gradient_noise"],
                                e["gradient_error_persistence"])
            per_seed.append((err, noise, err / noise, pers))
            print(f"{network:8} {count:>5} {seed:>4} {e['epoch']:5d} {err:6.3f} {noise:6.3f} "
                  f"{err / noise:11.3f} {pers:11.3f}")
    med = [statistics.median(v[i] for v in per_seed) for i in range(4)]
    print(f"{network:8} {count:>5} median (epochs and seeds): error {med[0]:.3f}, noise "
          f"{med[1]:.3f}, error/noise {med[2]:.3f}, persistence {med[3]:.3f}")
PY
