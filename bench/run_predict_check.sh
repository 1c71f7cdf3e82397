#!/usr/bin/env bash
# `weft predict` against `weft train --metrics`: predicted and measured time per batch at 1 and
# 2 ranks, and their ratio (goal: within 15 %). Measured is the metrics' batch_ms, the wall time
# per batch. The phases (forward / backward / optimizer) are printed as both count them:
# measured, each phase's slowest rank (at 2 ranks they overlap: a chain's waiting counts in
# both), predicted, the batch split where the slowest rank ends each phase.
# The speed of this shared machine drifts by tens of percent over seconds, so predictions and
# measurements alternate, ROUNDS times per rank count (default 3), and the ratio of their
# medians is the result; each round's figures are printed too.
# Build first (bash scripts/build.sh). Extra arguments are network and MGRIT flags given to
# both, e.g. --fwd-levels 2 --bwd-levels 2 or --model stages. Both run with one torch thread
# per rank, so a rank is one core as the prediction assumes; other jobs on the machine inflate
# both (note the load when recording figures).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
WEFT=build/apps/weft/weft
TRAIN_SIZE=${TRAIN_SIZE:-2000}
ROUNDS=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); flags: $*"
for np in 1 2; do
  for round in $(seq "$ROUNDS"); do
    # Predicted on 2 ranks (for the ping-pong; rank 0 measures alone), then measured.
    mpirun -np 2 "$WEFT" predict --threads 1 --ranks "$np" --json "$out/p$np.$round.json" "$@" \
      >/dev/null
    mpirun -np "$np" "$WEFT" train --threads 1 --epochs 1 --train-size "$TRAIN_SIZE" \
      --test-size 100 --no-progress --metrics "$out/m$np.$round.json" "$@" >/dev/null
  done
done
/usr/bin/python3 - "$out" "$ROUNDS" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print(f"{'ranks':>5}  {'round':>5}  {'predicted_ms':>12}  {'measured_ms':>11}  {'ratio':>6}  "
      "forward / backward / optimizer ms, predicted | measured")
for np_ in (1, 2):
    pred, meas = [], []
    for r in range(1, rounds + 1):
        p = json.load(open(os.path.join(out, f"p{np_}.{r}.json")))
        q = next(q for q in p["predictions"] if q["ranks"] == np_)
        m = json.loads(open(os.path.join(out, f"m{np_}.{r}.json")).read().splitlines()[-1])
        pred.append(q["batch_ms"])
        meas.append(m["batch_ms"])
        print(f"{np_:5d}  {r:5d}  {q['batch_ms']:12.2f}  {m['batch_ms']:11.2f}  "
              f"{q['batch_ms'] / m['batch_ms']:6.3f}  "
              f"{q['forward_ms']:.1f} / {q['backward_ms']:.1f} / {q['optimizer_ms']:.1f} | "
              f"{m['forward_ms']:.1f} / {m['backward_ms']:.1f} / {m['optimizer_ms']:.1f}")
    mp, mm = statistics.median(pred), statistics.median(meas)
    print(f"{np_:5d}  {'med':>5}  {mp:12.2f}  {mm:11.2f}  {mp / mm:6.3f}"
          f"{'  within 15 %' if abs(mp / mm - 1) <= 0.15 else '  OUTSIDE 15 %'}")
last = json.load(open(os.path.join(out, f"p2.{rounds}.json")))
print("serial LibTorch (predict, last round): %.2f ms; latency %.2f us, bandwidth %.2f GB/s"
      % (last["serial_batch_ms"], last["latency_us"], last["bandwidth_gbs"]))
PY
