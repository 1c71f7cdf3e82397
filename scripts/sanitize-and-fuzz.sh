#!/usr/bin/env bash
# Builds weft with clang, AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's coverage
# instrumentation into ./build-sanitize, runs every library test program under them (util,
# mgrit, data, nn, models, the Trainer: each test program registered with weft_add_test, at all
# its rank counts), then runs each libFuzzer harness (fuzz/) for
# WEFT_FUZZ_SECONDS (default 60) from its seed corpus in fuzz/corpus, and short sanitized `weft`
# runs, one per path through the training program (scripts/sanitized-cli-runs.sh). Any sanitizer
# report, test failure or fuzzer crash fails the script. Not covered here: the end-to-end tests
# of the `weft` programs (tests/cli, tests/train: sanitized they would not fit CI's time; the
# short runs stand for them) and the Python module's tests.
# Called by scripts/run-tests.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-sanitize
seconds=${WEFT_FUZZ_SECONDS:-60}
tests=(weft_util_test weft_agree_test weft_mgrit_test weft_solver_test weft_pymgrit_semantics_test
       weft_schedule_test weft_app_check_test weft_step_map_test weft_reference_test weft_catalogue_test weft_data_test
       weft_breadth_problems_test weft_breadth_gradient_test weft_breadth_petsc_test weft_nn_test
       weft_nn_stages_test weft_nn_spatial_test weft_nn_recurrent_test weft_nn_depth_test
       weft_nn_predict_schedule_test weft_models_stages_net_test
       weft_models_sequence_classifier_test weft_trainer_test)
fuzzers=(idx cifar image checkpoint)
# A test program added to the suite must be added here too (or the comment above must say why).
registered=$(grep -ho 'weft_add_test(NAME [a-z0-9_]*' tests/*/CMakeLists.txt | awk '{print $2}' | sort)
if [[ "$registered" != "$(printf '%s\n' "${tests[@]}" | sort)" ]]; then
  echo "sanitize-and-fuzz.sh: its test list differs from the weft_add_test programs:" >&2
  diff <(printf '%s\n' "${tests[@]}" | sort) <(echo "$registered") >&2 || true
  exit 1
fi

CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_WITH_TORCH=ON -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_FUZZ=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fsanitize=fuzzer-no-link" \
  > /dev/null
targets=("${tests[@]}")
for f in "${fuzzers[@]}"; do targets+=("weft_fuzz_$f"); done
targets+=(weft weft-nn)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

source scripts/mpi-env.sh
# Open MPI keeps its allocations until exit: leaks are not what these runs look for.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
pattern=$(IFS='|'; echo "${tests[*]}")
(cd "$build" && ctest --output-on-failure --timeout 900 -j 2 -R "^(${pattern})_np")

for f in "${fuzzers[@]}"; do
  corpus="$build/corpus-$f"  # new inputs go here; the seeds in the tree stay as they are
  mkdir -p "$corpus"
  echo "fuzzing $f for ${seconds} s"
  "$build/fuzz/weft_fuzz_$f" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 \
    -print_final_stats=1 "$corpus" "fuzz/corpus/$f"
done
bash scripts/sanitized-cli-runs.sh "$build"
echo "sanitizers and fuzzing: clean"
