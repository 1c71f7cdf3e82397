#!/usr/bin/env bash
# `weft predict` against the critical-path replay of traced `weft train` runs (docs/tracing.md,
# docs/scaling.md): for each network and each rank count P, the predicted time per batch and the
# replayed one, medians over ROUNDS alternating rounds, and their ratio.
#
# Runs at P > 2 ranks share this machine's cores when it has fewer than P (--oversubscribe;
# waiting ranks yield), so the replay prices every event by its own CPU time, not by the wall
# time that includes waiting for a core. That CPU time still carries contention: busy cores slow
# each other (two vCPUs of one physical core; a host's shared clock budget or memory bandwidth),
# and `weft predict` prices it too: it times the model's serial batch beside copies of itself
# with up to min(P, cores) cores busy and slows every rank's computing at P by that factor (its
# JSON's "slowdown"). The script measures the same effect its own way, for each P: the replayed
# 1-rank batch with P - 1 copies of the run going at once, over the replayed 1-rank batch alone
# (the "contention" column), printed beside predict's slowdown. Predicted / replayed compares
# like with like: both carry the contention. A second line per P replays the same traced run at
# the costs of the round's traced 1-rank run (`weft replay --costs-from`: each step priced at what
# it cost there, the time between events divided by the slowdown measured on the steps), which
# takes the contention of sharing fewer cores than ranks out event by event, and gives
# predicted over that (the references: the round's two 1-rank runs; for the weak series a 1-rank
# run of P's network).
#
# Environment: NETWORKS (default "resnet deep stages gru"; "weak" is the ResNet of resnet's flags
# with WEAK layers per rank, default 4: `weft predict --weak`; "conv3d" is docs/scaling.md's
# 520-layer 3-D network with 4 levels, layers placed by cost, on CONV3D_DATA, default the 32^3
# shapes3d set; a folder from `weft data shapes3d --size 16` makes it 8x cheaper),
# RANKS (default "1 2 4 8 16"),
# ROUNDS (default 2), BATCHES traced per run (default 4), COPIES_MAX (the most copies of the
# 1-rank run for the contention column, default P - 1), OUT (a folder: the weak series as
# `weft predict --weak --json`-like files for `weft plot scaling`, weak_predicted.json and
# weak_replayed.json). Build first (scripts/build.sh).
#
# Memory: each row also gives predict's resident memory of the rank with the most layers and the
# largest max RSS of the traced run's ranks (MiB, medians over the rounds).
# Each round runs `weft predict --ranks 1,2,...` once (one cost measurement for every P) and one
# traced 1-rank run alone; then, for each P, the traced run at P and (P >= 2) the 1-rank run
# beside P - 1 copies. The "measured" column is the wall time per batch of the traced run at P as
# it ran (docs/tracing.md: measured_median_batch_ms): with a core per rank this is the real
# speedup; on a machine with fewer cores than P it is not.
#
# Process binding is off (OMPI_MCA_hwloc_base_binding_policy=none): Open MPI binds a 1-rank run to
# core 0, so concurrent 1-rank runs would all share one core. Other environment: WEFT (the weft
# binary, default build/apps/weft/weft), DATA (a Fashion-MNIST-format folder passed as --data;
# default weft's own default), PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi-env.sh
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
weft=${WEFT:-build/apps/weft/weft}
python=${PYTHON:-/usr/bin/python3}
data=()
[[ -n ${DATA:-} ]] && data=(--data "$DATA")
# The --data flags of network $1 in the array net_data: DATA's, but none for conv3d, whose flags
# name its own.
set_net_data() { net_data=(); [[ $1 == conv3d ]] || net_data=("${data[@]}"); }
rounds=${ROUNDS:-2}
traced=${BATCHES:-4}
networks=${NETWORKS:-resnet deep stages gru}
ranks_list=${RANKS:-1 2 4 8 16}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The contention column's copies at P: P - 1, at most COPIES_MAX (for networks whose P copies
# would not fit in memory; the column then says how many ran).
copies_max=${COPIES_MAX:-1000000}
[[ $copies_max =~ ^[0-9]+$ ]] || { echo "run_replay_check.sh: COPIES_MAX '$copies_max' is not a whole number" >&2; exit 2; }
copies_at() { local n=$(($1 - 1)); echo $((n < copies_max ? n : copies_max)); }

