#!/usr/bin/env bash
# Short `weft` runs under AddressSanitizer and UndefinedBehaviorSanitizer, one per path through
# the training program that the library tests reach only in part: data replicas with automatic
# iterations and their checks' reductions, the recurrent models, MG/Opt, growth in depth with a
# checkpoint and its resume, a trace and its replay, predict, spatial coarsening, the serial
# reference. Each must exit 0 with no sanitizer report (abort_on_error turns one into a
# non-zero exit). Usage: scripts/sanitized-cli-runs.sh BUILD_DIR (built with the sanitizers;
# called by scripts/sanitize-and-fuzz.sh after its targets weft and weft-nn).
set -euo pipefail
[[ $# == 1 && -x $1/apps/weft/weft ]] || {
  echo "usage: scripts/sanitized-cli-runs.sh BUILD_DIR (a build with BUILD_DIR/apps/weft/weft)" >&2
  exit 2
}
weft=$(realpath "$1/apps/weft/weft")  # BUILD_DIR as given, from where the script was called
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
small=(--train-size 200 --test-size 100 --no-progress --threads 1 --epochs 1)

run() {
  local name=$1 ranks=$2
  shift 2
  local start=$SECONDS
  if ! timeout 600 mpirun -np "$ranks" --oversubscribe "$weft" "$@" > "$work/$name.log" 2>&1; then
    echo "sanitized-cli-runs: '$name' failed (weft $*):" >&2
    grep -m 3 -A 12 "ERROR: AddressSanitizer\|runtime error" "$work/$name.log" >&2 ||
      tail -40 "$work/$name.log" >&2
    exit 1
  fi
  echo "sanitized $name, mpirun -np $ranks: ok, $((SECONDS - start)) s"
}

run replicas-auto 4 train --model stages "${small[@]}" --data-ranks 2 --fwd-iters auto \
  --bwd-iters auto --auto-check 3 --auto-diagnostics 1
run gru-auto 2 train --model gru "${small[@]}" --fwd-levels 2 --bwd-levels 2 --fwd-iters auto \
  --bwd-iters auto --auto-check 3
run lstm-replicas 4 train --model lstm "${small[@]}" --data-ranks 2 --fwd-levels 2 \
  --bwd-levels 2 --eval-forward both
run mgopt 2 train --model stages "${small[@]}" --stage-steps 4,4,4 --mgopt 2
run grow 3 train --model stages "${small[@]}" --stage-steps 4,4,4 --grow-depth 2,1 \
  --grow-epochs 1 --checkpoint "$work/checkpoint"
run resume 3 train --resume "$work/checkpoint" --epochs 3 --train-size 200 --test-size 100 \
  --no-progress --threads 1
run trace 3 train --model resnet "${small[@]}" --steps 12 --fwd-levels 2 --bwd-levels 2 \
  --trace "$work/trace.json" --trace-batches 2
run replay 1 replay "$work/trace.json" --json "$work/replay.json"
run predict 1 predict --model resnet --steps 12 --fwd-levels 2 --bwd-levels 2 --ranks 1,2
run spatial 2 train --model conv3d --data shapes3d --train-size 20 --test-size 10 --batch 10 \
  --no-progress --threads 1 --epochs 1 --fwd-levels 2 --bwd-levels 2 --spatial-levels 0,1
run serial 1 train --model stages "${small[@]}" --serial
echo "sanitized cli runs: clean"
