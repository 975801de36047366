#!/usr/bin/env bash
# The memory estimate (check/memory_estimate.h) against the peak RSS /usr/bin/time measures, for
# datasets of growing size and jobs of growing rank x worker x prefetch counts: prints both and
# their ratio (the estimate should stay at or a little above what is measured).
# Usage: bench/memory_estimate.sh [PETRSIM]   (default build/petrsim; takes about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
petrsim="${1:-build/petrsim}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf "%-8s %-46s %12s %12s %6s\n" command case estimate measured ratio
for spec in "run 2500 2 1 1 1" "run 25000 2 1 1 1" "run 100000 2 1 1 1" "check 25000 2 1 1 1" "check 100000 2 1 1 1" \
            "run 2500 1024 16 4 1" "run 2500 1024 32 4 1" "run 2500 1024 16 8 4" "run 2500 4096 32 8 1"; do
  read -r command scenes world workers prefetch batch <<<"$spec"
  file="$tmp/s.pbtxt"
  cat >"$file" <<X
dataset { subdatasets { name: "d" synthetic { scenes: $scenes frames_per_scene_min: 40 frames_per_scene_max: 40 boxes_per_frame_mean: 5 } } }
resample { policy: global }
job { world_size: $world samples_per_gpu: $batch workers_per_gpu: $workers prefetch_factor: $prefetch iterations: 3 }
X
  args=("$file")
  [ "$command" = check ] && args=(check "$file")
  # The estimate, from the refusal with a 1-byte limit.
  estimate=$("$petrsim" "${args[@]}" --memory-max 1 2>&1 | sed -nE 's/.*needs about ([0-9.]+ [KMG]iB).*/\1/p' || true)
  /usr/bin/time -f "%M" -o "$tmp/rss" "$petrsim" "${args[@]}" >/dev/null 2>&1 || true  # exit 1: a hang or a livelock
  kib=$(tail -1 "$tmp/rss")
  measured=$(awk -v k="$kib" 'BEGIN { printf "%.1f MiB", k / 1024 }')
  ratio=$(awk -v e="$estimate" -v k="$kib" 'BEGIN { split(e, p, " "); m = p[1] * (p[2] == "GiB" ? 1024 : p[2] == "KiB" ? 1/1024 : 1); printf "%.2f", m / (k / 1024) }')
  printf "%-8s %-46s %12s %12s %6s\n" "$command" "$((scenes * 40)) frames, $world x $workers x $prefetch (batch $batch)" "$estimate" "$measured" "$ratio"
done
