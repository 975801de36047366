#!/usr/bin/env bash
# Issue 6 "Speed": per-step time of the C++ StreamPETR (bench/step_bench.cc) vs the same
# architecture and sizes in Python PyTorch (bench/step_python.py, Debian python3-torch), and the
# ratio C++/Python (the goal: <= 1.0). Builds nothing.
#
# Usage: bench/step_compare.sh [BUILD_DIR]     (default: build; needs BUILD_DIR/bench/step_bench,
#                                              e.g. `ninja -C build step_bench`)
# Environment: ROUNDS (6), REPS (3), STEPS (20), WARMUP (5), PYTHON (/usr/bin/python3),
#   THREADS ("1 default NPROC": thread settings; "default" leaves each side's own count).
#
# First `step_bench --dump` writes the C++ model's initial parameters and the fixed inputs, and
# step_python.py --check loads them by name (every name and shape must match, and the parameter
# counts), runs 3 steps and compares the losses with the C++ ones: the check that the two
# architectures are the same. Then, for each thread setting, ROUNDS rounds alternate a C++ run
# and a Python run (both on those inputs; each run: WARMUP steps, then REPS repetitions of STEPS
# steps), and the medians over all repetitions are compared (and the minima: on a shared or
# virtual machine the same binary varies by up to 1.5x from one process to the next even when the
# machine looks idle, so many short alternating rounds beat a few long ones). bench/measure.sh times whole
# processes, which would count start-up and warm-up; the step time is measured in-process here.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $build = /* ]] || build=$root/$build
bin=$build/bench/step_bench
python=${PYTHON:-/usr/bin/python3}
rounds=${ROUNDS:-6} reps=${REPS:-3} steps=${STEPS:-20} warmup=${WARMUP:-5}
threads_list=${THREADS:-"1 default $(nproc)"}

if [[ ! -x $bin ]]; then
  echo "step_compare: $bin not found; build it first (ninja -C $build step_bench)" >&2
  exit 2
fi
if ! "$python" -c 'import torch' 2> /dev/null; then
  echo "step_compare: $python has no torch (use Debian's /usr/bin/python3 with python3-torch)" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: $(nproc) CPUs; load before: $(uptime | sed 's/.*load average/load average/')"
echo "== same architecture? (C++ initial parameters and inputs loaded into the Python model)"
"$bin" --dump "$tmp/dump"
"$python" "$root/bench/step_python.py" --check "$tmp/dump" --warmup 0 --reps 1 --steps 1 > "$tmp/check.txt" || {
  cat "$tmp/check.txt"
  echo "step_compare: the Python model does not match the C++ one" >&2
  exit 1
}
head -n 2 "$tmp/check.txt"

median() {  # numbers on stdin -> their median
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
                   else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
field() {  # key, file: the value of key=... on the RESULT line
  sed -n "s/^RESULT .*\b$1=\([^ ]*\).*/\1/p" "$2" | tail -n 1
}

summary=()
for setting in $threads_list; do
  arg=$setting
  [[ $setting == default ]] && arg=0
  : > "$tmp/cpp.ms"
  : > "$tmp/py.ms"
  echo "== threads: $setting"
  for round in $(seq "$rounds"); do
    "$bin" --threads "$arg" --warmup "$warmup" --steps "$steps" --reps "$reps" > "$tmp/cpp.txt"
    "$python" "$root/bench/step_python.py" --check "$tmp/dump" --threads "$arg" --warmup "$warmup" \
      --steps "$steps" --reps "$reps" > "$tmp/py.txt"
    sed -n 's/^cpp rep [0-9]*: \([0-9.]*\) ms\/step.*/\1/p' "$tmp/cpp.txt" >> "$tmp/cpp.ms"
    sed -n 's/^python rep [0-9]*: \([0-9.]*\) ms\/step.*/\1/p' "$tmp/py.txt" >> "$tmp/py.ms"
    printf '  round %d: C++ %s ms/step (threads %s), Python %s ms/step (threads %s; matcher %s ms)\n' "$round" \
      "$(field median_ms "$tmp/cpp.txt")" "$(field threads "$tmp/cpp.txt")" "$(field median_ms "$tmp/py.txt")" \
      "$(field threads "$tmp/py.txt")" "$(field matcher_ms "$tmp/py.txt")"
  done
  cpp=$(median < "$tmp/cpp.ms")
  py=$(median < "$tmp/py.ms")
  cpp_min=$(sort -g "$tmp/cpp.ms" | head -n 1)
  py_min=$(sort -g "$tmp/py.ms" | head -n 1)
  ratio=$(awk -v a="$cpp" -v b="$py" 'BEGIN { printf "%.3f", a / b }')
  ratio_min=$(awk -v a="$cpp_min" -v b="$py_min" 'BEGIN { printf "%.3f", a / b }')
  verdict=$(awk -v r="$ratio" 'BEGIN { print (r <= 1.0) ? "ok (<= 1.0)" : "SLOWER (> 1.0)" }')
  line=$(printf 'threads %-7s median: C++ %7.2f  Python %7.2f ms/step  ratio C++/Python %s %s | min: C++ %6.2f  Python %6.2f  ratio %s  (threads used: C++ %s, Python %s; %d repetitions each)' \
    "$setting" "$cpp" "$py" "$ratio" "$verdict" "$cpp_min" "$py_min" "$ratio_min" "$(field threads "$tmp/cpp.txt")" \
    "$(field threads "$tmp/py.txt")" "$(wc -l < "$tmp/cpp.ms")")
  echo "$line"
  summary+=("$line")
done

echo "== summary (batch 2, default ModelConfig, parameters: C++ $(field params "$tmp/cpp.txt"), Python $(field params "$tmp/py.txt"))"
printf '%s\n' "${summary[@]}"
echo "load after: $(uptime | sed 's/.*load average/load average/')"
