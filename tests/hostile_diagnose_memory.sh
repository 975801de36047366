#!/usr/bin/env bash
# Memory in `petrsim diagnose` on hostile recordings (issue 33, point 3): a log is read a window at a
# time (its memory constant in its size), a rank past the limit on a log's ranks is refused with its
# line, a gzip that inflates past the ratio limit is refused as it inflates, a Flight Recorder dump
# (JSON or pickle) is read entry by entry, and the root causes among 100 k stuck process groups are
# decided in linear time. Inputs are made here, small or cheap (under 100 MB, a few seconds).
# Usage: tests/hostile_diagnose_memory.sh PETRSIM WORK_DIR (from the repository root)
set -uo pipefail
petrsim=$(realpath "$1")
work=$2
repo=$(pwd)
rm -rf "$work"
mkdir -p "$work"
cd "$work"
seed=$repo/tests/data/logs/seed_job_excerpt.log

failures=0
fail() {
  echo "hostile_diagnose_memory: $*" >&2
  failures=$((failures + 1))
}
# expect CODE TEXT MAX_KB LABEL -- COMMAND...: the exit status, a text in stderr, and a peak RSS
# below MAX_KB (where /usr/bin/time is there to measure it). Under a 4 GB address space limit: a
# regression aborts rather than takes the machine's memory.
expect() {
  local code=$1 text=$2 max_kb=$3 label=$4
  shift 5
  local got
  if [ -x /usr/bin/time ]; then
    (ulimit -v 4000000; /usr/bin/time -o rss.txt -f %M timeout 60 "$@" >out.txt 2>err.txt)
    got=$?
    local rss
    rss=$(tail -1 rss.txt)
    [ "$rss" -lt "$max_kb" ] 2>/dev/null || fail "$label: peak RSS $rss KB, expected below $max_kb KB"
  else
    (ulimit -v 4000000; timeout 60 "$@" >out.txt 2>err.txt)
    got=$?
  fi
  [ "$got" = "$code" ] || fail "$label: exit $got, expected $code ($(tail -c 400 err.txt))"
  [ -z "$text" ] || grep -qF -- "$text" err.txt || fail "$label: expected \"$text\" in: $(tail -c 400 err.txt)"
}

# A rank within the prefixes' 2^24 but past the log's limit: it listed sixteen million ranks (3.1 GB).
{ cat "$seed"; echo '[E ProcessGroupNCCL.cpp:566] [Rank 16000000] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.'; } >big_rank.log
expect 2 "big_rank.log:16: [Rank 16000000]: expected a rank of the job, below 1048576" 200000 "[Rank 16000000]" -- \
  "$petrsim" diagnose big_rank.log
{ cat "$seed"; echo '[E ProcessGroupNCCL.cpp:1272] [PG 0 (default_pg) Rank 16000000] Timeout at NCCL work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.'; } >big_pg_rank.log
expect 2 "big_pg_rank.log:16: [Rank 16000000]: expected a rank of the job" 200000 "[PG 0 Rank 16000000]" -- "$petrsim" diagnose big_pg_rank.log

# Gzip bombs (10 GB of zeros in 46 MB took 3 GB): refused in the first window (zeros are binary) or
# past the ratio limit (newlines), before more than a window is held.
head -c 70M /dev/zero | gzip -1 >zeros.log.gz
expect 2 "zeros.log.gz: byte 0: expected a text training log, found binary data (after gzip)" 200000 "zero bomb" -- \
  "$petrsim" diagnose zeros.log.gz
head -c 70M /dev/zero | tr '\0' '\n' | gzip -1 >newlines.log.gz
expect 2 "more than 200 times its size (petrsim's limit on a compressed log" 200000 "newline bomb" -- \
  "$petrsim" diagnose newlines.log.gz

# A 96 MB log is read a window at a time: its memory stays below its size (it was held whole).
{ head -c 96M /dev/zero | tr '\0' 'x' | fold -w 99; echo; cat "$seed"; } >long.log
expect 1 "" 90000 "96 MB log" -- "$petrsim" diagnose long.log

