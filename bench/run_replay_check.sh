#!/usr/bin/env bash
# `weft predict` against the critical-path replay of traced `weft train` runs (docs/tracing.md,
# docs/scaling.md): for each network and each rank count P, the predicted time per batch and the
# replayed one, medians over ROUNDS alternating rounds, and their ratio.
#
# Runs at P > 2 ranks share this machine's cores (--oversubscribe; waiting ranks yield), so the
# replay prices every event by its own CPU time, not by the wall time that includes waiting for
# a core. What that CPU time still carries is contention: two busy vCPUs of one physical core
# slow each other. The script measures it in the same run: the replayed 1-rank batch with a
# second copy of the run going at once, over the replayed 1-rank batch alone (the "contention"
# column), and divides the replays at P >= 2 by it ("replayed, uncontended") before comparing
# with predict, which measures its costs on one rank alone.
#
# Environment: NETWORKS (default "resnet deep stages gru"), RANKS (default "1 2 4 8 16"),
# ROUNDS (default 2), BATCHES traced per run (default 4). Build first (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
weft=build/apps/weft/weft
rounds=${ROUNDS:-2}
traced=${BATCHES:-4}
networks=${NETWORKS:-resnet deep stages gru}
ranks_list=${RANKS:-1 2 4 8 16}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

flags_of() {  # the network and MGRIT flags of one named configuration
  case $1 in
    resnet) echo "--channels 4 --steps 16 --batch 50 --fwd-levels 2 --bwd-levels 2 --fwd-cf 4 --bwd-cf 4" ;;
    deep) echo "--channels 2 --steps 128 --batch 20 --fwd-levels 3 --bwd-levels 3 --fwd-cf 4 --bwd-cf 4" ;;
    stages) echo "--model stages --batch 50" ;;
    gru) echo "--model gru --batch 50 --fwd-levels 2 --bwd-levels 2 --fwd-cf 4 --bwd-cf 4" ;;
    *) echo "unknown network $1" >&2; exit 2 ;;
  esac
}
batch_of() { flags_of "$1" | sed -E 's/.*--batch ([0-9]+).*/\1/'; }

# Replayed median batch of a traced run at $2 ranks; $3: "busy" runs a second copy at once.
replayed() {
  local name=$1 np=$2 mode=$3 tag=$4 flags images
  flags=$(flags_of "$name")
  images=$(($(batch_of "$name") * (traced + 3)))
  local args="train $flags --threads 1 --train-size $images --test-size 10 --epochs 1 --no-progress"
  if [[ $mode == busy ]]; then
    mpirun -np 1 $weft $args > /dev/null &
    local other=$!
  fi
  mpirun -np "$np" $weft $args --trace "$work/$tag.trace" --trace-batches "$traced" > /dev/null
  [[ $mode == busy ]] && wait "$other"
  $weft replay "$work/$tag.trace" --json "$work/$tag.replay" > /dev/null
  /usr/bin/python3 -c "import json; print(json.load(open('$work/$tag.replay'))['median_batch_ms'])"
}

predicted() {
  local name=$1 np=$2 tag=$3
  mpirun -np 1 $weft predict $(flags_of "$name") --threads 1 --ranks "$np" --repeats 3 \
    --json "$work/$tag.predict" > /dev/null
  /usr/bin/python3 -c "import json; print(json.load(open('$work/$tag.predict'))['predictions'][0]['batch_ms'])"
}

echo "weft predict against the replay of traced runs ($(nproc) cores here; $rounds rounds, $traced traced batches per run)"
for name in $networks; do
  echo "$name: $(flags_of "$name")"
  alone=() busy=()
  for r in $(seq "$rounds"); do
    alone+=("$(replayed "$name" 1 alone "$name-alone-$r")")
    busy+=("$(replayed "$name" 1 busy "$name-busy-$r")")
  done
  for np in $ranks_list; do
    pred=() rep=()
    for r in $(seq "$rounds"); do
      pred+=("$(predicted "$name" "$np" "$name-$np-$r")")
      rep+=("$(replayed "$name" "$np" alone "$name-$np-$r")")
    done
    /usr/bin/python3 - "$np" "${alone[*]}" "${busy[*]}" "${pred[*]}" "${rep[*]}" <<'PY'
import statistics, sys
np = int(sys.argv[1])
alone, busy, pred, rep = ([float(x) for x in a.split()] for a in sys.argv[2:6])
contention = statistics.median(busy) / statistics.median(alone)
p, r = statistics.median(pred), statistics.median(rep)
r_clean = r / contention if np >= 2 else r
print(f"  P={np:3d}  predicted {p:9.2f} ms  replayed {r:9.2f} ms  contention {contention:.2f}  "
      f"replayed, uncontended {r_clean:9.2f} ms  predicted/replayed {p / r_clean:.3f}")
PY
  done
done
