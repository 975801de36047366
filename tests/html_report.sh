#!/usr/bin/env bash
# `sweep --html`, `merge --html` and `diagnose --html` on the real executable: the pages are
# written beside the usual stdout output, parse as XML (Debian's /usr/bin/python3, xml.etree),
# and show the numbers the sweep's --json and diagnose's --json say (tests/html_report_check.py);
# a path that cannot be written is exit 2 with no output and no file; --html with --shard is
# refused. Usage: tests/html_report.sh PETRSIM WORK_DIR
set -euo pipefail
petrsim=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
scenario=scenarios/tiny.pbtxt  # hangs at iteration 5 with the in_group policy, completes with global
vary=(--vary resample.policy=in_group,global --seeds 20 --quiet)

fail() {
  echo "html_report: $*" >&2
  exit 1
}

# The sweep: --html beside --json, the page against the JSON (with every run's record).
"$petrsim" sweep "$scenario" "${vary[@]}" --json --runs --html "$work/sweep.html" >"$work/sweep.json" ||
  fail "sweep --html: exit $?"
/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/sweep.json" ||
  fail "sweep --html: stdout is not the sweep's JSON"
/usr/bin/python3 "$here/html_report_check.py" sweep "$work/sweep.html" "$work/sweep.json"
echo "sweep --html: the page matches --json"

# Hostile names: a scenario path and --vary values with markup, quotes and '&' are shown as text.
hostile="$work/a<b>&c/t&\"<script>.pbtxt"
mkdir -p "$(dirname "$hostile")"
cp "$scenario" "$hostile"
"$petrsim" sweep "$hostile" --vary 'name=<script>alert(1)</script>,a&b' --seeds 3 --quiet --json --runs \
  --html "$work/hostile.html" >"$work/hostile.json" || fail "sweep --html (hostile names): exit $?"
/usr/bin/python3 "$here/html_report_check.py" sweep "$work/hostile.html" "$work/hostile.json"
! grep -q "<script" "$work/hostile.html" || fail "a <script> element in $work/hostile.html"
echo "sweep --html: markup in names is escaped"

# The table on stdout is the same with and without --html.
"$petrsim" sweep "$scenario" "${vary[@]}" >"$work/table.txt"
"$petrsim" sweep "$scenario" "${vary[@]}" --html "$work/sweep2.html" >"$work/table_html.txt"
cmp -s "$work/table.txt" "$work/table_html.txt" || fail "sweep --html changed the table on stdout"

# Sharded: --html on a shard is refused; the merge writes the same page as the unsharded sweep.
code=0
"$petrsim" sweep "$scenario" "${vary[@]}" --shard 1/2 --html "$work/shard.html" >"$work/shard_out.txt" \
  2>"$work/shard_err.txt" || code=$?
[ "$code" = 2 ] || fail "sweep --shard --html: exit $code, expected 2"
grep -q -- "--html with --shard" "$work/shard_err.txt" || fail "sweep --shard --html: $(cat "$work/shard_err.txt")"
[ ! -e "$work/shard.html" ] || fail "sweep --shard --html wrote a page"
for k in 1 2; do "$petrsim" sweep "$scenario" "${vary[@]}" --shard "$k/2" >"$work/shard$k.json"; done
"$petrsim" merge "$work/shard1.json" "$work/shard2.json" --html "$work/merge.html" >"$work/merge.txt"
cmp -s "$work/table.txt" "$work/merge.txt" || fail "merge --html: the table differs from the sweep's"
cmp -s "$work/sweep2.html" "$work/merge.html" || fail "merge --html: the page differs from the unsharded sweep's"
echo "merge --html: the same page as the unsharded sweep"

# A path that cannot be written: exit 2, a message naming it, nothing on stdout, no file.
for bad in "$work/no_such_dir/sweep.html" "$work"; do
  code=0
  "$petrsim" sweep "$scenario" "${vary[@]}" --html "$bad" >"$work/bad_out.txt" 2>"$work/bad_err.txt" || code=$?
  [ "$code" = 2 ] || fail "sweep --html $bad: exit $code, expected 2"
  [ ! -s "$work/bad_out.txt" ] || fail "sweep --html $bad: output on stdout"
  grep -qF -- "error: --html: $bad" "$work/bad_err.txt" ||
    fail "sweep --html $bad: the error does not name it: $(cat "$work/bad_err.txt")"
done
[ ! -e "$work/no_such_dir" ] || fail "a directory appeared"
[ -z "$(find "$work" -name '*.tmp')" ] || fail "a .tmp file was left: $(find "$work" -name '*.tmp')"
echo "sweep --html UNWRITABLE: exit 2, nothing written"

# diagnose --html on traces of a hung run: the page beside the report, against --json.
code=0
"$petrsim" "$scenario" --trace "$work/traces" --quiet >/dev/null || code=$?
[ "$code" = 1 ] || fail "recording $scenario: exit $code, expected 1 (hang)"
code=0
"$petrsim" diagnose "$work/traces" --html "$work/diagnose.html" >"$work/diagnose.txt" || code=$?
[ "$code" = 1 ] || fail "diagnose --html: exit $code, expected 1"
code=0
"$petrsim" diagnose "$work/traces" --json >"$work/diagnose.json" || code=$?
[ "$code" = 1 ] || fail "diagnose --json: exit $code, expected 1"
/usr/bin/python3 "$here/html_report_check.py" diagnose "$work/diagnose.html" "$work/diagnose.json" "$work/diagnose.txt"
code=0
"$petrsim" diagnose "$work/traces" --html "$work/no_such_dir/d.html" >"$work/bad_out.txt" 2>"$work/bad_err.txt" ||
  code=$?
[ "$code" = 2 ] || fail "diagnose --html UNWRITABLE: exit $code, expected 2"
[ ! -s "$work/bad_out.txt" ] || fail "diagnose --html UNWRITABLE: output on stdout"
grep -qF -- "error: --html: $work/no_such_dir/d.html" "$work/bad_err.txt" ||
  fail "diagnose --html UNWRITABLE: $(cat "$work/bad_err.txt")"
echo "diagnose --html: the page matches --json; an unwritable path is exit 2"
