#!/usr/bin/env bash
# Does the loader keep up? For each data format: the images per second its training batches load
# at on one core (bench/loader_bench), against the images per second `weft train --model stages`
# consumes at 2 ranks on the same data (batch_ms of its metrics), and the time the training loop
# waited for data (data_wait_fraction: the background loader hides what it can). Formats: the
# README's Fashion-MNIST (IDX), and generated CIFAR-10, tiny-imagenet (64x64 JPEGs) and folder
# (JPEG/PNG of 64 to 96 pixels, fitted to 64) sets. Build first (scripts/build.sh).
# Environment: TRAIN (training images per run, default 2000), NP (ranks, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
train=${TRAIN:-2000}
np=${NP:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
weft=build/apps/weft/weft
$weft data cifar10 --out "$work/cifar10" --per-class 250 --test-per-class 10 > /dev/null
$weft data tiny-imagenet --out "$work/tiny" --classes 20 --per-class 100 --test-per-class 5 > /dev/null
$weft data folder --out "$work/folder" --classes 10 --per-class 200 --test-per-class 5 > /dev/null
printf '%-14s %12s %12s %12s %10s %10s\n' format "loader img/s" "train img/s" ratio "wait ms" "wait %"
for entry in "fashion-mnist|/usr/share/datasets/fashion-mnist" "cifar10|$work/cifar10" \
  "tiny-imagenet|$work/tiny" "folder|$work/folder"; do
  name=${entry%%|*}
  dir=${entry#*|}
  [[ -d $dir ]] || { echo "$name: $dir missing, skipped"; continue; }
  loader=$(build/bench/loader_bench "$dir" 50 20 | awk '{print $2}')
  mpirun -np "$np" $weft train --model stages --batch 50 --threads 1 --train-size "$train" \
    --test-size 100 --epochs 1 --seed 1 --no-progress --data "$dir" --metrics "$work/$name.json" \
    > /dev/null
  /usr/bin/python3 - "$work/$name.json" "$name" "$loader" <<'PY'
import json, sys
m = json.loads(open(sys.argv[1]).read().splitlines()[-1])
loader = float(sys.argv[3])
consumed = 50 / (m["batch_ms"] / 1e3)
print(f"{sys.argv[2]:<14} {loader:12.0f} {consumed:12.0f} {loader / consumed:12.1f} "
      f"{m['data_wait_ms']:10.1f} {100 * m['data_wait_fraction']:9.2f}%")
PY
done
