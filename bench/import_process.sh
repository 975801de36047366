#!/usr/bin/env bash
# Whole-process wall time and peak RSS of `petrsim import mmdet3d-infos` on a trainval-size info
# pickle (34,149 frames, ~1.2 M boxes), and of `petrsim check` on what it writes, in both
# encodings, with the size on disk of each, over N runs. Goals: the import in <= 5 s and
# <= 2 GiB; the imported scenario checkable in <= 0.5 s and <= 200 MiB, and <= 30 MB on disk.
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
echo "$(du -h "$infos" | cut -f1) $infos"
for out in /tmp/petrsim_bench_trainval.pb /tmp/petrsim_bench_trainval.pbtxt; do
  measure "import mmdet3d-infos -o $(basename "$out")" "$petrsim" import mmdet3d-infos --quiet "$infos" -o "$out"
  "$petrsim" import mmdet3d-infos --quiet "$infos" -o "$out" 2>/dev/null | sed -n 1,3p
  printf '%-58s %s bytes\n' "size on disk of $(basename "$out")" "$(stat -c %s "$out")"
  measure "check $(basename "$out")" "$petrsim" check "$out"
  rm -f "$out"
done
