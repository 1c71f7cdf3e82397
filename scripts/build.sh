#!/usr/bin/env bash
# Configures and builds weft into ./build (warnings are errors, as in CI). WEFT_BUILD_TARGET
# builds only that target (and what it needs), e.g. `weft` for the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
# Paths under the checkout are hashed relative to it, so clones in other folders share ccache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWEFT_WERROR=ON -DWEFT_WITH_TORCH=ON "$@"
cmake --build build -j "$(nproc)" ${WEFT_BUILD_TARGET:+--target "$WEFT_BUILD_TARGET"}
