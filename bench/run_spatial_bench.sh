#!/usr/bin/env bash
# Spatial coarsening: step evaluations and cost per evaluation per level, the MGRIT-to-serial
# work ratio with and without spatial coarsening, gradient errors (see
# bench/spatial_work_bench.cpp). Build first (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
mpirun -np 1 build/bench/spatial_work_bench "$@"
