#!/usr/bin/env bash
# The solver's own cost at 1 and 2 ranks (see bench/mgrit_overhead.cpp). Build first
# (bash scripts/build.sh); extra arguments go to the harness, e.g. --work 200.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
for np in 1 2; do
  mpirun -np "$np" build/bench/mgrit_overhead "$@"
done
