#!/usr/bin/env bash
# A recorded check (cli/check_command.cc, base/run_record.h), on the real executable: the same
# check on an unchanged scenario prints its recorded report and exits as it did (1 for a hang,
# 0 proven); a touched but unchanged scenario still counts as unchanged; a changed scenario,
# another option, another petrsim, a broken record, --no-cache, --write-drops and
# PETRSIM_CACHE_DIR=off check again.
# Usage: tests/check_record.sh PETRSIM WORK_DIR
set -euo pipefail
petrsim=$(realpath "$1")
work=$2
rm -rf "$work"
mkdir -p "$work"
cp scenarios/tiny.pbtxt "$work/S.pbtxt"
cd "$work"
export PETRSIM_CACHE_DIR="$PWD/cache"

fail() {
  echo "check_record: $*" >&2
  exit 1
}
# check NAME EXPECTED_EXIT [ARGS...]: stdout to NAME.out, stderr to NAME.err.
check() {
  local name=$1 expected=$2 code=0
  shift 2
  "$petrsim" check "$@" >"$name.out" 2>"$name.err" || code=$?
  [ "$code" = "$expected" ] || fail "$name: exit $code, expected $expected ($(cat "$name.err"))"
}
hit() { grep -q "unchanged since this check ran" "$1.err"; }
record() { ls cache/check-* 2>/dev/null | head -1; }

check first 1 S.pbtxt
hit first && fail "the first check said it was recorded"
[ -n "$(record)" ] || fail "no record after the first check"
check again 1 S.pbtxt
hit again || fail "an unchanged re-run checked again: $(cat again.err)"
cmp -s first.out again.out || fail "the recorded report differs from the first"

# The report printed is the record's: edited by hand, the edit shows (so it is not checked again).
file=$(record)
python3 - "$file" <<'PY'
import sys
path = sys.argv[1]
data = open(path, 'rb').read()
head, printed = data.split(b'\nprinted ', 1)
length, text = printed.split(b'\n', 1)
text = text.replace(b'petrsim check', b'PETRSIM CHECK', 1)
open(path, 'wb').write(head + b'\nprinted ' + str(len(text)).encode() + b'\n' + text)
PY
check edited 1 S.pbtxt
grep -q "PETRSIM CHECK" edited.out || fail "a valid record was not what was printed"

# Touched, same content: still recorded.
sleep 0.01
touch S.pbtxt
check touched 1 S.pbtxt
hit touched || fail "a touched but unchanged scenario was checked again"

# --no-cache, another option, PETRSIM_CACHE_DIR=off: checked again.
check nocache 1 --no-cache S.pbtxt
hit nocache && fail "--no-cache took the record"
grep -q "PETRSIM CHECK" nocache.out && fail "--no-cache printed the record"
check json 1 --json S.pbtxt
hit json && fail "--json took the plain check's record"
PETRSIM_CACHE_DIR=off "$petrsim" check S.pbtxt >off.out 2>off.err || true
hit off && fail "PETRSIM_CACHE_DIR=off took a record"

# --write-drops writes a file: never taken from a record.
"$petrsim" check --write-drops drops.py S.pbtxt >drops.out 2>drops.err || true
hit drops && fail "--write-drops took a record"

# A changed scenario: checked again, and the new verdict recorded (the global policy terminates).
sed -i 's/policy: in_group/policy: global/' S.pbtxt
check changed 0 S.pbtxt
hit changed && fail "a changed scenario was taken from the record"
check changed_again 0 S.pbtxt
hit changed_again || fail "the new verdict was not recorded"

# Another petrsim (the same program with a byte appended): checked again.
cp "$petrsim" other_petrsim
printf '\0' >>other_petrsim
code=0
./other_petrsim check S.pbtxt >other.out 2>other.err || code=$?
[ "$code" = 0 ] || fail "other petrsim: exit $code"
hit other && fail "another petrsim took this one's record"

# A broken record: checked again, and rewritten.
for f in cache/check-*; do printf 'garbage' >"$f"; done
check broken 0 S.pbtxt
hit broken && fail "a broken record was believed"
check repaired 0 S.pbtxt
hit repaired || fail "the broken record was not rewritten"
echo "check_record: all cases passed"
