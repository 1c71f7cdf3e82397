#!/usr/bin/env bash
# Nested iteration over depth (--grow-depth) against training at full depth from scratch, same
# seed, data, MGRIT settings and epochs, alternating runs at 2 ranks. Per network and round:
# the scratch run's final test accuracy A and wall time T (the sum of its epochs' training and
# evaluation), the time the growing run takes to reach A (at an epoch's end) as a fraction of T,
# and the growing run's accuracy at equal wall time (its last epoch ending within T). Medians
# over the rounds at the end.
#   main: the README main job's network (--model stages, stages of 2,2,2 steps, its MGRIT
#         recipe), grown 1,1,1 -> 2,2,2 (--grow-depth 2,1), the first MAIN_SHALLOW_EPOCHS
#         (default: EPOCHS - 1, so that the last GROWN_EXTRA + 1 are at full depth) at 1,1,1
#   deep: stages of 8,8,8 steps, grown 2,2,2 -> 4,4,4 -> 8,8,8 (--grow-depth DEEP_GROW_DEPTH,
#         default 2,2; --grow-epochs DEEP_GROW_EPOCHS, default 1,1)
# The growing run trains GROWN_EXTRA (default 1) epochs more at full depth than the scratch run,
# so that it can use the scratch run's wall time: its cheaper shallow epochs buy them.
# Usage: bash bench/run_nested_iteration.sh [ROUNDS]  (default 3); NETWORKS (default "main
# deep"), TRAIN_SIZE (10000), EPOCHS (4), GROWN_EXTRA (1), MAIN_SHALLOW_EPOCHS, DEEP_GROW_DEPTH,
# DEEP_GROW_EPOCHS, GROW_FLAGS (more flags for the growing runs, e.g. "--grow-interpolation
# linear"), FIRST_ROUND (1: round r trains with seed r, so later rounds add seeds), BUILD_DIR
# (build). Build first (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
rounds=${1:-3}
first=${FIRST_ROUND:-1}
for value in "ROUNDS=$rounds" "FIRST_ROUND=$first"; do
  [[ ${value#*=} =~ ^[1-9][0-9]*$ ]] && continue
  echo "run_nested_iteration.sh: ${value%%=*} '${value#*=}' is invalid; accepted: an integer >= 1" >&2
  exit 2
done
build=${BUILD_DIR:-build}
epochs=${EPOCHS:-4}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
extra_epochs=${GROWN_EXTRA:-1}
# The network's own test accuracy (the exact forward), evaluated once per epoch.
common=(--model stages --train-size "${TRAIN_SIZE:-10000}" --no-progress --threads 1
        --eval-forward exact)
declare -A extra grow
extra[main]=""
grow[main]="--grow-depth 2,1 --grow-epochs ${MAIN_SHALLOW_EPOCHS:-$((epochs - 1))}"
extra[deep]="--stage-steps 8,8,8"
grow[deep]="--grow-depth ${DEEP_GROW_DEPTH:-2,2} --grow-epochs ${DEEP_GROW_EPOCHS:-1,1}"
for network in ${NETWORKS:-main deep}; do
  for ((round = first; round < first + rounds; ++round)); do
    for run in scratch grown; do
      # shellcheck disable=SC2086
      mpirun -np 2 "$build"/apps/weft/weft train "${common[@]}" ${extra[$network]} \
        --seed "$round" $([ "$run" = grown ] &&
          echo "${grow[$network]} ${GROW_FLAGS:-} --epochs $((epochs + extra_epochs))" ||
          echo "--epochs $epochs") \
        --metrics "$out/$network-$round-$run.jsonl" >/dev/null
    done
  done
done
/usr/bin/python3 - "$out" "$first" "$rounds" ${NETWORKS:-main deep} <<'PY'
import json, statistics, sys
out, first, rounds, networks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]
print(f"{'network':8} {'round':5} {'scratch acc':>11} {'T [s]':>7} {'grown acc':>9} "
      f"{'grown [s]':>9} {'to reach A / T':>14} {'acc at T':>8} {'depths':>12}")
for net in networks:
    reach, at_t, final_gap = [], [], []
    for r in range(first, first + rounds):
        s = load(f"{out}/{net}-{r}-scratch.jsonl")
        g = load(f"{out}/{net}-{r}-grown.jsonl")
        a, t = s[-1]["test_accuracy"], sum(e["epoch_seconds"] for e in s)
        elapsed, reached, acc_at_t = 0.0, None, None
        for e in g:
            elapsed += e["epoch_seconds"]
            if reached is None and e["test_accuracy"] >= a:
                reached = elapsed
            if elapsed <= t:
                acc_at_t = e["test_accuracy"]
        ratio = reached / t if reached is not None else float("nan")
        reach.append(ratio)
        at_t.append(acc_at_t)
        final_gap.append(g[-1]["test_accuracy"] - a)
        depths = ",".join(str(e.get("depth")) for e in g)
        print(f"{net:8} {r:5} {100 * a:10.2f}% {t:7.1f} {100 * g[-1]['test_accuracy']:8.2f}% "
              f"{elapsed:9.1f} {ratio:14.2f} {100 * acc_at_t:7.2f}% {depths:>12}")
    finite = [x for x in reach if x == x]
    # Over every round, a round that never reached A counting as never (infinite time).
    overall = statistics.median(x if x == x else float("inf") for x in reach)
    print(f"{net:8} median: time to reach the scratch accuracy / scratch time "
          f"{statistics.median(finite) if finite else float('nan'):.2f} "
          f"(reached in {len(finite)} of {rounds} rounds; over all rounds, a miss counting as "
          f"never: {overall:.2f}); final accuracy grown - scratch "
          f"{100 * statistics.median(final_gap):+.2f} points")
PY
