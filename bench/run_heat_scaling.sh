#!/usr/bin/env bash
# Heat-equation strong scaling in space and time at 1, 2 and 4 ranks (bench/heat_scaling.cpp);
# 4 ranks are oversubscribed on a 2-core machine, so read the work counts there, not the times.
# Build first (bash scripts/build.sh); BUILD_DIR selects another build tree (default: build).
# Extra arguments go to the harness, e.g. --nx 65 --nt 512 --ksp lu --reps 5.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
build="${BUILD_DIR:-build}"
exe="$build/bench/heat_scaling"
if [[ ! -x "$exe" ]]; then
  echo "run_heat_scaling.sh: $exe not found; build first (bash scripts/build.sh)" >&2
  exit 2
fi
for np in 1 2 4; do
  mpirun -np "$np" "$exe" "$@"
  echo
done
