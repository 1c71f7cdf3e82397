#!/usr/bin/env bash
# Time per training batch of the Python training loop (examples/python/train_mnist.py with
# TorchScript step layers) against `weft train` on the same network, data, batch size and
# optimizer, the two alternated in one run. Per batch = the epoch's wall time on rank 0 (the
# whole loop: data, forward, loss, backward, optimizer, bookkeeping; the test set is 100
# images) / batches. Also shown: the sum of the per-phase times both programs report
# (forward + backward + optimizer, steady means, each the slowest rank's). Prints each repeat,
# the medians and the ratios python / weft train.  Build first (bash scripts/build.sh).
#   bench/run_python_bench.sh [RANKS] [REPEATS] [TRAIN_SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
ranks=${1:-2}
repeats=${2:-5}
size=${3:-3000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--steps 8 --channels 4 --epochs 1 --train-size "$size" --test-size 100 --seed 1)
for i in $(seq 1 "$repeats"); do
  mpirun -np "$ranks" build/apps/weft/weft train "${common[@]}" --batch 50 --no-progress \
    --metrics "$work/cli_$i.json" > /dev/null
  PYTHONPATH=build/python mpirun -np "$ranks" /usr/bin/python3 examples/python/train_mnist.py \
    "${common[@]}" --batch-size 50 --metrics "$work/python_$i.json" > /dev/null
done
/usr/bin/python3 - "$work" "$repeats" "$ranks" "$size" <<'PY'
import json, math, statistics, sys
work, repeats, ranks, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
batches = math.ceil(size / 50)
def per_batch(path):
    r = json.loads(open(path).readline())
    return 1e3 * r["epoch_seconds"] / batches, r["forward_ms"] + r["backward_ms"] + r["optimizer_ms"]
cli = [per_batch(f"{work}/cli_{i}.json") for i in range(1, repeats + 1)]
py = [per_batch(f"{work}/python_{i}.json") for i in range(1, repeats + 1)]
print(f"{ranks} rank(s), {batches} batches of 50, {repeats} repeats; ms per batch")
print("  repeat   weft train   python (TorchScript)   | phase sums: weft train   python")
for i, (c, p) in enumerate(zip(cli, py), 1):
    print(f"  {i:6d} {c[0]:12.2f} {p[0]:12.2f}             | {c[1]:12.2f} {p[1]:12.2f}")
for k, what in ((0, "per batch (epoch / batches)"), (1, "phase sums")):
    mc, mp = statistics.median(c[k] for c in cli), statistics.median(p[k] for p in py)
    print(f"median {what}: weft train {mc:.2f} ms, python {mp:.2f} ms, ratio {mp / mc:.3f}")
PY
