#!/usr/bin/env bash
# What `weft train --trace` costs per batch: the same run without and with a trace of every batch
# after the first two, alternating (off, on, off, on, ...) so that a slow phase of the machine
# hits both; medians of batch_ms (the wall time of a training-loop iteration) and their ratio.
# Goal (issue 25): under 3 %. Two networks: the overhead-bound tiny one (1 channel, 64 steps,
# batch 8, 3 levels cf 4: the most events per millisecond) and the default ResNet (4 channels,
# 16 steps, batch 50, 2 levels cf 4). Build first (scripts/build.sh).
# Environment: ROUNDS (default 5), NP ranks (default 1), TRAIN images (default 800), ONLY (one
# network's name: tiny or resnet).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
rounds=${ROUNDS:-5}
train=${TRAIN:-800}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
configs=(
  "tiny|--open copy --channels 1 --steps 64 --batch 8 --fwd-levels 3 --fwd-cf 4 --bwd-levels 3 --bwd-cf 4 --fwd-iters 2 --bwd-iters 1 --optimizer sgd"
  "resnet|--channels 4 --steps 16 --batch 50 --fwd-levels 2 --fwd-cf 4 --bwd-levels 2 --bwd-cf 4"
)
echo "weft train --trace overhead: ${NP:-1} rank(s), $rounds alternating rounds, $train images"
for entry in "${configs[@]}"; do
  name=${entry%%|*}
  flags=${entry#*|}
  [[ -n ${ONLY:-} && $ONLY != "$name" ]] && continue
  for r in $(seq "$rounds"); do
    for side in off on; do
      extra=()
      [[ $side == on ]] && extra=(--trace "$work/trace.json" --trace-batches 100000)
      # shellcheck disable=SC2086
      mpirun -np "${NP:-1}" build/apps/weft/weft train $flags --threads 1 --train-size "$train" \
        --test-size 10 --epochs 1 --seed 1 --no-progress --metrics "$work/$name-$side-$r.json" \
        "${extra[@]}" > /dev/null
    done
  done
  /usr/bin/python3 - "$work" "$name" "$rounds" <<'PY'
import json, statistics, sys
work, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
ms = {s: [json.load(open(f"{work}/{name}-{s}-{r}.json"))["batch_ms"] for r in range(1, rounds + 1)]
      for s in ("off", "on")}
off, on = statistics.median(ms["off"]), statistics.median(ms["on"])
pairs = " ".join(f"{b / a:.3f}" for a, b in zip(ms["off"], ms["on"]))
verdict = "met" if on / off < 1.03 else "MISSED"
print(f"  {name:8s} batch_ms off {off:8.2f}  on {on:8.2f}  on/off {on / off:.3f} "
      f"(pairs {pairs})  goal < 1.03: {verdict}")
PY
done
