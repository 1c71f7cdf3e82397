#!/usr/bin/env bash
# Installs the dependencies, builds weft and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
source scripts/mpi-env.sh
cd build
ctest --output-on-failure --timeout 600 -j 2