weak=${WEAK:-4}
flags_of() {  # the network and MGRIT flags of one named configuration at $2 ranks
  case $1 in
    resnet) echo "--channels 4 --steps 16 --batch 50 --fwd-levels 2 --bwd-levels 2 --fwd-cf 4 --bwd-cf 4" ;;
    weak) echo "--channels 4 --steps $((weak * $2)) --batch 50 --fwd-levels 4 --bwd-levels 4 --fwd-cf 4 --bwd-cf 4" ;;
    deep) echo "--channels 2 --steps 128 --batch 20 --fwd-levels 3 --bwd-levels 3 --fwd-cf 4 --bwd-cf 4" ;;
    stages) echo "--model stages --batch 50" ;;
    gru) echo "--model gru --batch 50 --fwd-levels 2 --bwd-levels 2 --fwd-cf 4 --bwd-cf 4" ;;
    conv3d) echo "--model conv3d --data ${CONV3D_DATA:-shapes3d} --stage-channels 8,16,32 --stage-steps 173,173,174 --batch 4 --fwd-levels 4 --bwd-levels 4 --balance cost" ;;
    *) echo "unknown network $1" >&2; exit 2 ;;
  esac
}
batch_of() { flags_of "$1" 1 | sed -E 's/.*--batch ([0-9]+).*/\1/'; }

# "replayed:MiB:measured:repriced:contention:by_key" of a traced run of network $1 at $2 ranks:
# median batch in ms, largest max RSS of its ranks (MiB), measured wall time per batch in ms;
# with reference traces $5 (comma-separated) the replay at their costs (`weft replay
# --costs-from`), the slowdown that took out of the run's steps and the share of their time
# priced by key; without, the replay, 1 and 1. $3 > 0: that many untraced 1-rank copies of the
# run go at once (contention). $6: size the network as for that many ranks (default $2; the weak
# series' 1-rank reference for P runs P's network).
replayed() {
  local name=$1 np=$2 others=$3 tag=$4 reference=${5:-} flags images pids=()
  flags=$(flags_of "$name" "${6:-$np}")
  images=$(($(batch_of "$name") * (traced + 3)))
  local args="train $flags --threads 1 --train-size $images --test-size 10 --epochs 1 --no-progress"
  local net_data
  set_net_data "$name"
  for _ in $(seq "$others"); do
    mpirun -np 1 $weft train $(flags_of "$name" 1) "${net_data[@]}" --threads 1 \
      --train-size "$images" --test-size 10 --epochs 1 --no-progress > /dev/null &
    pids+=($!)
  done
  mpirun -np "$np" $weft $args "${net_data[@]}" --trace "$work/$tag.trace" \
    --trace-batches "$traced" > /dev/null
  for pid in "${pids[@]}"; do wait "$pid"; done
  $weft replay "$work/$tag.trace" --json "$work/$tag.replay" > /dev/null
  if [[ -n $reference ]]; then
    local costs=() paths=() path
    IFS=, read -ra paths <<< "$reference"
    for path in "${paths[@]}"; do costs+=(--costs-from "$path"); done
    $weft replay "$work/$tag.trace" "${costs[@]}" --json "$work/$tag.repriced" > /dev/null
  else
    cp "$work/$tag.replay" "$work/$tag.repriced"
  fi
  $python -c "import json; r = json.load(open('$work/$tag.replay')); \
c = json.load(open('$work/$tag.repriced')); \
rss = json.load(open('$work/$tag.trace'))['otherData']['max_rss_kib'].values(); \
print(f\"{r['median_batch_ms']}:{max(rss) / 1024}:{r['measured_median_batch_ms']}:\" \
      f\"{c['median_batch_ms']}:{c.get('contention', 1.0)}:{c.get('priced_by_key', 1.0)}\")"
}

