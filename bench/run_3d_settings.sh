#!/usr/bin/env bash
# What MGRIT settings give the 3-D network's gradients, and what they reach in training.
# The network is docs/scaling.md's 260-layer conv3d (channels 8,16,32, steps 86,86,86, batch
# norm, batch 4) on the 32^3 shapes set; SETTINGS are names from the table below.
#   bash bench/run_3d_settings.sh gradient [SETTING...]
#     per setting: the relative error of all parameter gradients against exact mode, mean over
#     BATCHES batches from the initialisation (a run held at its counts with
#     --fwd-iters auto --auto-min F --auto-max F --auto-check 1, which only measures; see counts),
#     and the same over the chain layers' parameters alone (not the open and close layers);
#     with GRADIENT_EPOCHS=E, the last of E epochs of BATCHES batches each (E=2, BATCHES=10:
#     batches 11-20, after 10 steps with the exact gradient)
#   bash bench/run_3d_settings.sh train [SETTING...]
#     per setting, and plain LibTorch (--serial) first: TRAIN_SIZE volumes for EPOCHS epochs
#     (cosine schedule, seed SEED), test accuracy and train loss per epoch, seconds per batch, and
#     the gradient error at checks every CHECK batches (the checked batches step with the
#     exact gradient the check computed: 1 in CHECK); SERIAL=0 leaves out the --serial run,
#     SERIAL=only runs it alone (two invocations can then share the machine); with EVAL_SIZE
#     each trained network is then evaluated on that many test volumes (weft eval --batch 4)
# Environment: DATA (shapes3d: the 32^3 set; or a folder of `weft data shapes3d --size 16`),
# RANKS (2), BUILD_DIR (build), BATCHNORM (1), STEPS (86,86,86), BATCHES (2), GRADIENT_EPOCHS (1),
# SEED (1), TRAIN_SIZE (200), TEST_SIZE (64: weft train evaluates the test set in one batch of
# up to 500, whose states for 260 layers of 32^3 would not fit), EPOCHS (2), CHECK (25), OUT
# (keep the metrics and checkpoints there), EVAL_SIZE (0: none).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
mode=${1:-}
shift || true
build=${BUILD_DIR:-build}
ranks=${RANKS:-2}
declare -A setting  # name: "F B flags" (forward and adjoint iterations, then the levels)
setting[L3cf4sp]="2 1 --fwd-levels 3 --bwd-levels 3 --spatial-levels 0,1,1"
setting[L3cf4]="2 1 --fwd-levels 3 --bwd-levels 3"
setting[L3cf4f3]="3 1 --fwd-levels 3 --bwd-levels 3"
setting[L3cf4f1]="1 1 --fwd-levels 3 --bwd-levels 3"
setting[L3cf4b2]="2 2 --fwd-levels 3 --bwd-levels 3"
setting[L2cf4]="2 1 --fwd-levels 2 --bwd-levels 2"
setting[L2cf4sp]="2 1 --fwd-levels 2 --bwd-levels 2 --spatial-levels 0,1"
setting[L3cf4bsp]="2 1 --fwd-levels 3 --bwd-levels 3 --bwd-spatial-levels 0,1,1"  # adjoint only
setting[L3cf4bspf1]="1 1 --fwd-levels 3 --bwd-levels 3 --bwd-spatial-levels 0,1,1"  # 1 forward
setting[L3cf2]="2 1 --fwd-levels 3 --bwd-levels 3 --fwd-cf 2 --bwd-cf 2"
setting[L4cf2]="2 1 --fwd-levels 4 --bwd-levels 4 --fwd-cf 2 --bwd-cf 2"
setting[L4cf4]="2 1 --fwd-levels 4 --bwd-levels 4"
# The same with batch norm on the coarse spatial grids normalising by the restricted states' own
# statistics (as before --spatial-bn-stats running became the default)
for name in L3cf4sp L2cf4sp; do
  setting[${name}own]="${setting[$name]} --spatial-bn-stats own"
done
# The same with Galerkin coarse kernels (R K P) on the levels coarse in space
for name in L3cf4sp L3cf4bsp L3cf4bspf1; do
  setting[${name}gal]="${setting[$name]} --spatial-kernels galerkin"
done
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(L3cf4sp L3cf4 L2cf4 L3cf2)
for name in "${names[@]}"; do
  [ -n "${setting[$name]:-}" ] || {
    echo "run_3d_settings.sh: unknown setting '$name' (known: ${!setting[*]})" >&2
    exit 2
  }
