#!/usr/bin/env bash
# The predicted strong-scaling tables of docs/scaling.md: `weft predict` (on 2 ranks, for the
# ping-pong) for the default ResNet (exact and 2 levels), the stages network, a 1024-layer
# ResNet (5 levels) and the GRU over rows (exact and 2 levels); prints batch ms and speedup over
# serial LibTorch per rank count, and the in-situ factors. With THREE_D=1 also the 3-D networks
# of docs/scaling.md (conv3d on 32^3 shapes, 66 and 130 layers, batch 4, 3 levels, without and
# with --spatial-levels 0,1,1; ~15 more minutes). JSON files go to $OUT (default a temporary
# folder). Build first (bash scripts/build.sh). Takes ~5-10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
WEFT=build/apps/weft/weft
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); JSON in $OUT"
run() {
  local name=$1
  shift
  mpirun -np 2 "$WEFT" predict --threads 1 --json "$OUT/$name.json" "$@" >/dev/null
}
run resnet_exact --exact --ranks 1,2,4,8
run resnet_2levels --fwd-levels 2 --bwd-levels 2 --ranks 1,2,4,8
run stages --model stages --ranks 1,2,4,8
run gru_rows_exact --model gru --exact --ranks 1,2,4,8,16
run gru_rows_2levels --model gru --fwd-levels 2 --bwd-levels 2 --ranks 1,2,4,8,16
run resnet1024_5levels --steps 1024 --fwd-levels 5 --bwd-levels 5 \
  --ranks 1,2,4,8,16,32,64,128,256,512,1024
names="resnet_exact resnet_2levels stages gru_rows_exact gru_rows_2levels resnet1024_5levels"
if [ "${THREE_D:-0}" = 1 ]; then
  conv3d="--model conv3d --data shapes3d --stage-channels 8,16,32 --batch 4 --fwd-levels 3
          --bwd-levels 3 --repeats 3"
  for steps in 22,21,21 43,43,42; do
    n=conv3d_${steps//,/_}
    ranks=1,2,4,8,16,32,64
    [ "$steps" = 43,43,42 ] && ranks=$ranks,128
    # shellcheck disable=SC2086
    run "$n" $conv3d --stage-steps "$steps" --ranks "$ranks"
    # shellcheck disable=SC2086
    run "${n}_spatial" $conv3d --stage-steps "$steps" --spatial-levels 0,1,1 --ranks "$ranks"
    names="$names $n ${n}_spatial"
  done
fi
/usr/bin/python3 - "$OUT" $names <<'PY'
import json, os, sys
out = sys.argv[1]
for name in sys.argv[2:]:
    d = json.load(open(os.path.join(out, name + ".json")))
    c = d["costs"]
    situ = ""
    if c.get("forward_in_situ_per_level"):
        situ = "; in situ forward %s, adjoint %s" % (
            ", ".join("%.2f" % f for f in c["forward_in_situ_per_level"]),
            ", ".join("%.2f" % f for f in c["adjoint_in_situ_per_level"]))
    print(f"{name}: serial {d['serial_batch_ms']:.1f} ms; break-even "
          f"{d['break_even_ranks']}{situ}")
    print("  " + "  ".join(f"P={p['ranks']}: {p['batch_ms']:.1f} ms ({p['speedup_vs_serial']:.2f}x)"
                           for p in d["predictions"]))
PY
