#!/usr/bin/env bash
# Issue 17's speed goal for training logs: a 1 GB combined log of 8 ranks is diagnosed in under 3 s (median of N
# runs; the log is generated once by bench/make_training_log.py into $PETRSIM_BENCH_DIR, default /tmp/petrsim_bench),
# plain and gzip (gzip has no goal; its figure is for the note).
# Usage: bench/diagnose_log.sh [N] [BYTES]   (needs GNU time at /usr/bin/time for the memory figure)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
bytes="${2:-1000000000}"
petrsim="${PETRSIM:-./build/petrsim}"
dir="${PETRSIM_BENCH_DIR:-/tmp/petrsim_bench}"
log="$dir/train_8_ranks_${bytes}.log"

source bench/measure.sh

mkdir -p "$dir"
if [ ! -f "$log" ]; then
  python3 bench/make_training_log.py "$log.tmp" "$bytes" && mv "$log.tmp" "$log"
fi
[ -f "$log.gz" ] || gzip -1 -k -c "$log" > "$log.gz"
"$petrsim" diagnose "$log" > /tmp/petrsim_diagnose_log.$$ || true  # exit 1: something is stuck
echo "log: $(du -h "$log" | cut -f1), $(wc -l < "$log") lines; $(head -n 1 /tmp/petrsim_diagnose_log.$$)"
grep -E "^  (0|7) " /tmp/petrsim_diagnose_log.$$ || true
rm -f /tmp/petrsim_diagnose_log.$$
measure "diagnose, 8-rank combined log of $bytes bytes" "$petrsim" diagnose "$log"
measure "diagnose, the same log gzip -1" "$petrsim" diagnose "$log.gz"
