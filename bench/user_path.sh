#!/usr/bin/env bash
# Issue 31 ("From the user's files to the verdict in under a second"): each figure beside its
# anchor from the same run, as a ratio: info import vs python3's pickle.load, config + infos to the
# verdict (cold, cached), a 1,000-seed sweep, engine core vs a binary heap (build/bench/sim_bench).
# Inputs are made once in /tmp/petrsim_bench_user_path (python3-numpy; --large adds the 0.8 GB
# trainval with 2D, ~6 GB of memory). Wall, CPU: medians of N runs; peak RSS: the largest.
# Usage: bench/user_path.sh [N] [PETRSIM] [--large]   (default: 3 runs of build/petrsim)
set -euo pipefail
cd "$(dirname "$0")/.."

large=0
args=()
for arg in "$@"; do
  case "$arg" in
    --large) large=1 ;;
    -h|--help) sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) args+=("$arg") ;;
  esac
done
runs="${args[0]:-3}"
petrsim="${args[1]:-build/petrsim}"
sim_bench="${SIM_BENCH:-$(dirname "$petrsim")/bench/sim_bench}"
config=tests/data/configs/streampetr/stream_petr_r50_704_trainval_24e.py
scenario=scenarios/streampetr_trainval_hang.pbtxt
data=/tmp/petrsim_bench_user_path
python=/usr/bin/python3

