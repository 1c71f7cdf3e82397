#!/usr/bin/env bash
# `weft predict` against `weft train --metrics`: predicted and measured time per batch at 1 and
# 2 ranks, and their ratio (goal: within 15 %). Measured is the metrics' batch_ms, the wall time
# per batch; the sum of the phases' slowest ranks (forward_ms + backward_ms + optimizer_ms) is
# printed too, but at 2 ranks it counts a chain's waiting twice (each phase's slowest rank
# waits for the other's work). Build first (bash scripts/build.sh). Extra arguments are network
# and MGRIT flags given to both, e.g. --fwd-levels 2 --bwd-levels 2 or --model stages.
# Both run with one torch thread per rank, so a rank is one core as the prediction assumes;
# other jobs on the machine inflate both (note the load when recording figures).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
WEFT=build/apps/weft/weft
TRAIN_SIZE=${TRAIN_SIZE:-2000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%6s  %14s  %14s  %8s  %16s\n' ranks predicted_ms measured_ms ratio phase_maxima_ms
for np in 1 2; do
  # Predicted right before the measurement (the load moves); on 2 ranks for the ping-pong.
  mpirun -np 2 "$WEFT" predict --threads 1 --repeats 11 --ranks "$np" \
    --json "$out/predict.json" "$@" >/dev/null
  rm -f "$out/m$np.json"
  mpirun -np "$np" "$WEFT" train --threads 1 --epochs 1 --train-size "$TRAIN_SIZE" \
    --test-size 100 --no-progress --metrics "$out/m$np.json" "$@" >/dev/null
  /usr/bin/python3 - "$out/predict.json" "$out/m$np.json" "$np" <<'PY'
import json, sys
pred = json.load(open(sys.argv[1]))
m = json.loads(open(sys.argv[2]).read().splitlines()[-1])
np_ = int(sys.argv[3])
p = next(q["batch_ms"] for q in pred["predictions"] if q["ranks"] == np_)
measured = m["batch_ms"]
phases = m["forward_ms"] + m["backward_ms"] + m["optimizer_ms"]
print(f"{np_:6d}  {p:14.2f}  {measured:14.2f}  {p / measured:8.3f}  {phases:16.2f}")
PY
done
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('serial LibTorch (predict, measured here): %.2f ms; latency %.2f us, bandwidth %.2f GB/s' % (d['serial_batch_ms'], d['latency_us'], d['bandwidth_gbs']))" "$out/predict.json"
