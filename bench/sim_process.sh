#!/usr/bin/env bash
# Whole-process figures of the simulator's speed goals (issue 3), each the median of N runs:
#   - the full 24-epoch StreamPETR job (42,192 iterations, 8 ranks, global policy): <= 5 s;
#   - 4,096 ranks x 200 iterations (scenarios/scale_4096_ranks.pbtxt): <= 30 s and <= 2 GiB;
#   - the seed scenario to its hang;
#   - `sweep` of 1,000 seeds of the seed scenario on 2 jobs: <= 30 s.
# Usage: bench/sim_process.sh [N]   (needs GNU time at /usr/bin/time for the memory figure)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
petrsim=./build/petrsim

source bench/measure.sh

measure "24-epoch job, 8 ranks, global (42,192 iterations)" \
  "$petrsim" scenarios/streampetr_trainval_hang_global.pbtxt
measure "4,096 ranks x 200 iterations" "$petrsim" scenarios/scale_4096_ranks.pbtxt
measure "seed scenario to its hang" "$petrsim" scenarios/streampetr_trainval_hang.pbtxt
measure "sweep: 1,000 seeds of the seed scenario, 2 jobs" \
  "$petrsim" sweep scenarios/streampetr_trainval_hang.pbtxt --seeds 1000 --jobs 2
rm -f /tmp/petrsim_time.$$
