#!/usr/bin/env bash
# MGRIT iterations chosen by the training (--fwd-iters auto --bwd-iters auto) against exact mode
# and fixed iteration counts, same seed, data and epochs, at 2 ranks, one run after the other:
# the final test accuracy, its difference from exact mode, and the step evaluations per batch
# (forward and adjoint, every level, both ranks; the metrics' step_evaluations, exact
# recomputations of the checks included), the mean iterations, the exact-gradient checks and
# the checks' mean gradient and forward (logits) errors.
#   stages: the README main job's network (--model stages, its recipe: 2 levels, cf 2; auto
#           starts from its 1 forward iteration without skip, 1 adjoint iteration)
#   gru:    --model gru (rows), 2 levels cf 4
# The runs: exact, auto and fixed counts fixedFB (F forward and B adjoint iterations, one digit
# each, either followed by n for a solve without skip: fixed1n1 = --fwd-iters 1 --fwd-skip 0
# --bwd-iters 1, the half step the auto runs may choose). Per network, the summary takes medians over the seeds (beside them the mean and its
# standard error, which say how far the seeds' noise reaches) and names the cheapest fixed
# setting whose median accuracy is within TOLERANCE points (0.2) of exact mode's: the setting
# the auto run's evaluations are compared with.
# Usage: bash bench/run_adaptive_iterations.sh [SEED...] (default 1); NETWORKS (default
# "stages gru"), RUNS (default "exact fixed11 fixed22 auto"; exact and auto are always run),
# TRAIN_SIZE (10000), EPOCHS (2), AUTO (extra flags for the auto runs, default
# "--auto-check 50"), BUILD_DIR (build), OUT (keep the metrics in this folder; runs whose
# metrics are there already are not run again). Build first (bash scripts/build.sh).
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
# The network's own test accuracy (the exact forward), evaluated once per epoch.
common=(--epochs "${EPOCHS:-2}" --train-size "${TRAIN_SIZE:-10000}" --no-progress --threads 1
        --eval-forward exact)
declare -A model
model[stages]="--model stages --fwd-cf 2 --bwd-cf 2"
model[gru]="--model gru --fwd-cf 4 --bwd-cf 4"
two="--fwd-levels 2 --bwd-levels 2"
setting() {
  case $1 in
    exact) echo "--fwd-levels 1 --bwd-levels 1" ;;
    auto) echo "$two --fwd-iters auto --bwd-iters auto ${AUTO:---auto-check 50}" ;;
    *)
      if [[ $1 =~ ^fixed([1-9])(n?)([1-9])(n?)$ ]]; then
        local f=${BASH_REMATCH[1]} b=${BASH_REMATCH[3]}
        # Skip given either way: the stages recipe's forward does not skip, the others do.
        echo "$two --fwd-iters $f --bwd-iters $b" \
          "--fwd-skip $([ -n "${BASH_REMATCH[2]}" ] && echo 0 || echo 1)" \
          "--bwd-skip $([ -n "${BASH_REMATCH[4]}" ] && echo 0 || echo 1)"
      else
        echo "run_adaptive_iterations.sh: unknown run '$1' (exact, auto or fixedFB)" >&2
        exit 2
      fi
      ;;
  esac
}
runs=(exact)
for run in ${RUNS:-fixed11 fixed22}; do
  [ "$run" = exact ] || [ "$run" = auto ] || runs+=("$run")
done
runs+=(auto)
for run in "${runs[@]}"; do setting "$run" >/dev/null; done
for network in ${NETWORKS:-stages gru}; do
  for seed in "${seeds[@]}"; do
    for run in "${runs[@]}"; do
      metrics="$out/$network-$seed-$run.jsonl"
      [ -s "$metrics" ] && continue
      # shellcheck disable=SC2046,SC2086
      mpirun -np 2 "$build"/apps/weft/weft train ${model[$network]} "${common[@]}" \
        --seed "$seed" $(setting "$run") --metrics "$metrics.part" >/dev/null
      mv "$metrics.part" "$metrics"
    done
  done
done
/usr/bin/python3 - "$out" "${NETWORKS:-stages gru}" "${TOLERANCE:-0.2}" "${runs[*]}" "${seeds[@]}" <<'PY'
import json, statistics, sys
out, networks, tolerance, runs, seeds = (sys.argv[1], sys.argv[2].split(), float(sys.argv[3]),
                                         sys.argv[4].split(), sys.argv[5:])
def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]
print(f"{'network':8} {'seed':4} {'run':8} {'accuracy':>9} {'vs exact':>9} {'evals/batch':>11} "
      f"{'fwd it':>6} {'bwd it':>6} {'checks':>6} {'fallbacks':>9} {'grad err':>9} "
      f"{'fwd err':>8} {'unskipped':>9}")
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
            ferrs = [e["forward_error"] for e in epochs if e.get("forward_error") is not None]
            ferr = f"{statistics.mean(ferrs):8.3g}" if ferrs else f"{'-':>8}"
            # Half steps: the fraction of batches solved without skip, forward/adjoint.
            def unskipped(key):
                v = [e[key] for e in epochs if e.get(key) is not None]
                return f"{statistics.mean(v):.2f}" if v else "-"
            unskip = f"{unskipped('fwd_unskipped_fraction')}/{unskipped('bwd_unskipped_fraction')}"
            print(f"{net:8} {seed:4} {run:8} {100 * last['test_accuracy']:8.2f}% "
                  f"{100 * (last['test_accuracy'] - exact):+8.2f}p {evals:11.0f} {fwd:6.2f} "
                  f"{bwd:6.2f} {checks:6d} {fallbacks:9d} {err} {ferr} {unskip:>9}")
    # Medians over the seeds: accuracy against exact mode, evaluations per batch.
    summary = {}
    for run in runs:
        deltas, evals = [], []
        for seed in seeds:
            epochs = load(f"{out}/{net}-{seed}-{run}.jsonl")
            exact = load(f"{out}/{net}-{seed}-exact.jsonl")[-1]["test_accuracy"]
            deltas.append(100 * (epochs[-1]["test_accuracy"] - exact))
            evals.append(statistics.mean(e.get("step_evaluations") or 0 for e in epochs))
        summary[run] = (statistics.median(deltas), statistics.median(evals))
        spread = (f"; mean {statistics.mean(deltas):+.2f}p +- "
                  f"{statistics.stdev(deltas) / len(deltas) ** 0.5:.2f} (s.e.)"
                  if len(deltas) > 1 and run != "exact" else "")
        print(f"{net:8} median {run:8} {summary[run][0]:+8.2f}p {summary[run][1]:11.0f} "
              f"evals/batch{spread}")
    fixed = sorted((e, r) for r, (d, e) in summary.items()
                   if r.startswith("fixed") and d >= -tolerance)
    auto_delta, auto_evals = summary["auto"]
    if fixed:
        e, r = fixed[0]
        print(f"{net:8} cheapest fixed setting within {tolerance} points of exact mode: {r} "
              f"({e:.0f} evals/batch); auto {auto_delta:+.2f}p with {auto_evals:.0f} evals/batch "
              f"= {auto_evals / e:.2f}x")
    else:
        print(f"{net:8} no fixed setting measured is within {tolerance} points of exact mode; "
              f"auto {auto_delta:+.2f}p with {auto_evals:.0f} evals/batch")
PY