# "batch_ms:MiB:slowdown" for each P of the list $2 (one line each; "skip" where predict has no
# row).
predicted() {
  local name=$1 list=$2 tag=$3 extra=""
  [[ $name == weak ]] && extra="--weak $weak"
  # predict refuses a list holding a P beyond the layers: then the largest P that it takes.
  local ranks=$list net_data
  set_net_data "$name"
  while ! mpirun -np 1 $weft predict $(flags_of "$name" 1) "${net_data[@]}" $extra --threads 1 \
    --ranks "$ranks" --repeats 3 --json "$work/$tag.predict" > /dev/null 2> "$work/$tag.err"; do
    # predict's own line comes first; mpirun's banner about the exit status follows it.
    echo "  weft predict --ranks $ranks failed: $(grep -m1 '^weft' "$work/$tag.err" ||
      grep -m1 -v '^ *$' "$work/$tag.err")" >&2
    [[ $ranks == *,* ]] || break
    ranks=${ranks%,*}
  done
  $python - "$work/$tag.predict" "$list" <<'PY'
import json, os, sys
rows = {}
if os.path.exists(sys.argv[1]):
    rows = {p["ranks"]: p for p in json.load(open(sys.argv[1]))["predictions"]}
for np in sys.argv[2].split(","):
    p = rows.get(int(np))
    print(f"{p['batch_ms']}:{p['memory_per_rank_mib']}:{p.get('slowdown', 1.0)}" if p else "skip")
PY
}

echo "weft predict against the replay of traced runs ($(getconf _NPROCESSORS_ONLN) cores here; $rounds rounds, $traced traced batches per run)"
for name in $networks; do
  echo "$name: $(flags_of "$name" 1)$([[ $name == weak ]] && echo " (--steps $weak x P)")"
  # The weak series predicts each P from its own --steps; the others from one call for every P.
  declare -A pred=() rep=() busy=()
  alone=()
  for r in $(seq "$rounds"); do
    if [[ $name == weak ]]; then
      for np in $ranks_list; do
        pred[$np]+=" $(predicted weak "$np" "$name-$np-$r")"
      done
    else
      mapfile -t rows < <(predicted "$name" "$(tr ' ' ',' <<< "$ranks_list")" "$name-$r")
      i=0
      for np in $ranks_list; do pred[$np]+=" ${rows[$i]}"; i=$((i + 1)); done
    fi
    alone+=("$(replayed "$name" 1 0 "$name-alone-$r")")
    for np in $ranks_list; do
      [[ ${pred[$np]} == *skip* ]] && continue
      # The reference costs: the round's 1-rank runs of the same network, the one alone and the
      # traced one at P = 1 (medians over both: one run's speed is one sample of this machine's,
      # which drifts by 10-15 % between processes); for the weak series, whose network grows
      # with P, one 1-rank run of P's network (a single sample, unlike the others).
      reference=$work/$name-alone-$r.trace
      [[ " $ranks_list " == *" 1 "* ]] && reference+=",$work/$name-1-$r.trace"
      if [[ $name == weak && $np -gt 1 ]]; then
        replayed "$name" 1 0 "$name-ref-$np-$r" "" "$np" > /dev/null
        reference=$work/$name-ref-$np-$r.trace
      fi
      rep[$np]+=" $(replayed "$name" "$np" 0 "$name-$np-$r" "$reference")"
      [[ $np -ge 2 ]] && busy[$np]+=" $(replayed "$name" 1 "$(copies_at "$np")" "$name-$np-busy-$r")"
    done
  done
  for np in $ranks_list; do
    if [[ ${pred[$np]} == *skip* ]]; then
      echo "  P=$np: skipped (weft predict refuses it: more ranks than layers?)"
      continue
    fi
    $python - "$np" "${alone[*]}" "${busy[$np]:-${alone[*]}}" "${pred[$np]}" "${rep[$np]}" \
      "$work/series-$name" "$(copies_at "$np")" <<'PY'
