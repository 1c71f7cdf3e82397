#!/usr/bin/env bash
# Time per training batch of the Python training loop (examples/python/train_mnist.py with
# TorchScript step layers) against `weft train` on the same network, alternated in one run.
# Per batch = forward + loss and backward + optimizer step, the steady mean over an epoch, the
# slowest rank; both programs time the same phases. Prints each repeat, the medians and the
# ratio python / weft train.  Build first (bash scripts/build.sh).
#   bench/run_python_bench.sh [RANKS] [REPEATS] [TRAIN_SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
ranks=${1:-2}
repeats=${2:-5}
size=${3:-3000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--steps 8 --channels 4 --epochs 1 --train-size "$size" --test-size 500 --seed 1)
for i in $(seq 1 "$repeats"); do
  mpirun -np "$ranks" build/apps/weft/weft train "${common[@]}" --batch 50 --no-progress \
    --metrics "$work/cli_$i.json" > /dev/null
  PYTHONPATH=build/python mpirun -np "$ranks" /usr/bin/python3 examples/python/train_mnist.py \
    "${common[@]}" --batch-size 50 --metrics "$work/python_$i.json" > /dev/null
done
/usr/bin/python3 - "$work" "$repeats" "$ranks" <<'PY'
import json, statistics, sys
work, repeats, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def per_batch(path):
    r = json.loads(open(path).readline())
    return r["forward_ms"] + r["backward_ms"] + r["optimizer_ms"], r["epoch_seconds"]
cli = [per_batch(f"{work}/cli_{i}.json") for i in range(1, repeats + 1)]
py = [per_batch(f"{work}/python_{i}.json") for i in range(1, repeats + 1)]
print(f"{ranks} rank(s), {repeats} repeats; per batch [ms] (forward + backward + optimizer)")
print("  repeat   weft train   python (TorchScript)")
for i, (c, p) in enumerate(zip(cli, py), 1):
    print(f"  {i:6d} {c[0]:12.2f} {p[0]:12.2f}")
mc, mp = statistics.median(c[0] for c in cli), statistics.median(p[0] for p in py)
ec, ep = statistics.median(c[1] for c in cli), statistics.median(p[1] for p in py)
print(f"median per batch: weft train {mc:.2f} ms, python {mp:.2f} ms, ratio {mp / mc:.3f}")
print(f"median epoch (incl. test and data): weft train {ec:.2f} s, python {ep:.2f} s, "
      f"ratio {ep / ec:.3f}")
PY
