#!/usr/bin/env bash
# Configures and builds weft into ./build (warnings are errors, as in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWEFT_WERROR=ON -DWEFT_WITH_TORCH=ON "$@"
cmake --build build -j "$(nproc)"
