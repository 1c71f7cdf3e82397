#!/usr/bin/env bash
# On the 16-core machine (device tool): unpack the runtime of make_bundle.sh, say what the machine
# is, check that a 2-rank run works, then bench/run_replay_check.sh at 1-16 ranks, a core per rank
# (NETWORKS, default "resnet deep stages gru weak"; add conv3d for the 3-D network).
# Everything goes to $OUT (replay.txt, machine.txt, the series files).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
tar -C /tmp -xJf .device-rt/rt.tar.xz || exit 1
{ date -u; nproc; lscpu | grep -E 'Model name|Socket|Core|Thread|NUMA|MHz|L3'; ldd --version | head -1
  grep PRETTY /etc/os-release; free -g | head -2; } > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
source /tmp/rt/env.sh
export WEFT=/tmp/rt/bin/weft DATA=/tmp/rt/data PYTHON=$(command -v python3)
mpirun -np 2 weft train --data "$DATA" --channels 2 --steps 4 --train-size 100 --test-size 50 \
  --epochs 1 --threads 1 --no-progress > "$out/smoke.txt" 2>&1
rc=$?; tail -3 "$out/smoke.txt"; [[ $rc == 0 ]] || exit 1
# NETWORKS=conv3d: the 520-layer 3-D network on 16^3 volumes (docs/scaling.md, "The 520-layer
# network replayed"), generated here; 125 GiB fit its 15 contention copies (COPIES_MAX unset).
weft data shapes3d --out /tmp/shapes16 --size 16 --train-size 200 --test-size 50 > /dev/null
export CONV3D_DATA=/tmp/shapes16
start=$(date +%s)
timeout "${LIMIT:-520}" env NETWORKS="${NETWORKS:-resnet deep stages gru weak}" \
  RANKS="${RANKS:-1 2 4 8 16}" ROUNDS="${ROUNDS:-2}" OUT="$out" \
  bash bench/run_replay_check.sh 2>&1 | tee "$out/replay.txt"
echo "replay check: $(($(date +%s) - start)) s" | tee -a "$out/replay.txt"
