#!/usr/bin/env bash
# Two builds of `weft` on one training configuration, run alternately (A, B, A, B, ...) so that a
# slow phase of a shared machine hits both; prints per-batch medians of each phase, the epoch's
# wall time per batch, and B/A with the ratio of every pair. The default configuration is the
# overhead-bound one of issue 24 (item 7): 1 channel, 64 steps, batch 8, 3 levels cf 4, 2 forward
# and 1 adjoint iterations, SGD. Use it to tell a per-step regression from noise, e.g. against
# the build of an older commit:
#   git worktree add /tmp/old <commit> && (cd /tmp/old && bash scripts/build.sh)
#   bash bench/run_build_ab.sh /tmp/old/build/apps/weft/weft build/apps/weft/weft
# Environment: ROUNDS (default 6), NP ranks (default 1), TRAIN (training images, default 1600),
# NETWORK (the network and MGRIT flags instead of the default's, with --batch); extra arguments
# after the two programs go to `weft train` (flags the configuration does not already give).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
if [[ $# -lt 2 ]]; then
  echo "usage: $0 WEFT_A WEFT_B [weft train options...]" >&2
  exit 2
fi
a=$1
b=$2
shift 2
rounds=${ROUNDS:-6}
train=${TRAIN:-1600}
# NETWORK replaces the default network and MGRIT flags (it must give --batch).
network=${NETWORK:---open copy --channels 1 --steps 64 --batch 8 --fwd-levels 3 --fwd-cf 4 \
--bwd-levels 3 --bwd-cf 4 --fwd-iters 2 --bwd-iters 1 --optimizer sgd}
batch=$(sed -E 's/.*--batch ([0-9]+).*/\1/' <<< "$network")
# shellcheck disable=SC2206  # the flags are words
config=($network --threads 1 --train-size "$train" --test-size 100 --epochs 1 --seed 1 "$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for r in $(seq "$rounds"); do
  for side in A B; do
    program=$a
    [[ $side == B ]] && program=$b
    mpirun -np "${NP:-1}" "$program" train "${config[@]}" --metrics "$work/$side-$r.json" \
      > /dev/null
  done
done
/usr/bin/python3 - "$work" "$rounds" "$((train / batch))" <<'PY'
import json, statistics, sys
work, rounds, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def row(side, r):
    m = json.load(open(f"{work}/{side}-{r}.json"))
    return {"forward": m["forward_ms"], "backward": m["backward_ms"],
            "optimizer": m["optimizer_ms"],
            "forward+backward+optimizer": m["forward_ms"] + m["backward_ms"] + m["optimizer_ms"],
            "epoch wall / batches": 1000 * m["epoch_seconds"] / batches}
runs = {s: [row(s, r) for r in range(1, rounds + 1)] for s in "AB"}
print(f"medians of {rounds} alternating runs, ms per batch ({batches} batches each)")
print(f"{'':28s} {'A':>9s} {'B':>9s} {'B/A':>7s}  B/A per pair")
for key in runs["A"][0]:
    a = statistics.median(x[key] for x in runs["A"])
    b = statistics.median(x[key] for x in runs["B"])
    pairs = " ".join(f"{y[key] / x[key]:.3f}" for x, y in zip(runs["A"], runs["B"]))
    print(f"{key:28s} {a:9.2f} {b:9.2f} {b / a:7.3f}  {pairs}")
PY
