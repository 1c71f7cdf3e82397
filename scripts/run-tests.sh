#!/usr/bin/env bash
# Installs the dependencies, builds weft and runs the whole test suite, then the sanitizer and
# fuzzing checks (scripts/sanitize-and-fuzz.sh; WEFT_SKIP_SANITIZERS=1 leaves them out).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Everything install-deps.sh installs must be found: a missing part fails, never skips.
bash scripts/build.sh -DWEFT_REQUIRE_ALL=ON
source scripts/mpi-env.sh
cd build
ctest --output-on-failure --timeout 600 -j 2
cd ..
if [[ "${WEFT_SKIP_SANITIZERS:-0}" != 1 ]]; then
  bash scripts/sanitize-and-fuzz.sh
fi
