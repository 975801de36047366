#!/usr/bin/env bash
# Real Slurm on this one machine (issue 32; ctest -L slurm): Debian's munge and slurm-wlm
# (scripts/setup.sh installs them) run from a generated minimal slurm.conf in a temporary
# directory (loopback only, one node "localhost" with 4 CPUs, no cgroups, no accounting), and the
# sbatch scripts shipped in docs/slurm/ run on it, their variables set from here:
#   sweep     sweep_array.sbatch as an array job (3 tasks, one `--shard K/3` each), then
#             sweep_merge.sbatch after it (--dependency=afterok): the merged JSON equals the
#             unsharded `petrsim sweep --json` byte for byte
#   train     train_petrsim.sbatch: `srun -n 2 petrsim train` of scenarios/tiny.pbtxt, whose
#             in_group sampler livelocks rank 1: every rank reads Slurm's variables (no torchrun's
#             are set), the job fails with the watchdog's cause long before the collective
#             timeout, and `petrsim diagnose` of its traces names rank 1's spinning worker
#   probe     train_probe.sbatch: srun + torchrun (2 ranks) + petrsim_probe around the planted
#             reference job (tests/probe/reference_job.py --plant): the probe's watchdog stops it
#             naming the rank, worker and batch `petrsim check` predicts, and `petrsim diagnose`
#             of the probe's traces names that rank
# Every daemon is started here (in the foreground mode, as a child of this script) and stopped on
# exit, whatever happens; the jobs' processes are found by a marker in their environment and
# killed by pid; the test fails if any is left. Exit 77 (skipped), saying why, when the daemons
# cannot run here: not root (slurmd starts jobs as their user), the programs missing, or a daemon
# refused a privilege.
# Usage: slurm_cluster.sh PETRSIM [--keep] [CASE...]   (cases: sweep train probe; default all)
set -uo pipefail
SKIP=77
repo=$(cd "$(dirname "$0")/.." && pwd)
petrsim=$(realpath "$1")
shift
keep=0
cases=()
for arg in "$@"; do
  if [ "$arg" = --keep ]; then keep=1; else cases+=("$arg"); fi
