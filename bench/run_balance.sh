#!/usr/bin/env bash
# Layers placed by cost against equal numbers in `weft train` itself: the same training with
# --balance layers and --balance cost, alternating, ROUNDS rounds, at RANKS ranks; per run the
# metrics' batch_ms (the epoch's time per batch), per network the medians and the ratio
# equal / cost of the same rounds. Networks: stages (the README main job's network, 2000
# images, 1 epoch) and conv3d (docs/scaling.md's 130-layer 3-D network: 32^3 shapes, channels
# 8,16,32, steps 43,43,42, batch 4, 3 levels, spatial levels 0,1,1; 24 volumes, 1 epoch).
# Usage: bash bench/run_balance.sh [ROUNDS] (default 2); RANKS (2), NETWORKS ("stages conv3d"),
# BUILD_DIR (build). On a machine with fewer cores than RANKS the ranks share cores.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
rounds=${1:-2}
ranks=${RANKS:-2}
build=${BUILD_DIR:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A flags
flags[stages]="--model stages --train-size 2000 --test-size 500"
flags[conv3d]="--model conv3d --data shapes3d --stage-channels 8,16,32 --stage-steps 43,43,42
  --batch 4 --fwd-levels 3 --bwd-levels 3 --spatial-levels 0,1,1 --train-size 24 --test-size 8"
# shellcheck disable=SC2206  # the names are words
networks=(${NETWORKS:-stages conv3d})
for network in "${networks[@]}"; do
  [ -n "${flags[$network]:-}" ] || { echo "run_balance.sh: unknown network '$network'" >&2; exit 2; }
done
for network in "${networks[@]}"; do
  for ((round = 1; round <= rounds; ++round)); do
    for balance in layers cost; do
      # shellcheck disable=SC2086
      mpirun --oversubscribe --bind-to none -np "$ranks" "$build/apps/weft/weft" train \
        --no-progress --threads 1 --epochs 1 ${flags[$network]} --balance "$balance" \
        --metrics "$out/$network-$balance-$round.jsonl" | grep "layers per rank" | sed "s/^ */$network round $round: /"
    done
  done
done
/usr/bin/python3 - "$out" "$rounds" "${networks[@]}" <<'PY'
import json, statistics, sys
out, rounds, networks = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
print(f"{'network':8} {'round':>5} {'layers ms/batch':>16} {'cost ms/batch':>14} {'layers / cost':>14}")
for n in networks:
    ratios, eq, co = [], [], []
    for r in range(1, rounds + 1):
        e = json.loads(open(f"{out}/{n}-layers-{r}.jsonl").read().splitlines()[-1])["batch_ms"]
        c = json.loads(open(f"{out}/{n}-cost-{r}.jsonl").read().splitlines()[-1])["batch_ms"]
        eq.append(e); co.append(c); ratios.append(e / c)
        print(f"{n:8} {r:5d} {e:16.1f} {c:14.1f} {e / c:14.3f}")
    print(f"{n:8} median {statistics.median(eq):15.1f} {statistics.median(co):14.1f} "
          f"{statistics.median(ratios):14.3f}")
PY
