#!/usr/bin/env bash
# `diagnose` on recordings of a failed job or an incomplete set of them (issue 33): never "healthy" (exit 0).
#   livelock_beside_bad_rank0  a good rank_1.pbtrace of a livelock next to an empty, garbage, truncated or other
#                              rank's rank_0.pbtrace: exit 1 (the spinning worker), rank 0 reported without a usable file
#   fr_synthetic_invalid_seq             Flight Recorder dumps whose entries have collective_seq_id -5: exit 3, the entries refused
#   healthy                    a whole set of a job that completed: exit 0 (the verdict line says healthy)
# Usage: diagnose_faults.sh CASE PETRSIM SOURCE_DIR WORK_DIR
set -uo pipefail
case_name=$1 petrsim=$2 source=$3 work=$4
dir="$work/diagnose_faults_$case_name"
rm -rf "$dir" && mkdir -p "$dir"
fail() {
  echo "diagnose_faults $case_name: $*"
  [ -f "$dir/diagnose.txt" ] && { echo "--- diagnose:"; cat "$dir/diagnose.txt"; }
  exit 1
}
expect() {  # expect EXIT PATH TEXT...: diagnose PATH exits EXIT and says each TEXT
  local want=$1 path=$2 text
  shift 2
  "$petrsim" diagnose "$path" >"$dir/diagnose.txt" 2>&1
  local code=$?
  [ "$code" = "$want" ] || fail "diagnose $path exited $code, expected $want"
  for text in "$@"; do grep -qF -- "$text" "$dir/diagnose.txt" || fail "diagnose $path does not say: $text"; done
  "$petrsim" diagnose --json "$path" >"$dir/diagnose.json" 2>&1
  [ $? = "$want" ] || fail "diagnose --json $path exited differently"
}
simulate() {  # simulate POLICY: traces of scenarios/tiny.pbtxt in $dir/sim (in_group: rank 1 livelocks)
  "$petrsim" "$source/scenarios/tiny.pbtxt" --set "resample.policy=$1" --trace "$dir/sim" --no-wall-time --quiet \
    >"$dir/run.txt" 2>&1
}

case "$case_name" in
  livelock_beside_bad_rank0)
    simulate in_group
    for kind in empty garbage truncated other_rank; do
      mkdir -p "$dir/$kind"
      cp "$dir/sim/rank_1.pbtrace" "$dir/$kind/"
      case $kind in
        empty) : >"$dir/$kind/rank_0.pbtrace" ;;
        garbage) printf 'not a trace at all, \x01\x02\xff garbage' >"$dir/$kind/rank_0.pbtrace" ;;
        truncated) head -c 5000 "$dir/sim/rank_0.pbtrace" >"$dir/$kind/rank_0.pbtrace" ;;
        other_rank) cp "$dir/sim/rank_1.pbtrace" "$dir/$kind/rank_0.pbtrace" ;;
      esac
      expect 1 "$dir/$kind" "DataLoader worker 1 of rank 1 never returned batch 5" "incomplete recordings (ranks 0-1)" \
        "verdict: the job failed (exit 1)"
      if [ $kind = truncated ]; then
        grep -qF "rank 0: its file was cut short" "$dir/diagnose.txt" || fail "$kind: rank 0 not said cut short"
        grep -q '"incomplete_ranks": \[\s*$' "$dir/diagnose.json" || fail "$kind: no incomplete_ranks in the JSON"
      else
        grep -qF "no usable file for rank(s) 0" "$dir/diagnose.txt" || fail "$kind: rank 0 not said missing"
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["missing_ranks"]==[0] and d["refused_files"][0]["rank"]==0 and d["partial_set"] and d["verdict"]=="failed" and d["spinning_ranks"]==[1] else 1)' \
          "$dir/diagnose.json" || fail "$kind: the JSON lacks missing_ranks [0], the refused file or the verdict"
      fi
    done
    expect 1 "$dir/other_rank" "its header says rank 1, its name rank 0: another rank's trace"
    ;;
  fr_synthetic_invalid_seq)
    expect 3 "$source/tests/data/flight_recorder_json/synthetic_invalid_seq" \
      "rank 0: 2 invalid record(s) refused, the first: entry with record_id 0 (nccl:all_reduce on group 0): collective_seq_id -5" \
      "verdict: incomplete recordings (exit 3)"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["verdict"]=="incomplete" and d["exit_code"]==3 and len(d["incomplete_ranks"])==2 else 1)' \
      "$dir/diagnose.json" || fail "the JSON lacks the verdict or the incomplete ranks"
    ;;
  healthy)
    simulate global
    expect 0 "$dir/sim" "verdict: healthy (exit 0)"
    ;;
  *)
    fail "unknown case"
    ;;
esac
echo "diagnose_faults $case_name: ok"
