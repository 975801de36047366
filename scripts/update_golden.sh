#!/usr/bin/env bash
# Rewrites tests/golden/*.txt from the current build after an intended change of a report.
# Read the diff (git diff tests/golden) before committing: these files are the reviewed reports.
set -euo pipefail
cd "$(dirname "$0")/.."
petrsim=${PETRSIM:-build/petrsim}  # PETRSIM=build-x/petrsim for another build
write() {  # name, subcommand + args..., scenario
  local name="$1"; shift
  local scenario="${@: -1}"
  local args=("${@:1:$#-1}")
  "$petrsim" "${args[0]}" "$scenario" "${args[@]:1}" > "tests/golden/$name.txt" || true
}
write check_seed check scenarios/streampetr_trainval_hang.pbtxt
write check_seed_json check --json scenarios/streampetr_trainval_hang.pbtxt
write check_global check scenarios/streampetr_trainval_hang_global.pbtxt
write check_drop_empty_groups check scenarios/streampetr_trainval_hang_drop_empty_groups.pbtxt
write check_keep_empty check scenarios/streampetr_trainval_hang_keep_empty.pbtxt
write check_tiny check scenarios/tiny.pbtxt
write sample_tiny sample scenarios/tiny.pbtxt
write plan_tiny plan --iterations 2 scenarios/tiny.pbtxt
write plan_seed_json plan --iterations 1 --json scenarios/streampetr_trainval_hang.pbtxt
write sample_seed_rank1 sample --ranks 1 --iterations 200 scenarios/streampetr_trainval_hang.pbtxt
write run_seed --no-wall-time scenarios/streampetr_trainval_hang.pbtxt
write run_seed_json --no-wall-time --json scenarios/streampetr_trainval_hang.pbtxt
write run_tiny --no-wall-time scenarios/tiny.pbtxt
write run_global_one_epoch --no-wall-time --set job.epochs=1 scenarios/streampetr_trainval_hang_global.pbtxt
write run_seed_old_code_desync --no-wall-time --set plan.streampetr.old_code_skips_dn_without_gt=true \
  --set filters.filter_empty_gt=false --set job.samples_per_gpu=1 scenarios/streampetr_trainval_hang.pbtxt
write diagnose_gpu_error_1st diagnose tests/data/flight_recorder/nvrx/gpu_error_1st
write diagnose_lock_gil_2nd diagnose tests/data/flight_recorder/nvrx/lock_gil_2nd
write diagnose_lock_gil_2nd_json diagnose --json tests/data/flight_recorder/nvrx/lock_gil_2nd
write diagnose_seed_log diagnose --scenario scenarios/streampetr_trainval_hang.pbtxt tests/data/logs/seed_job_excerpt.log
write diagnose_seed_log_alone diagnose tests/data/logs/seed_job_excerpt.log
write diagnose_synthetic_8ranks_log_json diagnose --json tests/data/logs/synthetic_8ranks_torch1.9.log
write diagnose_synthetic_8ranks_log_vs_seed diagnose --scenario scenarios/streampetr_trainval_hang.pbtxt \
  tests/data/logs/synthetic_8ranks_torch1.9.log
for log in torch1.13_log:synthetic_4ranks_torch1.13 torch1.13_other_step:synthetic_4ranks_torch1.13_other_step \
    torch1.13_no_env:synthetic_4ranks_torch1.13_no_env; do
  write "diagnose_synthetic_${log%%:*}" diagnose --scenario scenarios/streampetr_trainval_hang.pbtxt \
    "tests/data/logs/${log#*:}.log"
done
# Reports on a recorded run of the seed scenario; the trace directory is printed as TRACE_DIR.
trace=$(mktemp -d)
"$petrsim" scenarios/streampetr_trainval_hang.pbtxt --trace "$trace/run" > /dev/null || true
record() {  # name, subcommand + args...
  local name="$1"; shift
  "$petrsim" "$1" "$trace/run" "${@:2}" | sed "s|$trace/run|TRACE_DIR|g" > "tests/golden/$name.txt" || true
}
record diagnose_seed diagnose
record diagnose_seed_scenario diagnose --scenario scenarios/streampetr_trainval_hang.pbtxt
record replay_seed replay --against sim
record replay_seed_global replay --against sim --set resample.policy=global
rm -rf "$trace"
git status --short tests/golden
