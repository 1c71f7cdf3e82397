#!/usr/bin/env bash
# Start-up of the `weft` CLI: wall time of commands that do little work, median of N runs each
# (default 7), against the goals of issue 24: --help and a flag error under 0.3 s, a small
# `weft mgrit` at one rank under 0.5 s. Also how many shared libraries each of weft's programs
# loads (apps/weft/CMakeLists.txt: weft, weft-nn, weft-petsc). Build first (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
bin=build/apps/weft
runs=${RUNS:-7}

median_seconds() {  # runs "$@" $runs times, prints the median wall time in seconds
  local times=()
  for _ in $(seq "$runs"); do
    local start end
    start=$(date +%s.%N)
    "$@" > /dev/null 2>&1 || true
    end=$(date +%s.%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{v[NR] = $1} END {printf "%.3f", v[int((NR + 1) / 2)]}'
}

row() {  # goal, label, command...
  local goal=$1 label=$2
  shift 2
  local s
  s=$(median_seconds "$@")
  local verdict=""
  [[ $goal != - ]] && verdict=$(awk -v s="$s" -v g="$goal" 'BEGIN {print (s < g) ? "met" : "MISSED"}')
  printf '%-52s %8s s  goal %-5s %s\n' "$label" "$s" "$goal" "$verdict"
}

for p in weft weft-nn weft-petsc; do
  [[ -x $bin/$p ]] && printf '%-11s loads %3d shared libraries\n' "$p" "$(ldd "$bin/$p" | wc -l)"
done
echo "median of $runs runs each:"
row 0.3 "weft --help" "$bin/weft" --help
row 0.3 "weft --bogus (flag error)" "$bin/weft" --bogus
row 0.3 "weft mgrit --bogus (flag error)" "$bin/weft" mgrit --bogus
row 0.3 "weft train --bogus (flag error)" "$bin/weft" train --bogus
row 0.3 "weft train --help" "$bin/weft" train --help
row 0.5 "weft mgrit --problem dahlquist --nt 16 (1 rank)" "$bin/weft" mgrit --problem dahlquist --nt 16
row - "weft mgrit --problem heat2d --nx 9 --nt 16 (1 rank)" "$bin/weft" mgrit --problem heat2d --nx 9 --nt 16
# Values are checked where the command runs, after MPI (and for train LibTorch) started:
row - "weft mgrit --cf 1 (bad value)" "$bin/weft" mgrit --cf 1
row - "weft train --lr -1 (bad value)" "$bin/weft" train --lr -1
