#!/usr/bin/env bash
# What recording a trace costs the real backend (issue: <= 2% of step time): petrsim_train on
# tests/data/real/train_small.pbtxt, one rank (so no peer's timing mixes in), ITERATIONS
# iterations, alternately without a trace, with a streamed trace and with a ring trace, RUNS
# times each; prints each run's ms per iteration (after the first) and the medians' ratios.
# Usage: bench/trace_cost.sh [RUNS [ITERATIONS]]   (needs build/petrsim_train)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
iterations="${2:-200}"
train=./build/petrsim_train
scenario=tests/data/real/train_small.pbtxt
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
step() {  # extra args...; prints ms per iteration
  OMP_NUM_THREADS=1 "$train" "$scenario" --nproc 1 --iterations "$iterations" --set job.world_size=1 "$@" 2>/dev/null |
    sed -n 's/.*, \([0-9.]*\) ms per iteration after the first/\1/p'
}
declare -A all
for _ in $(seq "$runs"); do
  all[none]+="$(step) "
  rm -rf "$dir/stream" "$dir/ring"
  all[stream]+="$(step --trace "$dir/stream") "
  all[ring]+="$(step --trace "$dir/ring" --trace-ring 4096) "
done
median() { printf '%s\n' $1 | sort -g | sed -n "$(( (runs + 1) / 2 ))p"; }
base=$(median "${all[none]}")
for mode in none stream ring; do
  m=$(median "${all[$mode]}")
  awk -v mode="$mode" -v m="$m" -v base="$base" -v runs="${all[$mode]}" \
    'BEGIN { printf "%-7s median %7.2f ms/iteration  (%+.2f%% vs none; runs: %s)\n", mode, m, 100 * (m / base - 1), runs }'
done
echo "trace size of one streamed run: $(du -k "$dir/stream" | tail -1 | cut -f1) KiB for $iterations iterations"
