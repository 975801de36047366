#!/usr/bin/env bash
# Whole-process wall time of `petrsim check` on the seed scenario (the issue's goal: <= 100 ms),
# over N runs; prints min, median and max in milliseconds. Usage: bench/check_process.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-50}"
scenario=scenarios/streampetr_trainval_hang.pbtxt
times=()
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  ./build/petrsim check "$scenario" > /dev/null || [ $? -eq 1 ]  # exit 1: the hang it predicts
  end=$(date +%s%N)
  times+=($(( (end - start) / 1000 )))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
ms() { awk -v us="$1" 'BEGIN { printf "%.1f", us / 1000 }'; }
echo "petrsim check $scenario, $runs runs: min $(ms "${sorted[0]}") ms," \
     "median $(ms "${sorted[$((runs / 2))]}") ms, max $(ms "${sorted[$((runs - 1))]}") ms"
