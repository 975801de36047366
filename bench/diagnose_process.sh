#!/usr/bin/env bash
# Whole-process figures of `petrsim diagnose` (issue 5), each the median of N runs:
#   - 1,024 ranks x about 100,000 trace events each (bench/diagnose_1024_ranks.pbtxt, recorded
#     once with --trace into $PETRSIM_BENCH_DIR, default /tmp/petrsim_bench; 6-7 GB): <= 10 s
#     and <= 4 GiB;
#   - each of the four nvrx Flight Recorder cases (16 ranks): <= 200 ms.
# Usage: bench/diagnose_process.sh [N]   (needs GNU time at /usr/bin/time for the memory figure)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
petrsim=./build/petrsim
dir="${PETRSIM_BENCH_DIR:-/tmp/petrsim_bench}/diagnose_1024_ranks"

source bench/measure.sh

if [ ! -f "$dir/rank_1023.pbtrace" ]; then
  echo "recording the 1,024-rank trace into $dir (once; about 2 minutes)"
  rm -rf "$dir"
  "$petrsim" bench/diagnose_1024_ranks.pbtxt --trace "$dir" --trace-records-max 200000000 \
    --no-wall-time > /dev/null || true
fi
"$petrsim" diagnose "$dir" > /tmp/petrsim_diagnose.$$ || true  # exit 1: something is stuck
echo "trace: $(du -sh "$dir" | cut -f1) in $(ls "$dir" | wc -l) files; $(head -n 1 /tmp/petrsim_diagnose.$$)"
measure "diagnose, 1,024 ranks x ~100,000 events" "$petrsim" diagnose "$dir"
for case in gpu_error_1st gpu_error_2nd lock_gil_1st lock_gil_2nd; do
  measure "diagnose, nvrx $case (16 Flight Recorder dumps)" \
    "$petrsim" diagnose tests/data/flight_recorder/nvrx/$case
done