done
out=${OUT:-}
if [ -z "$out" ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
data=${DATA:-shapes3d}
network=(--data "$data" --model conv3d --stage-channels 8,16,32 --stage-steps "${STEPS:-86,86,86}"
         --batchnorm "${BATCHNORM:-1}" --batch 4 --seed "${SEED:-1}" --no-progress --threads 1)
# The iteration counts F and B, held by the controller so that its checks measure the gradient
# error: through the forward's count, or through the adjoint's where F is below the forward's
# starting count (2), which --auto-max may not cut.
counts() {
  if [ "$1" -ge 2 ]; then
    echo "--fwd-iters auto --auto-min $1 --auto-max $1 --bwd-iters $2"
  else
    echo "--fwd-iters $1 --bwd-iters auto --auto-min $2 --auto-max $2"
  fi
}
weft() { mpirun --oversubscribe --bind-to none -np "$1" "$build/apps/weft/weft" train "${@:2}"; }
report() {  # report NAME FILE...: one line per epoch of the metrics files
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
name = sys.argv[1]
for path in sys.argv[2:]:
    for line in open(path):
        m = json.loads(line)
        err = m.get("gradient_error")
        layers = m.get("gradient_error_layers")
        print(f"{name:9} epoch {m['epoch']}: test acc {m['test_accuracy']:.3f}  "
              f"train acc {m['train_accuracy']:.3f}  "
              f"train loss {m['train_loss']:.4f}  {m['batch_ms'] / 1000:6.2f} s/batch  "
              f"gradient error {'-' if err is None else f'{err:.3g}'} "
              f"(chain layers {'-' if layers is None else f'{layers:.3g}'})  "
              f"fallbacks {m.get('fallbacks', '-')}")
PY
}
evaluate() {  # evaluate NAME: test accuracy of checkpoint-NAME on EVAL_SIZE volumes
  [ "${EVAL_SIZE:-0}" -gt 0 ] || return 0
  mpirun --oversubscribe --bind-to none -np "$ranks" "$build/apps/weft/weft" eval \
    --resume "$out/checkpoint-$1" --data "$data" --test-size "$EVAL_SIZE" --batch 4 \
    --threads 1 --json "$out/eval-$1.json" >/dev/null
  /usr/bin/python3 -c "import json,sys; e=json.load(open(sys.argv[1])); \
print(f\"{sys.argv[2]:9} weft eval: test acc {e['test_accuracy']:.3f} on {sys.argv[3]} volumes\")" \
    "$out/eval-$1.json" "$1" "$EVAL_SIZE"
}
case $mode in
  gradient)
    for name in "${names[@]}"; do
      read -r f b flags <<<"${setting[$name]}"
      # shellcheck disable=SC2086  # flags are words
      weft "$ranks" "${network[@]}" $flags $(counts "$f" "$b") \
        --auto-check 1 --train-size $((4 * ${BATCHES:-2})) --test-size 4 \
        --epochs "${GRADIENT_EPOCHS:-1}" --metrics "$out/gradient-$name.jsonl" \
        >"$out/gradient-$name.log" 2>&1 ||
        { echo "$name: failed"; tail -n 3 "$out/gradient-$name.log"; continue; }
      /usr/bin/python3 -c "import json,sys; m=json.loads(open(sys.argv[1]).readlines()[-1]); \
print(f\"{sys.argv[2]:9} forward {sys.argv[3]} / adjoint {sys.argv[4]} iterations: gradient \
error {m['gradient_error']:.3g}, chain layers {m['gradient_error_layers']:.3g} \
({m['gradient_checks']} batches, {m['fallbacks']} fallbacks)\")" \
        "$out/gradient-$name.jsonl" "$name" "$f" "$b"
    done
    ;;
  train)
    train=(--train-size "${TRAIN_SIZE:-200}" --test-size "${TEST_SIZE:-64}"
           --epochs "${EPOCHS:-2}" --lr-schedule cosine)
    if [ "${SERIAL:-1}" != 0 ]; then
      weft 1 "${network[@]}" "${train[@]}" --serial --metrics "$out/train-serial.jsonl" \
        --checkpoint "$out/checkpoint-serial" >/dev/null
      report serial "$out/train-serial.jsonl"
      evaluate serial
      [ "${SERIAL:-1}" != only ] || exit 0
    fi
    for name in "${names[@]}"; do
      read -r f b flags <<<"${setting[$name]}"
      # shellcheck disable=SC2086
      weft "$ranks" "${network[@]}" "${train[@]}" $flags --balance cost $(counts "$f" "$b") \
        --auto-check "${CHECK:-25}" \
        --metrics "$out/train-$name.jsonl" --checkpoint "$out/checkpoint-$name" >/dev/null
      report "$name" "$out/train-$name.jsonl"
      evaluate "$name"
    done
    ;;
  *)
    echo "usage: bash bench/run_3d_settings.sh gradient|train [SETTING...]" >&2
    exit 2
    ;;
esac
