#!/usr/bin/env bash
# Installs the dependencies, builds weft and runs its main job: layer-parallel training on
# Fashion-MNIST at 2 ranks: the multi-stage batch-norm network with its recipe (multilevel MGRIT
# both ways, README). Extra arguments go to weft train.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
WEFT_BUILD_TARGET=weft bash scripts/build.sh  # the tool alone; the tests command builds the rest
source scripts/mpi-env.sh
mpirun -np 2 build/apps/weft/weft train --model stages "$@"
