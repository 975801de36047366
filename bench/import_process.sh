#!/usr/bin/env bash
# Whole-process wall time and peak RSS of `petrsim import mmdet3d-infos` on a trainval-size info
# pickle (the issue's goal: 34,149 frames, ~1.2 M boxes in <= 5 s and <= 2 GiB), over N runs.
# The pickle is generated once into /tmp by bench/make_import_bench_infos.py (Debian's
# python3-numpy; about a minute, 3 GB of memory, 0.8 GB on disk).
# Usage: bench/import_process.sh [N] [PETRSIM]   (default: 3 runs of build/petrsim)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
petrsim="${2:-build/petrsim}"
infos=/tmp/petrsim_bench_trainval_infos.pkl
if [ ! -s "$infos" ]; then
  /usr/bin/python3 bench/make_import_bench_infos.py "$infos"
fi
source bench/measure.sh
out=/tmp/petrsim_bench_trainval.pbtxt
echo "$(du -h "$infos" | cut -f1) $infos"
measure "import mmdet3d-infos (34,149 frames, 1.2 M boxes)" \
  "$petrsim" import mmdet3d-infos "$infos" -o "$out"
"$petrsim" import mmdet3d-infos "$infos" -o "$out" | sed -n 2,3p
measure "check of the imported scenario" "$petrsim" check "$out"
rm -f "$out"