# A JSON dump of 100 k entries (34 MB) is read an entry at a time (its DOM took some 15 times the text).
python3 - <<'PY'
import json
entry = {"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1,
         "p2p_seq_id": 0, "op_id": 1, "profiling_name": "nccl:all_reduce", "time_created_ns": 1000,
         "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
         "state": "scheduled", "timeout_ms": 1000, "is_p2p": False}
entries = [dict(entry, record_id=i, op_id=i, collective_seq_id=i + 1) for i in range(100000)]
dump = {"version": "2.4", "rank": 0, "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {}, "entries": entries}
with open("dump_0.json", "w") as f:
    json.dump(dump, f)
PY
expect 1 "" 250000 "JSON dump of 100 k entries" -- "$petrsim" diagnose dump_0.json

# 100 k process groups, each stuck in its first collective (rank 1 has no file): deciding which are root causes took a
# bit per candidate and instance (100 k x 100 k: 1.25 GB) and a pairwise scan (20 k groups: 2.8 s, 300 k: minutes).
mkdir -p groups
python3 - <<'PY2'
import json
n = 100000
cfg = {str(i): {"name": str(i), "desc": "pg%d" % i, "ranks": "[0, 1]"} for i in range(n)}
entries = [{"record_id": i, "pg_id": i, "process_group": [str(i), "pg%d" % i], "collective_seq_id": 1,
            "p2p_seq_id": 0, "op_id": 1, "profiling_name": "nccl:all_reduce", "time_created_ns": 1000 + i,
            "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
            "state": "scheduled", "timeout_ms": 1000, "is_p2p": False} for i in range(n)]
with open("groups/dump_0.json", "w") as f:
    json.dump({"version": "2.4", "rank": 0, "pg_config": cfg, "pg_status": {}, "entries": entries}, f)
PY2
expect 1 "" 600000 "JSON dump of 100 k stuck process groups" -- "$petrsim" diagnose groups/dump_0.json
# The first group alone is a root cause: its row above the consequences' header, the last group's below it.
root_at=$(grep -nE "^  0 +pg0 " out.txt | cut -d: -f1)
header_at=$(grep -n "^consequences:" out.txt | cut -d: -f1)
last_at=$(grep -nE "^  99999 +pg99999 " out.txt | cut -d: -f1)
[ -n "$root_at" ] && [ -n "$header_at" ] && [ -n "$last_at" ] && [ "$root_at" -lt "$header_at" ] &&
  [ "$header_at" -lt "$last_at" ] && [ "$((header_at - root_at))" -lt 4 ] ||
  fail "100 k process groups: pg0 is not the one root cause (rows $root_at, $header_at, $last_at): $(head -c 600 out.txt)"

# A pickle dump of 200 k entries (32 MB, each with three frames) is read entry by entry (its tree took 848 MB).
mkdir -p pickled
python3 - <<'PY2'
import pickle
n = 200000
def entry(i):
    return {"record_id": i, "pg_id": 0, "process_group": ("0", "default_pg"), "collective_seq_id": i + 1,
            "p2p_seq_id": 0, "op_id": i + 1, "profiling_name": "nccl:all_reduce", "time_created_ns": 1000 + i,
            "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"], "output_dtypes": ["Float"],
            "state": "completed" if i < n - 1 else "scheduled", "timeout_ms": 1000, "is_p2p": False,
            "frames": [{"name": "f", "filename": "x.py", "line": i}] * 3}
dump = {"version": "2.4", "rank": 0, "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "pg_status": {}, "entries": [entry(i) for i in range(n)]}
with open("pickled/_dump_0", "wb") as f:
    pickle.dump(dump, f, protocol=2)
PY2
expect 1 "" 450000 "pickle dump of 200 k entries" -- "$petrsim" diagnose pickled/_dump_0
grep -qF "nccl:all_reduce" out.txt || fail "pickle dump of 200 k entries: no stuck all_reduce in: $(head -c 400 out.txt)"

rm -f long.log dump_0.json groups/dump_0.json pickled/_dump_0 zeros.log.gz newlines.log.gz
if [ "$failures" -gt 0 ]; then
  echo "hostile_diagnose_memory: $failures failure(s)" >&2
  exit 1
fi
echo "hostile_diagnose_memory: all passed"
