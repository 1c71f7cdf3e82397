#!/usr/bin/env bash
# Installs the dependencies, builds weft and runs its main job on the default data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
source scripts/mpi-env.sh
mpirun -np 2 build/apps/weft/weft mgrit "$@"