done
[ ${#cases[@]} -gt 0 ] || cases=(sweep train probe)
python=/usr/bin/python3
torchrun=/usr/bin/torchrun
skipped=()

skip() {
  echo "SKIP: slurm_cluster: $*"
  exit "$SKIP"
}
[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root to start jobs (it switches to the job's user); this is uid $(id -u)"
for program in munged slurmctld slurmd sbatch srun scontrol sinfo scancel squeue python3; do
  command -v "$program" > /dev/null ||
    skip "$program not found: scripts/setup.sh installs Debian's slurm-wlm and munge"
done

# A short path: munge's socket path must fit a sockaddr_un (108 bytes).
work=$(mktemp -d /tmp/petrsim_slurm_XXXXXX)
chmod 755 "$work"
marker="PETRSIM_SLURM_TEST=$work"
export PETRSIM_SLURM_TEST="$work"  # every daemon and every job's process carries it
export SLURM_CONF="$work/slurm.conf"
# No torchrun variable may leak into the jobs: `train` checks that the ranks find their place in
# Slurm's variables alone.
unset RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT
daemon_pids=()
started=$(date +%s)

# The pids of the processes whose environment holds the marker: the daemons, slurmstepd, the
# jobs' tasks and their children. (This script and its subshells do not: /proc/PID/environ is the
# environment a program was started with, before the export above.)
marked_pids() {
  local environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    [ "$pid" = "$$" ] || [ "$pid" = "$BASHPID" ] && continue
    grep -qzx -- "$marker" "$environ" 2> /dev/null || continue
    echo "$pid"
  done
}

stop_all() {
  # The jobs first (slurmstepd outlives a killed slurmd), then the daemons, newest first.
  if [ ${#daemon_pids[@]} -gt 0 ]; then
    timeout 10 scancel --quiet --full "--user=$(id -un)" 2> /dev/null
  fi
  local i pid
  for ((i = ${#daemon_pids[@]} - 1; i >= 0; i--)); do
    pid=${daemon_pids[i]}
    kill -TERM "$pid" 2> /dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2> /dev/null
    wait "$pid" 2> /dev/null
  done
  for pid in $(marked_pids); do kill -KILL "$pid" 2> /dev/null; done
}

cleanup() {
  local status=$?
  stop_all
  sleep 0.5
  local left
  left=$(marked_pids)
  if [ -n "$left" ]; then
    echo "FAIL: slurm_cluster: processes left after stopping everything:"
    for pid in $left; do echo "  $(ps -o pid=,comm=,args= -p "$pid")"; done
    status=1
  fi
  for daemon in munged slurmctld slurmd slurmstepd; do
    if pgrep -x "$daemon" > /dev/null; then
      echo "note: a $daemon is running that this test did not start: $(pgrep -ax "$daemon")"
    fi
  done
  if [ "$keep" = 1 ] || [ "$status" -ne 0 ] && [ "$status" -ne "$SKIP" ]; then
    echo "slurm_cluster: kept $work"
  else
    rm -rf "$work"
  fi
  echo "slurm_cluster: $(($(date +%s) - started)) s, exit $status"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
# Should this script be killed outright (ctest's timeout sends SIGKILL to it and its children),
# a guard outside its process tree kills whatever carries the marker once it is gone: slurmstepd
# and the jobs' tasks are no children of this script. The guard itself carries no marker and
# ends with the script.
env -u PETRSIM_SLURM_TEST setsid -f bash -c 'while kill -0 "$1" 2> /dev/null; do sleep 1; done
  for environ in /proc/[0-9]*/environ; do
    grep -qzx -- "$2" "$environ" 2> /dev/null && { pid=${environ#/proc/}; kill -KILL "${pid%/environ}"; }
  done' guard "$$" "$marker" > /dev/null 2>&1 < /dev/null

fail() {
  echo "FAIL: slurm_cluster: $*"
  exit 1
}
show() {  # show FILE...: the end of each file, for a failure's context
  local f
  for f in "$@"; do [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }; done
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {
  mkdir -p "$work/state" "$work/spool" "$work/log" "$work/run" "$work/munge"
  chmod 700 "$work/munge"
  head -c 1024 /dev/urandom > "$work/munge/munge.key"
  chmod 400 "$work/munge/munge.key"
  local ctld_port slurmd_port
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  [ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$(free_port)
  # No cgroups, no accounting, no mail; the node's CPUs as written (config_overrides: the machine
  # may have fewer); a job whose dependency can never be met is cancelled, not left pending.
  cat > "$SLURM_CONF" << EOF
ClusterName=petrsimtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=kill_invalid_depend
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=UNLIMITED State=UP
EOF
}

# Why the daemons did not come up: a privilege this sandbox refuses is a skip, anything else a
# failure (a bad slurm.conf is this test's bug).
not_up() {
  show "$work"/log/*
  if grep -qiE "permission denied|operation not permitted|cannot set|capabilit" "$work"/log/* 2> /dev/null; then
    skip "$1; the logs above show a privilege this machine refuses"
  fi
  fail "$1"
}

start_cluster() {
  write_config
  munged --foreground --force --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
    --log-file="$work/log/munged.log" --pid-file="$work/run/munged.pid" \
    --seed-file="$work/munge/munged.seed" > "$work/log/munged.out" 2>&1 &
  daemon_pids+=($!)
  local i
  for ((i = 0; i < 50; i++)); do [ -S "$work/munge/munge.socket" ] && break; sleep 0.1; done
  [ -S "$work/munge/munge.socket" ] || not_up "munged did not create its socket within 5 s"
  slurmctld -D -i -f "$SLURM_CONF" > "$work/log/slurmctld.out" 2>&1 &
  daemon_pids+=($!)
  slurmd -D -N localhost -f "$SLURM_CONF" > "$work/log/slurmd.out" 2>&1 &
  daemon_pids+=($!)
  local state=""
  for ((i = 0; i < 150; i++)); do
    state=$(sinfo -h -n localhost -o %T 2> /dev/null)
    [ "$state" = idle ] && break
    for pid in "${daemon_pids[@]}"; do kill -0 "$pid" 2> /dev/null || not_up "a daemon (pid $pid) exited"; done
    sleep 0.2
  done
  [ "$state" = idle ] || not_up "the node is '${state:-unknown}', not idle, 30 s after the daemons started"
  echo "slurm_cluster: munged, slurmctld, slurmd up (pids ${daemon_pids[*]}) in $(($(date +%s) - started)) s; $(srun --version)"
}

# sbatch_wait NAME SECONDS SBATCH_ARGS...: submits and waits for the job; its exit status.
sbatch_wait() {
  local name=$1 seconds=$2
  shift 2
  timeout "$seconds" sbatch --wait --quiet "$@"
  local code=$?
  [ "$code" = 124 ] && fail "$name: still running after $seconds s: $(squeue -h 2>&1)"
  return "$code"
}

case_sweep() {
  local dir="$work/sweep" scenario="$repo/scenarios/tiny.pbtxt"
  local args="--vary resample.policy=in_group,global --seeds 3"
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # the arguments are words
  "$petrsim" sweep "$scenario" $args --json --quiet > "$dir/unsharded.json" || fail "sweep: the unsharded sweep failed"
  local jid
  jid=$(SCENARIO=$scenario SWEEP_ARGS=$args SWEEP_DIR=$dir/shards PETRSIM=$petrsim \
    sbatch --parsable --array=1-3 --time=5 --cpus-per-task=1 --chdir="$dir" --output="$dir/array_%A_%a.log" \
    "$repo/docs/slurm/sweep_array.sbatch") || fail "sweep: sbatch --array refused the job"
  SWEEP_DIR=$dir/shards PETRSIM=$petrsim MERGE_ARGS=--json MERGED=$dir/merged.json \
    sbatch_wait sweep 120 --time=5 --dependency="afterok:$jid" --chdir="$dir" --output="$dir/merge.log" \
    "$repo/docs/slurm/sweep_merge.sbatch" || { show "$dir"/*.log; fail "sweep: the array or the merge job failed"; }
  local shards
  shards=$(ls "$dir/shards")
  [ "$shards" = "$(printf 'shard_%s_of_3.json\n' 1 2 3)" ] || fail "sweep: expected 3 shard files, found: $shards"
  cmp "$dir/unsharded.json" "$dir/merged.json" ||
    { diff "$dir/unsharded.json" "$dir/merged.json" | head -20; fail "sweep: merged != unsharded"; }
  echo "slurm_cluster: sweep: array job $jid (3 shards) merged == the unsharded sweep ($(wc -c < "$dir/merged.json") bytes)"
}

case_train() {
  [ -x "$(dirname "$petrsim")/petrsim_train" ] || {
    skipped+=("train: no petrsim_train beside $petrsim (the real backend is built where LibTorch and Gloo are found)")
    return
  }
  local dir="$work/train"
  mkdir -p "$dir"
  local begin code
  begin=$(date +%s)
  SCENARIO="$repo/scenarios/tiny.pbtxt" PETRSIM="$petrsim" TRACE_DIR="$dir/traces" \
    TRAIN_ARGS="--backend gloo --timeout-ms 120000 --quiet" \
    sbatch_wait train 170 --time=5 --ntasks=2 --cpus-per-task=1 --chdir="$dir" --output="$dir/job.log" \
    "$repo/docs/slurm/train_petrsim.sbatch"
  code=$?
  local seconds=$(($(date +%s) - begin))
  [ "$code" != 0 ] || { show "$dir/job.log"; fail "train: the job exited 0, expected the livelock to fail it"; }
  [ "$seconds" -lt 110 ] || { show "$dir/job.log"; fail "train: $seconds s: not stopped before the 120 s collective timeout"; }
  local log="$dir/job.log" expected
  grep -qE "petrsim_train: rank 0 stop(s|ped by another rank): sampler watchdog: rank 1, worker 1" "$log" ||
    { show "$log"; fail "train: rank 0 does not say the job stopped for rank 1's livelock"; }
  for expected in "sampler watchdog: rank 1, worker 1: the resample loop of batch 5 slot 0" \
    "DataLoader worker 1 of rank 1 never returned batch 5"; do
    grep -qF -- "$expected" "$log" || { show "$log"; fail "train: the job's log does not say: $expected"; }
  done
  [ -f "$dir/traces/rank_0.pbtrace" ] && [ -f "$dir/traces/rank_1.pbtrace" ] ||
    fail "train: expected the traces of ranks 0 and 1 (SLURM_PROCID), found: $(ls "$dir/traces")"
  "$petrsim" diagnose "$dir/traces" > "$dir/diagnose.txt" 2>&1
  code=$?
  [ "$code" = 1 ] || { show "$dir/diagnose.txt"; fail "train: diagnose exited $code, expected 1 (a stuck collective)"; }
  grep -qF "DataLoader worker 1 of rank 1 never returned batch 5" "$dir/diagnose.txt" ||
    { show "$dir/diagnose.txt"; fail "train: diagnose does not name rank 1's worker"; }
  echo "slurm_cluster: train: srun -n 2 petrsim train stopped by rank 1's livelock after $seconds s; diagnose names it"
}

case_probe() {
  # Debian's python3 with its torch, as the other probe tests (not whatever python3 is first on PATH).
  "$python" -c 'import torch, torch.distributed' 2> /dev/null || {
    skipped+=("probe: $python cannot import torch (Debian python3-torch)")
    return
  }
  local dir="$work/probe" planted="$repo/tests/probe/reference_job_planted.pbtxt"
  mkdir -p "$dir"
  "$petrsim" check "$planted" --json > "$dir/check.json"
  [ $? = 1 ] || fail "probe: petrsim check does not predict the planted livelock"
  local hit
  hit=$("$python" -c 'import json, sys
h = json.load(open(sys.argv[1]))["livelock_pools"][0]["first_hit"]
print("rank {} DataLoader worker {}, batch {} (slot {}, index {})".format(
    h["rank"], h["worker"], h["iteration"], h["slot"], h["index"]))' "$dir/check.json") ||
    fail "probe: cannot read check's first hit"
  local begin code
  begin=$(date +%s)
  PYTHONPATH="$repo/probe${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 NPROC_PER_NODE=2 \
    TRAIN_SCRIPT="$repo/tests/probe/reference_job.py" TRAIN_ARGS="--plant" TRACE_DIR="$dir/traces" \
    PROBE_ARGS="--livelock-attempts 50 --livelock-seconds 1" \
    TORCHRUN="$torchrun" sbatch_wait probe 150 --time=5 --nodes=1 --cpus-per-task=4 --chdir="$dir" --output="$dir/job.log" \
    "$repo/docs/slurm/train_probe.sbatch"
  code=$?
  local seconds=$(($(date +%s) - begin))
  [ "$code" != 0 ] || { show "$dir/job.log"; fail "probe: the planted job exited 0: the watchdog did not stop it"; }
  grep -qF "LivelockError: petrsim_probe: sampler livelock: $hit" "$dir/job.log" ||
    { show "$dir/job.log"; fail "probe: the job's log has no probe livelock error naming $hit"; }
  "$petrsim" diagnose "$dir/traces" --json > "$dir/diagnose.json" 2> "$dir/diagnose.err"
  "$python" -c 'import json, sys
d = json.load(open(sys.argv[1]))["cause_detail"]
h = json.load(open(sys.argv[2]))["livelock_pools"][0]["first_hit"]
got = (d.get("kind"), d.get("rank"), d.get("worker"), d.get("batch"))
want = ("livelock", h["rank"], h["worker"], h["iteration"])
sys.exit(0 if got == want else "diagnose names {} (kind, rank, worker, batch), check {}".format(got, want))' \
    "$dir/diagnose.json" "$dir/check.json" || { show "$dir/diagnose.err"; fail "probe: diagnose of the probe's traces"; }
  echo "slurm_cluster: probe: srun + torchrun (2 ranks) + petrsim_probe: stopped after $seconds s naming $hit; diagnose agrees"
}

start_cluster
for name in "${cases[@]}"; do
  case "$name" in
    sweep | train | probe) "case_$name" ;;
    *) fail "unknown case $name (sweep, train, probe)" ;;
  esac
done
if [ ${#skipped[@]} -gt 0 ]; then
  skip "the other cases passed; skipped: ${skipped[*]}"
fi
echo "slurm_cluster: every case passed: ${cases[*]}"
