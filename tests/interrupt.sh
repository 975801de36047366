#!/usr/bin/env bash
# Ctrl-C leaves nothing half-written (base/temp_files.h): SIGINT to a run that writes a Perfetto
# timeline and a trace directory, sent once their .tmp files exist, kills it (exit 130, as a shell
# reports death by SIGINT) and leaves neither a .tmp file nor an output; SIGTERM the same; SIGINT
# to a sweep leaves no output. Usage: tests/interrupt.sh PETRSIM WORK_DIR
set -euo pipefail
petrsim=$1
work=$2
# Job control: background jobs keep SIGINT (a non-interactive shell would start them with it
# ignored, as Ctrl-C at a terminal never reaches them).
set -m
rm -rf "$work"
mkdir -p "$work"
# The full fix scenario: 42,192 iterations, seconds with a timeline.
scenario=scenarios/streampetr_trainval_hang_global.pbtxt

fail() {
  echo "interrupt: $*" >&2
  exit 1
}

# Waits (up to 20 s) until every path given exists; fails naming the first missing one.
wait_for() {
  for _ in $(seq 400); do
    local all=1
    for path in "$@"; do [ -e "$path" ] || all=0; done
    [ "$all" = 1 ] && return 0
    sleep 0.05
  done
  for path in "$@"; do [ -e "$path" ] || fail "$path never appeared"; done
}

# interrupted SIGNAL EXPECTED_EXIT: a run with --perfetto and --trace, stopped by SIGNAL once it
# writes.
interrupted() {
  local signal=$1 expected=$2 dir="$work/$1"
  mkdir -p "$dir"
  "$petrsim" "$scenario" --perfetto "$dir/run.json" --trace "$dir/trace" --quiet >"$dir/out.txt" 2>"$dir/err.txt" &
  local pid=$!
  wait_for "$dir/run.json.tmp" "$dir/trace/rank_0.pbtrace.tmp"
  kill "-$signal" "$pid"
  local code=0
  wait "$pid" || code=$?
  [ "$code" = "$expected" ] || fail "SIG$signal: exit $code, expected $expected; stderr: $(cat "$dir/err.txt")"
  local left
  left=$(find "$dir" -name '*.tmp' -o -name 'run.json' -o -name '*.pbtrace')
  [ -z "$left" ] || fail "SIG$signal left: $left"
  [ ! -s "$dir/out.txt" ] || fail "SIG$signal: a report on stdout: $(cat "$dir/out.txt")"
  echo "SIG$signal: exit $code, nothing left"
}
interrupted INT 130
interrupted TERM 143

# A sweep prints its table only at the end: interrupted, it prints nothing.
"$petrsim" sweep "$scenario" --seeds 4 --jobs 1 >"$work/sweep.txt" 2>"$work/sweep_err.txt" &
pid=$!
sleep 0.5
kill -INT "$pid"
code=0
wait "$pid" || code=$?
[ "$code" = 130 ] || fail "sweep: exit $code, expected 130; stderr: $(cat "$work/sweep_err.txt")"
[ ! -s "$work/sweep.txt" ] || fail "sweep: printed: $(cat "$work/sweep.txt")"
echo "sweep: exit $code, nothing printed"

# The same run left alone writes both (so the checks above could fail).
"$petrsim" scenarios/tiny.pbtxt --perfetto "$work/tiny.json" --trace "$work/tiny" >/dev/null || true
[ -s "$work/tiny.json" ] && [ -s "$work/tiny/rank_0.pbtrace" ] || fail "a run left alone wrote no timeline or trace"
[ -z "$(find "$work/tiny" "$work/tiny.json" -name '*.tmp')" ] || fail "a finished run left a .tmp file"
echo "ok"