die() { echo "user_path.sh: $*" >&2; exit 1; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "N must be a positive integer, got '$runs'"
[ -x /usr/bin/time ] || die "GNU time is missing at /usr/bin/time (Debian: apt-get install time)"
[ -x "$python" ] || die "$python is missing (Debian: apt-get install python3 python3-numpy)"
"$python" -c 'import numpy' 2>/dev/null || die "python3-numpy is missing (Debian: apt-get install python3-numpy)"
[ -x "$petrsim" ] || die "no petrsim at $petrsim (build it: ninja -C build petrsim)"
[ -x "$sim_bench" ] || die "no sim_bench at $sim_bench (build it: ninja -C build sim_bench)"
[ -f "$config" ] || die "no config at $config"

scratch=$(mktemp -d /tmp/petrsim_user_path.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# The inputs, generated once (to a temporary name first, so an interrupted run leaves none).
generate() {  # out, make_import_bench_infos.py options...
  local out="$1"; shift
  [ -s "$out" ] && return 0
  mkdir -p "$(dirname "$out")"
  echo "generating $out ($*) ..." >&2
  "$python" bench/make_import_bench_infos.py "$out.partial" "$@" >&2
  mv "$out.partial" "$out"
}
generate "$data/train.pkl" --frames 28130 --scenes 700 --boxes 990000 --no-2d
generate "$data/val.pkl" --frames 6019 --scenes 150 --boxes 210000 --no-2d
if (( large )); then
  generate "$data/trainval_2d.pkl" --frames 34149 --scenes 850 --boxes 1200000
fi

# timed COMMAND...: runs it $runs times; sets wall and cpu (s, medians) and peak (kB, largest).
# Wall is taken around GNU time with date's ns clock (time's own %e has 10 ms steps).
median() { sort -g | sed -n "$(( (runs + 1) / 2 ))p"; }
timed() {
  local walls=() cpus=() t0 t1 u s m
  peak=0
  for _ in $(seq "$runs"); do
    t0=$(date +%s%N)
    if ! /usr/bin/time -f '%e %U %S %M' -o "$scratch/time" "$@" > "$scratch/stdout" 2> "$scratch/stderr"; then
      echo "user_path.sh: failed: $*" >&2
      tail -n 20 "$scratch/stderr" >&2
      exit 1
    fi
    t1=$(date +%s%N)
    read -r _ u s m < <(tail -n 1 "$scratch/time")
    walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')")
    cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')")
    (( m > peak )) && peak=$m
  done
  wall=$(printf '%s\n' "${walls[@]}" | median)
  cpu=$(printf '%s\n' "${cpus[@]}" | median)
}

# Python's anchor: Debian python3 unpickling each file in turn and holding them all (as a
# dataset concatenating them does); it exits without tearing the objects down, so the anchor is
# the load alone.
pyload() {
  timed "$python" -c '
import os, pickle, sys
loaded = []
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        loaded.append(pickle.load(f))
os._exit(0)' "$@"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) print "-"; else printf (a / b < 0.1 ? "%.3f" : "%.2f"), a / b }'; }
mb() { awk -v kb="$1" 'BEGIN { printf "%.0f MB", kb * 1024 / 1e6 }'; }
secs() { awk -v x="$1" 'BEGIN { printf (x < 0.1 ? "%.1f ms" : "%.2f s"), (x < 0.1 ? x * 1000 : x) }'; }
line() { printf '%-50s %12s %12s %7s  %s\n' "$@"; }
filesize() { local total=0 f; for f in "$@"; do total=$(( total + $(stat -c %s "$f") )); done; echo "$total"; }

echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC')  nproc $(nproc)  $(lscpu | sed -n 's/^Model name: *//p' | head -n 1)" \
  " $petrsim  median of $runs run(s)"
line "figure" "petrsim" "anchor" "ratio" "goal (issue 31)"

# 1. The info import of train + val vs pickle.load of the same files.
bytes=$(filesize "$data/train.pkl" "$data/val.pkl")
in_mb=$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }')
timed "$petrsim" import mmdet3d-infos --quiet --no-cache "$data/train.pkl" "$data/val.pkl" -o "$scratch/S.pb"
p_wall=$wall p_cpu=$cpu p_peak=$peak
pyload "$data/train.pkl" "$data/val.pkl"
a_wall=$wall a_cpu=$cpu a_peak=$peak
echo "1. import mmdet3d-infos --no-cache train.pkl val.pkl ($in_mb MB: 34,149 frames, 1.2 M boxes, no 2D); anchor: python3 pickle.load"
line "   CPU (user+sys)" "$(secs "$p_cpu")" "$(secs "$a_cpu")" "$(ratio "$p_cpu" "$a_cpu")" "<= 0.5 s"
line "   wall" "$(secs "$p_wall")" "$(secs "$a_wall")" "$(ratio "$p_wall" "$a_wall")" ""
line "   peak RSS" "$(mb "$p_peak")" "$(mb "$a_peak")" "$(ratio "$p_peak" "$a_peak")" "<= $in_mb MB (the files)"
line "   CPU per MB of input" \
  "$(awk -v c="$p_cpu" -v m="$in_mb" 'BEGIN { printf "%.2f ms", c * 1000 / m }')" \
  "$(awk -v c="$a_cpu" -v m="$in_mb" 'BEGIN { printf "%.2f ms", c * 1000 / m }')" "$(ratio "$p_cpu" "$a_cpu")" ""
small_mb=$in_mb small_p_cpu=$p_cpu small_a_cpu=$a_cpu
py_wall=$a_wall

# 2. The user's config and infos to the verdict: cold (--no-cache), then cached on unchanged files.
job="$scratch/job.pb"
import_config=("$petrsim" import mmdet3d-config "$config" --infos "$data/train.pkl" "$data/val.pkl" -o "$job" --quiet)
# Recorded checks (base/run_record.h) in this run's own directory; the cold line checks with
# --no-cache too.
export PETRSIM_CACHE_DIR="$scratch/cache"
# shellcheck disable=SC2016  # $1, $2 and $@ belong to the inner shell
to_verdict='p=$1 j=$2; shift 2; "$@" && "$p" check "$j"'
# shellcheck disable=SC2016
cold_verdict='p=$1 j=$2; shift 2; "$@" && "$p" check --no-cache "$j"'
timed bash -c "$cold_verdict" _ "$petrsim" "$job" "${import_config[@]}" --no-cache
c_wall=$wall c_cpu=$cpu c_peak=$peak
"${import_config[@]}" > /dev/null  # fills the cache record ($job.petrsim-cache)
[ -s "$job.petrsim-cache" ] || die "import mmdet3d-config wrote no $job.petrsim-cache"
timed "${import_config[@]}"
w_import=$wall
"$petrsim" check "$job" > /dev/null || true  # records the check
timed bash -c "$to_verdict" _ "$petrsim" "$job" "${import_config[@]}"
w_both=$wall
echo "2. import mmdet3d-config $(basename "$config") --infos train.pkl val.pkl && check"
line "   cold (--no-cache) import + check, wall" "$(secs "$c_wall")" "$(secs "$py_wall")" "$(ratio "$c_wall" "$py_wall")" \
  "<= 1 s   (anchor: pickle.load wall, 1.)"
line "   cold import + check, CPU / peak RSS" "$(secs "$c_cpu")" "$(mb "$c_peak")" "" ""
line "   cached re-run: import alone, wall" "$(secs "$w_import")" "$(secs "$c_wall")" "$(ratio "$w_import" "$c_wall")" \
  "<= 50 ms (anchor: the cold line)"
line "   cached re-run: import + check, wall" "$(secs "$w_both")" "$(secs "$c_wall")" "$(ratio "$w_both" "$c_wall")" \
  "<= 50 ms (anchor: the cold line)"

# 3. 1,000 seeds of the seed scenario; the engine core vs a binary heap (sim_bench, same run).
timed "$petrsim" sweep "$scenario" --seeds 1000 --jobs 2 --quiet
s_wall=$wall s_cpu=$cpu
"$sim_bench" --benchmark_filter='TrivialEvent|FullModelSeedScenario$' --benchmark_repetitions="$runs" \
  --benchmark_report_aggregates_only=true --benchmark_format=json > "$scratch/bench.json" 2> /dev/null \
  || die "failed: $sim_bench"
read -r engine_ns heap_ns model_ms < <("$python" - "$scratch/bench.json" <<'EOF'
import json, sys
scale = {'ns': 1e-9, 'us': 1e-6, 'ms': 1e-3, 's': 1.0}
median = {}
for b in json.load(open(sys.argv[1]))['benchmarks']:
    if b.get('aggregate_name', 'median') == 'median':
        median[b['run_name']] = b['real_time'] * scale[b['time_unit']]
batch = 1 << 16  # events per iteration of the TrivialEvent benchmarks
print('%.2f %.2f %.3f' % (median['BM_EngineCoreTrivialEvent/10000'] / batch * 1e9,
                          median['BM_BinaryHeapTrivialEvent/10000'] / batch * 1e9,
                          median['BM_FullModelSeedScenario'] * 1e3))
EOF
)
per_run_ms=$(awk -v c="$s_cpu" 'BEGIN { printf "%.2f", c }')  # CPU s per 1,000 runs = ms per run
echo "3. sweep $(basename "$scenario") --seeds 1000 --jobs 2; anchor: $(basename "$sim_bench") (in-process)"
line "   wall" "$(secs "$s_wall")" "" "" "<= 8 s"
line "   CPU per run (each seed runs to its own hang)" "$per_run_ms ms" "" "" ""
line "   the seed scenario's own run (job.seed as shipped)" "$model_ms ms" "" "" "(BM_FullModelSeedScenario)"
line "   event loop, 10^4 pending: ns per event" "$engine_ns ns" "$heap_ns ns" "$(ratio "$engine_ns" "$heap_ns")" \
  "(the engine's core vs a binary heap)"

# 4. --large: the real trainval's size with every info key, 2D annotations included.
if (( large )); then
  bytes=$(filesize "$data/trainval_2d.pkl")
  in_mb=$(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }')
  timed "$petrsim" import mmdet3d-infos --quiet --no-cache "$data/trainval_2d.pkl" -o "$scratch/L.pb"
  p_wall=$wall p_cpu=$cpu p_peak=$peak
  pyload "$data/trainval_2d.pkl"
  a_wall=$wall a_cpu=$cpu a_peak=$peak
  echo "4. import mmdet3d-infos --no-cache trainval_2d.pkl ($in_mb MB: 34,149 frames, 1.2 M boxes, 2D too); anchor: python3 pickle.load"
  line "   CPU (user+sys)" "$(secs "$p_cpu")" "$(secs "$a_cpu")" "$(ratio "$p_cpu" "$a_cpu")" ""
  line "   wall" "$(secs "$p_wall")" "$(secs "$a_wall")" "$(ratio "$p_wall" "$a_wall")" ""
  line "   peak RSS" "$(mb "$p_peak")" "$(mb "$a_peak")" "$(ratio "$p_peak" "$a_peak")" "<= $in_mb MB (the files)"
  for set in "small $small_mb $small_p_cpu $small_a_cpu" "large $in_mb $p_cpu $a_cpu"; do
    read -r name size pc ac <<< "$set"
    line "   CPU per MB, $name set ($size MB)" \
      "$(awk -v c="$pc" -v m="$size" 'BEGIN { printf "%.2f ms", c * 1000 / m }')" \
      "$(awk -v c="$ac" -v m="$size" 'BEGIN { printf "%.2f ms", c * 1000 / m }')" "$(ratio "$pc" "$ac")" ""
  done
fi
