#!/usr/bin/env bash
# Training batch time of weft (exact mode and MGRIT) against plain LibTorch, at 1 and 2 ranks
# (see bench/train_step_bench.cpp). Build first (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
for np in 1 2; do
  mpirun -np "$np" build/bench/train_step_bench "$@"
done
