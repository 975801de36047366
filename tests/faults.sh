#!/usr/bin/env bash
# The real backend's kill and signal cases (issue 15; ctest -L faults), each bounded in time and
# leaving no process behind:
#   sigterm_ranks     a hung job's ranks get SIGTERM (a scheduler's time limit): diagnose names
#                     the stuck collective and the rank that never reached it, and why
#   sigterm_launcher  the launcher gets SIGTERM: it passes it on, waits, and dies of it
#   sigkill_launcher  the launcher is SIGKILLed: its ranks die with it (PR_SET_PDEATHSIG)
#   sigkill_rank      a rank is SIGKILLed (dead_rank fault): the launcher writes it into its trace
#   port_in_use       MASTER_PORT taken: exit 2 with a message naming it
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
expect_diagnosis() {  # expect_diagnosis TEXT...
  "$petrsim" diagnose "$dir/t" >"$dir/diagnose.txt" 2>&1
  local code=$?
  [ "$code" = 1 ] || fail "diagnose exited $code, expected 1 (a stuck collective)"
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
  *)
    fail "unknown case"
    ;;
esac
echo "faults $case_name: ok"
