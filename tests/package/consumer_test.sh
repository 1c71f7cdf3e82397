#!/usr/bin/env bash
# The installed package as a downstream project sees it: installs this build tree into a fresh
# prefix, builds examples/ out of tree against it with find_package(weft REQUIRED), and runs the
# examples and the installed `weft` tool at 2 ranks.
#   consumer_test.sh <build dir> <examples source dir> <work dir> <mpiexec>
set -euo pipefail
build=$1 examples=$2 work=$3 mpiexec=$4
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/lib/cmake/weft/weftConfig.cmake"
test -f "$prefix/lib/cmake/weft/weftConfigVersion.cmake"
test -f "$prefix/include/weft/mgrit/solver.hpp"
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$examples" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" "${launcher[@]}" > "$work/configure.log"
cmake --build "$work/build" -j 2 > "$work/build.log"
run() { "$mpiexec" -q --oversubscribe -n 2 "$@"; }
run "$work/build/weft_example_dahlquist"
if [ -x "$work/build/weft_example_peaks" ]; then run "$work/build/weft_example_peaks"; fi
if [ -x "$work/build/weft_example_train" ] && [ -d /usr/share/datasets/fashion-mnist ]; then
  run "$work/build/weft_example_train" | grep -q "^epoch 2: "
fi
run "$prefix/bin/weft" mgrit --max-iter 2 | grep -q "converged    no"
echo "consumer build against $prefix: ok"
