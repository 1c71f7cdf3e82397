#!/usr/bin/env bash
# What the evaluation after each epoch costs and what it reports, by its forward
# (`weft train --eval-forward`, docs/training.md §4a): plain LibTorch on one rank (--serial),
# the exact forward pipelined over NP ranks (exact), and the training's MGRIT forward in
# evaluation mode (mgrit). Each round runs the three alternately: one epoch of TRAIN_SIZE
# images, then the evaluation of TEST_SIZE test images. Prints the medians of `eval_seconds`
# (the evaluation alone) over ROUNDS rounds, their ratios, and the train loss, test loss and
# accuracy of each. exact and mgrit train alike (the same MGRIT training; their train losses
# agree), so their test figures differ by the evaluation's forward alone; serial trains with
# exact gradients. `weft eval` of the exact run's checkpoint at one rank (the sequential
# network) must give the exact run's test loss to round-off.
#
# The pipeline's bound: with M pieces over P ranks, each rank computes its share of every piece
# and the last piece leaves rank 0 after M of them, so the exact evaluation takes at least
# (M + P - 1) / (M P) of the serial one, plus the messages.
#
# Environment: FLAGS (the network and MGRIT flags; default the main job's, `--model stages`),
# NP (2), ROUNDS (3), TRAIN_SIZE (500), TEST_SIZE (10000), DATA (passed as --data when set),
# WEFT (the weft binary, default build/apps/weft/weft). Build first (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
weft=${WEFT:-build/apps/weft/weft}
flags=${FLAGS:---model stages}
np=${NP:-2}
rounds=${ROUNDS:-3}
data=()
[[ -n ${DATA:-} ]] && data=(--data "$DATA")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "evaluation forward: $flags; $np rank(s), $rounds alternating rounds," \
  "${TRAIN_SIZE:-500} training / ${TEST_SIZE:-10000} test images"
for r in $(seq "$rounds"); do
  for side in serial exact mgrit; do
    case $side in
      serial) run=(mpirun -np 1 "$weft" train --serial) ;;
      exact) run=(mpirun -np "$np" "$weft" train --eval-forward exact --checkpoint "$work/ck-$r") ;;
      mgrit) run=(mpirun -np "$np" "$weft" train --eval-forward mgrit) ;;
    esac
    # shellcheck disable=SC2086
    "${run[@]}" $flags "${data[@]}" --threads 1 --train-size "${TRAIN_SIZE:-500}" \
      --test-size "${TEST_SIZE:-10000}" --epochs 1 --seed 1 --no-progress \
      --metrics "$work/$side-$r.json" > /dev/null
  done
done
mpirun -np 1 "$weft" eval --resume "$work/ck-1" "${data[@]}" --test-size "${TEST_SIZE:-10000}" \
  --threads 1 --json "$work/eval.json" > /dev/null
/usr/bin/python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
runs = {s: [json.load(open(f"{work}/{s}-{r}.json")) for r in range(1, rounds + 1)]
        for s in ("serial", "exact", "mgrit")}
sec = {s: statistics.median(m["eval_seconds"] for m in runs[s]) for s in runs}
for s in ("serial", "exact", "mgrit"):
    m = runs[s][0]
    rounds_text = " ".join(f"{x['eval_seconds']:.2f}" for x in runs[s])
    print(f"  {s:6s} eval_seconds median {sec[s]:7.2f} ({rounds_text})  over serial "
          f"{sec[s] / sec['serial']:.3f}  train loss {m['train_loss']:.6f}  test loss "
          f"{m['test_loss']:.6f} accuracy {m['test_accuracy']:.4f}")
stored = json.load(open(f"{work}/eval.json"))
print(f"  exact / mgrit {sec['exact'] / sec['mgrit']:.3f}; weft eval of the exact run's "
      f"checkpoint at 1 rank: test loss {stored['test_loss']:.6f} (exact run "
      f"{stored['test_loss'] - runs['exact'][0]['test_loss']:+.1e}, mgrit run "
      f"{stored['test_loss'] - runs['mgrit'][0]['test_loss']:+.1e})")
PY
