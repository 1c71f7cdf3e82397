#!/usr/bin/env bash
# MG/Opt over depth (--mgopt) against plain training of the same network: same seed, data,
# MGRIT settings and learning-rate recipe (Adam, cosine over each run's own epochs), runs one
# after the other at 2 ranks. Plain training runs for each of PLAIN_EPOCHS; MG/Opt for
# MGOPT_EPOCHS. Per round and MG/Opt variant: its final test accuracy and wall time (the sum of
# its epochs' training and evaluation), plain training's after the same epochs (what a V-cycle
# per batch buys per batch) and the plain run whose time is closest to MG/Opt's (what it buys
# per second), and the step evaluations per batch. Medians over the rounds at the end;
# PLOT draws round 1's runs, accuracy against wall time (weft plot training --x time).
#   network: the README main job's (--model stages, stages of 2,2,2 steps, its MGRIT recipe)
#   variants: "--mgopt 2" (V-cycles over 2,2,2 and 1,1,1 steps, relax 1,1,2) and "--mgopt 2
#             --mgopt-relax 0,1,1" (the cheapest cycle), or VARIANTS (';'-separated flag sets)
# Usage: bash bench/run_mgopt.sh [ROUNDS]  (default 2); TRAIN_SIZE (10000), PLAIN_EPOCHS
# ("2 6 8"), MGOPT_EPOCHS (2), VARIANTS, PLOT (a .png or .svg path), OUT (keep the metrics
# there; a run whose metrics file exists there is not run again), BUILD_DIR (build). Build
# first (bash scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
rounds=${1:-2}
build=${BUILD_DIR:-build}
out=${OUT:-$(mktemp -d)}
[ -n "${OUT:-}" ] || trap 'rm -rf "$out"' EXIT
mkdir -p "$out"
IFS=';' read -r -a variants <<<"${VARIANTS:---mgopt 2;--mgopt 2 --mgopt-relax 0,1,1}"
read -r -a plain_epochs <<<"${PLAIN_EPOCHS:-2 6 8}"
mgopt_epochs=${MGOPT_EPOCHS:-2}
# The network's own test accuracy (the exact forward), evaluated once per epoch.
common=(--model stages --train-size "${TRAIN_SIZE:-10000}" --no-progress --threads 1
        --eval-forward exact)
train() {  # METRICS FLAGS...: one run unless its metrics are there
  local metrics=$1
  shift
  [ -s "$metrics" ] && return 0
  mpirun -np 2 "$build"/apps/weft/weft train "${common[@]}" "$@" --metrics "$metrics" >/dev/null
}
for ((round = 1; round <= rounds; ++round)); do
  for e in "${plain_epochs[@]}"; do
    train "$out/plain$e-$round.jsonl" --seed "$round" --epochs "$e"
  done
  for v in "${!variants[@]}"; do
    # shellcheck disable=SC2086
    train "$out/mgopt$v-$round.jsonl" --seed "$round" ${variants[$v]} --epochs "$mgopt_epochs"
  done
done
if [ -n "${PLOT:-}" ]; then
  files=()
  for e in "${plain_epochs[@]}"; do files+=("$out/plain$e-1.jsonl"); done
  for v in "${!variants[@]}"; do files+=("$out/mgopt$v-1.jsonl"); done
  "$build"/apps/weft/weft plot training --x time "${files[@]}" -o "$PLOT" \
    --title "MG/Opt against plain training: the main job's network, 2 ranks, round 1" >/dev/null
  echo "picture: $PLOT"
fi
printf '%s\n' "${variants[@]}" >"$out/variants.txt"
/usr/bin/python3 - "$out" "$rounds" "$mgopt_epochs" "${plain_epochs[@]}" <<'PY'
import json, statistics, sys
out, rounds, mgopt_epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
plain_epochs = [int(e) for e in sys.argv[4:]]
variants = [l.strip() for l in open(f"{out}/variants.txt") if l.strip()]
def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]
def seconds(run):
    return sum(e["epoch_seconds"] for e in run)
def evals(run):
    return statistics.mean(e["step_evaluations"] for e in run)
for r in range(1, rounds + 1):
    runs = ", ".join(f"{e} epochs {100 * load(f'{out}/plain{e}-{r}.jsonl')[-1]['test_accuracy']:.2f}%"
                     f" in {seconds(load(f'{out}/plain{e}-{r}.jsonl')):.1f} s" for e in plain_epochs)
    print(f"round {r}, plain training: {runs}")
print()
for v, flags in enumerate(variants):
    print(f"MG/Opt {flags}, {mgopt_epochs} epochs")
    print(f"{'round':5} {'MG/Opt acc':>10} {'[s]':>6} {'evals/batch':>11} {'rejected':>8} "
          f"{'mean α':>6} {'plain same epochs':>17} {'plain, closest time':>21} "
          f"{'plain evals':>11}")
    same_epochs, same_time, ratio = [], [], []
    for r in range(1, rounds + 1):
        m = load(f"{out}/mgopt{v}-{r}.jsonl")
        plain = {e: load(f"{out}/plain{e}-{r}.jsonl") for e in plain_epochs}
        same = plain.get(mgopt_epochs)
        best = min(plain.values(), key=lambda p: abs(seconds(p) - seconds(m)))
        acc = m[-1]["test_accuracy"]
        alphas = [e["mgopt_step_mean"] for e in m if e["mgopt_step_mean"] is not None]
        same_text = f"{100 * same[-1]['test_accuracy']:.2f}%" if same else "-"
        best_text = f"{100 * best[-1]['test_accuracy']:.2f}% ({len(best)} ep, {seconds(best):.0f} s)"
        print(f"{r:5} {100 * acc:9.2f}% {seconds(m):6.1f} {evals(m):11.0f} "
              f"{sum(e['mgopt_rejected'] for e in m):3}/{sum(e['mgopt_corrections'] for e in m):<4} "
              f"{statistics.mean(alphas) if alphas else float('nan'):6.2f} {same_text:>17} "
              f"{best_text:>21} {evals(plain[plain_epochs[0]]):11.0f}")
        if same:
            same_epochs.append(acc - same[-1]["test_accuracy"])
        same_time.append(acc - best[-1]["test_accuracy"])
        ratio.append(evals(m) / evals(plain[plain_epochs[0]]))
    def median(v):
        return f"{100 * statistics.median(v):+.2f}" if v else "nan"
    print(f"median: MG/Opt - plain after the same epochs {median(same_epochs)} points, - the "
          f"plain run closest in time {median(same_time)} points; step evaluations "
          f"per batch MG/Opt / plain {statistics.median(ratio):.2f}\n")
PY