import json, statistics, sys
np = int(sys.argv[1])
copies = int(sys.argv[7]) if np > 1 else 0
# Values are "batch_ms:MiB:slowdown" (predict) and
# "replayed_ms:MiB:measured_ms:repriced_ms:contention:by_key" (traced runs).
alone, busy, pred, rep = ([[float(v) for v in x.split(":")] for x in a.split()]
                          for a in sys.argv[2:6])
med = lambda rows, k: statistics.median(row[k] for row in rows)
contention = med(busy, 0) / med(alone, 0)
p, r, measured, slowdown = med(pred, 0), med(rep, 0), med(rep, 2), med(pred, 2)
print(f"  P={np:3d}  predicted {p:9.2f} ms  replayed {r:9.2f} ms  measured {measured:9.2f} ms  "
      f"(1 rank alone {med(alone, 2):9.2f} ms)  predicted/replayed {p / r:.3f}  "
      f"replayed/measured {r / measured:.3f}  slowdown: predict's {slowdown:.2f}, "
      f"contention (1 rank beside {copies} copies) {contention:.2f}  "
      f"MiB per rank: predicted {med(pred, 1):7.1f}  max RSS {med(rep, 1):7.1f}")
repriced, in_run, by_key = med(rep, 3), med(rep, 4), med(rep, 5)
print(f"         replayed at the 1-rank runs' costs {repriced:9.2f} ms (its steps ran "
      f"{in_run:.2f}x those costs; {100 * by_key:.1f} % of their time priced by key)  "
      f"predicted/that {p / repriced:.3f}")
with open(sys.argv[6], "a") as f:
    f.write(json.dumps({"ranks": np, "predicted_ms": p, "replayed_ms": r,
                        "measured_ms": measured, "predicted_slowdown": slowdown,
                        "contention": contention, "contention_copies": copies,
                        "repriced_ms": repriced, "contention_in_run": in_run,
                        "priced_by_key": by_key,
                        "predicted_mib": med(pred, 1),
                        "max_rss_mib": med(rep, 1)}) + "\n")
PY
  done
  unset pred rep busy
done

# Every network's rows as JSON lines (OUT/series-NAME.jsonl), and the weak series as three files
# for `weft plot scaling` (efficiency: the 1-rank batch over P's).
if [[ -n ${OUT:-} ]]; then
  mkdir -p "$OUT"
  for f in "$work"/series-*; do [[ -f $f ]] && cp "$f" "$OUT/$(basename "$f").jsonl"; done
fi
if [[ -n ${OUT:-} && -f $work/series-weak ]]; then
  $python - "$work/series-weak" "$OUT" "$weak" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
for key, name in (("predicted", "weak_predicted"), ("replayed", "weak_replayed"),
                  ("measured", "weak_measured")):
    first = rows[0][key + "_ms"]
    out = {"weak_layers_per_rank": int(sys.argv[3]), "source": "bench/run_replay_check.sh",
           "predictions": [{"ranks": r["ranks"], "batch_ms": r[key + "_ms"],
                            "weak_efficiency": first / r[key + "_ms"],
                            "memory_per_rank_mib": r["predicted_mib" if key == "predicted"
                                                     else "max_rss_mib"]} for r in rows]}
    json.dump(out, open(f"{sys.argv[2]}/{name}.json", "w"), indent=1)
print(f"wrote {sys.argv[2]}/weak_predicted.json, weak_replayed.json and weak_measured.json")
PY
fi
