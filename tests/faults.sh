#!/usr/bin/env bash
# The real backend's kill and signal cases (issue 15; ctest -L faults), each bounded in time and
# leaving no process behind:
#   sigterm_ranks     a hung job's ranks get SIGTERM (a scheduler's time limit): diagnose names
#                     the stuck collective and the rank that never reached it, and why
#   sigterm_launcher  the launcher gets SIGTERM: it passes it on, waits, and dies of it
#   sigkill_launcher  the launcher is SIGKILLed: its ranks die with it (PR_SET_PDEATHSIG)
#   sigkill_rank      a rank is SIGKILLed (dead_rank fault): the launcher writes it into its trace
#   port_in_use       MASTER_PORT taken: exit 2 with a message naming it
#   sigterm_one_rank  one rank of a healthy job gets SIGTERM (issue 33): the job failed, so diagnose exits 1
#                     naming the death, though no collective is left stuck
#   sigstop_rank      a rank is stopped (SIGSTOP): the other's watchdog fires, the launcher SIGKILLs the stopped
#                     rank; its trace and diagnose say it was stopped, then killed by the launcher
#   shared_port       two env-launched jobs on one MASTER_PORT: the second's ranks record nothing, and its
#                     diagnose says so (exit 3, never 0)
# Usage: faults.sh CASE PETRSIM_TRAIN PETRSIM SCENARIO WORK_DIR
set -uo pipefail
case_name=$1 train=$2 petrsim=$3 scenario=$4 work=$5
dir="$work/faults_$case_name"
rm -rf "$dir" && mkdir -p "$dir"
launcher=""
cleanup() {
  # Whatever is still running of this case goes (the launcher, then any rank it left).
  [ -n "$launcher" ] && kill -KILL "$launcher" 2>/dev/null
  pkill -KILL -f -- "--trace $dir/t" 2>/dev/null
  true
}
trap cleanup EXIT
fail() {
  echo "faults $case_name: $*"
  for f in "$dir"/*.txt; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
# A job that hangs: rank 1 straggles 10 minutes in iteration 1, rank 0 waits in a collective.
hung_job() {  # hung_job EXTRA_ARGS...
  "$train" "$scenario" --nproc 2 --backend gloo --set resample.policy=global \
    --set 'faults[0].straggler.rank=1' --set 'faults[0].straggler.iteration=1' \
    --set 'faults[0].straggler.delay_ns=600000000000' --iterations 100 --trace "$dir/t" "$@" \
    >"$dir/launcher.txt" 2>&1 &
  launcher=$!
  sleep 15  # startup and the first iteration take a few seconds, even on a busy machine
}
ranks_of() { pgrep -P "$1" || true; }
wait_gone() {  # wait_gone PID SECONDS: the process has ended (and was reaped) within SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}
no_rank_left() {
  sleep 1
  if pgrep -f -- "--trace $dir/t" >/dev/null; then fail "processes left: $(pgrep -af -- "--trace $dir/t")"; fi
}
# signal_a_rank SIGNAL head|tail TIMEOUT_MS SECONDS: a 2-rank livelocked job with the watchdog at TIMEOUT_MS; 8 s in,
# its first (head) or last (tail) rank gets SIGNAL; the launcher must end within SECONDS and exit 1.
signal_a_rank() {
  "$train" "$scenario" --nproc 2 --backend gloo --set resample.policy=global --iterations 400 --timeout-ms "$3" \
    --trace "$dir/t" >"$dir/launcher.txt" 2>&1 &
  launcher=$!
  sleep 8
  rank=$(ranks_of "$launcher" | "$2" -1)
  [ -n "$rank" ] || fail "no rank under the launcher"
  kill -"$1" "$rank"
  wait_gone "$launcher" "$4" || fail "the launcher did not end within $4 s of a rank's SIG$1"
  wait "$launcher"; code=$?; launcher=""
  [ "$code" = 1 ] || fail "the launcher exited $code, expected 1"
}
expect_diagnosis() {  # expect_diagnosis TEXT...: diagnose exits 1 (a failed job) and says each TEXT
  "$petrsim" diagnose "$dir/t" >"$dir/diagnose.txt" 2>&1
  local code=$?
  [ "$code" = 1 ] || fail "diagnose exited $code, expected 1 (a failed job)"
  local text
  for text in "$@"; do grep -qF -- "$text" "$dir/diagnose.txt" || fail "diagnose does not say: $text"; done
}

case "$case_name" in
  sigterm_ranks)
    hung_job --trace-ring 1000
    ranks=$(ranks_of "$launcher")
    [ "$(wc -w <<<"$ranks")" = 2 ] || fail "expected 2 ranks under the launcher, found: $ranks"
    kill -TERM $ranks
    wait_gone "$launcher" 20 || fail "the launcher did not end within 20 s of its ranks' SIGTERM"
    wait "$launcher"; code=$?; launcher=""
    [ "$code" = 1 ] || fail "the launcher exited $code, expected 1"
    no_rank_left
    expect_diagnosis "stuck:" "rank 1 never reached it: it died: terminated by SIGTERM" "straggling (a fault) in iteration 1"
    ;;
  sigterm_launcher)
    hung_job
    kill -TERM "$launcher"
    wait_gone "$launcher" 20 || fail "the launcher did not end within 20 s of its SIGTERM"
    wait "$launcher"; code=$?; launcher=""
    [ "$code" = 143 ] || fail "the launcher exited $code, expected 143 (death by SIGTERM)"
    grep -q "got SIGTERM: passing it to the ranks" "$dir/launcher.txt" || fail "the launcher did not say it passed SIGTERM on"
    no_rank_left
    expect_diagnosis "rank 1 never reached it: it died: terminated by SIGTERM" "straggling (a fault) in iteration 1"
    ;;
  sigkill_launcher)
    hung_job
    ranks=$(ranks_of "$launcher")
    kill -KILL "$launcher"
    wait "$launcher" 2>/dev/null; launcher=""
    for r in $ranks; do wait_gone "$r" 20 || fail "rank process $r outlived its SIGKILLed launcher by 20 s"; done
    no_rank_left
    expect_diagnosis "rank 1 never reached it: it died: terminated by SIGTERM"
    ;;
  sigkill_rank)
    timeout 120 "$train" "$scenario" --nproc 2 --backend gloo --set resample.policy=global \
      --set 'faults[0].dead_rank.rank=1' --set 'faults[0].dead_rank.at_ns=4000000000' --iterations 400 \
      --timeout-ms 5000 --trace "$dir/t" --trace-ring 1000 >"$dir/launcher.txt" 2>&1
    code=$?
    [ "$code" = 1 ] || fail "the launcher exited $code, expected 1"
    grep -q "rank 1 was killed by SIGKILL" "$dir/launcher.txt" || fail "the launcher did not report the SIGKILL"
    no_rank_left
    expect_diagnosis "rank 1 never reached it: it was killed by SIGKILL (the launcher saw its process"
    ;;
  port_in_use)
    # A port held by another process while rank 0 tries to serve the TCPStore on it.
    python3 - "$train" "$scenario" >"$dir/port.txt" 2>&1 <<'PY'
import os, socket, subprocess, sys
held = socket.socket()
held.bind(("127.0.0.1", 0))
held.listen(1)
port = held.getsockname()[1]
env = dict(os.environ, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
run = subprocess.run([sys.argv[1], sys.argv[2], "--backend", "gloo"], env=env, capture_output=True, text=True, timeout=60)
print(run.stderr)
want = f"MASTER_PORT={port}: the port is already in use on this host"
sys.exit(0 if run.returncode == 2 and want in run.stderr and run.stdout == "" else 1)
PY
    [ $? = 0 ] || fail "a port in use did not give exit 2 with a message naming MASTER_PORT"
    ;;
  sigterm_one_rank)
    signal_a_rank TERM head 5000 30
    no_rank_left
    expect_diagnosis "terminated by SIGTERM from outside"
    # Two timings, both a failed job: the other rank was in a collective the dead one never joined
    # (then that collective is stuck and its cause is the death), or it was not (then the deaths
    # are listed, with the verdict).
    if grep -q "^stuck:" "$dir/diagnose.txt"; then
      grep -qF "never reached it: it died: terminated by SIGTERM" "$dir/diagnose.txt" ||
        fail "a collective is stuck, but its cause is not rank 0's SIGTERM"
    else
      for text in "ranks that died or failed" "verdict: the job failed (exit 1)"; do
        grep -qF -- "$text" "$dir/diagnose.txt" || fail "diagnose does not say: $text"
      done
    fi
    ;;
  sigstop_rank)
    signal_a_rank STOP tail 2000 40
    grep -q "was stopped (SIGSTOP or a debugger), then killed by SIGKILL from the launcher" "$dir/launcher.txt" ||
      fail "the launcher did not say the rank was stopped, then killed by it"
    no_rank_left
    expect_diagnosis "it was stopped (SIGSTOP or a debugger), then killed by SIGKILL from the launcher"
    ;;
  shared_port)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    pids=()
    for job in a b; do
      for r in 0 1; do
        RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$train" "$scenario" --backend gloo \
          --set resample.policy=global --iterations 20 --timeout-ms 5000 --trace "$dir/t_$job" \
          >"$dir/job_${job}_$r.txt" 2>&1 &
        pids+=($!)
      done
      sleep 2  # job a serves the port when job b starts
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    grep -q "MASTER_PORT=$port: the port is already in use" "$dir/job_b_0.txt" || fail "job b's rank 0 did not fail on the port"
    "$petrsim" diagnose "$dir/t_b" >"$dir/diagnose.txt" 2>&1
    code=$?
    [ "$code" = 3 ] || fail "diagnose of job b exited $code, expected 3 (incomplete)"
    grep -qF "rank 0: its trace holds no event" "$dir/diagnose.txt" || fail "diagnose does not say rank 0 recorded nothing"
    ;;
  *)
    fail "unknown case"
    ;;
esac
echo "faults $case_name: ok"
