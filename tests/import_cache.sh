#!/usr/bin/env bash
# The import cache (base/run_record.h), on the real executable: a re-run on unchanged
# files keeps OUT and prints the same summary; a touched but unchanged input still counts as
# unchanged; a changed input, option, OUT or petrsim, a missing OUT or a broken record imports
# again; imports racing for one OUT never leave a record believed for another OUT's content.
# Usage: tests/import_cache.sh PETRSIM WORK_DIR
set -euo pipefail
petrsim=$(realpath "$1")
work=$2
rm -rf "$work"
mkdir -p "$work"
fixtures=tests/data/importers
cp "$fixtures/mini_infos_train.pkl" "$work/train.pkl"
cp "$fixtures/mini_infos_val.pkl" "$work/val.pkl"
cd "$work"

fail() {
  echo "import_cache: $*" >&2
  exit 1
}
# import NAME [ARGS...]: runs the import with --quiet off, stdout to NAME.out, stderr to NAME.err.
import() {
  local name=$1
  shift
  "$petrsim" import mmdet3d-infos "$@" >"$name.out" 2>"$name.err" || fail "$name: exit $? ($(cat "$name.err"))"
}
hit() { grep -q "every input is unchanged" "$1.err"; }

import first train.pkl val.pkl -o S.pbtxt
[ -s S.pbtxt.petrsim-cache ] || fail "no record after the first import"
hit first && fail "the first import said it was cached"
cp S.pbtxt first.pbtxt
before=$(stat -c %Y.%Z S.pbtxt)

# Unchanged: a hit, the same summary, OUT untouched.
import again train.pkl val.pkl -o S.pbtxt
hit again || fail "an unchanged re-run imported again: $(cat again.err)"
cmp -s first.out again.out || fail "a cached re-run printed another summary"
[ "$(stat -c %Y.%Z S.pbtxt)" = "$before" ] || fail "a cached re-run rewrote OUT"

# Touched, same content: still a hit (the content hash decides).
sleep 0.01
touch val.pkl
import touched train.pkl val.pkl -o S.pbtxt
hit touched || fail "a touched but unchanged input made it import again"

# Another file under the same name (the same size is not enough): imports again, and OUT is the
# new input's.
cp "$OLDPWD/$fixtures/mini_infos_val_p4.pkl" val.pkl
import changed train.pkl val.pkl -o S.pbtxt
hit changed && fail "a changed input was taken from the cache"
"$petrsim" import mmdet3d-infos --no-cache train.pkl val.pkl -o reference.pbtxt >/dev/null 2>&1
cmp -s S.pbtxt reference.pbtxt || fail "after a changed input, OUT is not that input's import"

# The same bytes written in place (same size, new ctime): content decides, still unchanged.
import settle train.pkl val.pkl -o S.pbtxt
hit settle || fail "no hit right after the record was refreshed"
printf 'x' | dd of=val.pkl bs=1 seek=100 count=1 conv=notrunc status=none
if "$petrsim" import mmdet3d-infos train.pkl val.pkl -o S.pbtxt >inplace.out 2>inplace.err; then :; fi
hit inplace && fail "a byte changed in place (same size) was taken from the cache"
cp "$OLDPWD/$fixtures/mini_infos_val_p4.pkl" val.pkl

# Another option: imports again.
import option train.pkl val.pkl -o S.pbtxt --seq-split-num 3
hit option && fail "another option was taken from the cache"

# OUT gone, or replaced by other content: imports again.
import base train.pkl val.pkl -o S.pbtxt
rm S.pbtxt
import gone train.pkl val.pkl -o S.pbtxt
hit gone && fail "a missing OUT was taken from the cache"
[ -s S.pbtxt ] || fail "OUT not written again"
echo "# edited" >>S.pbtxt
import edited train.pkl val.pkl -o S.pbtxt
hit edited && fail "an edited OUT was taken from the cache"

# A broken record: imports again and writes a good one.
echo "garbage" >S.pbtxt.petrsim-cache
import broken train.pkl val.pkl -o S.pbtxt
hit broken && fail "a broken record was believed"
import mended train.pkl val.pkl -o S.pbtxt
hit mended || fail "the record was not written again after a broken one"

# --no-cache imports even when the record is valid.
import forced --no-cache train.pkl val.pkl -o S.pbtxt
hit forced && fail "--no-cache was taken from the cache"

# Another petrsim (the same program with a byte appended): imports again.
cp "$petrsim" ./petrsim_copy
printf '\0' >>./petrsim_copy
./petrsim_copy import mmdet3d-infos train.pkl val.pkl -o S.pbtxt >copy.out 2>copy.err
hit copy && fail "another petrsim executable was taken from the cache"

# Imports racing for one OUT from two inputs: whatever the last record says, an import of either
# afterwards (cached or not) leaves OUT equal to that input's own import.
"$petrsim" import mmdet3d-infos --no-cache train.pkl -o only_train.pbtxt >/dev/null 2>&1
"$petrsim" import mmdet3d-infos --no-cache val.pkl -o only_val.pbtxt >/dev/null 2>&1
for round in 1 2 3 4 5; do
  rm -f R.pbtxt R.pbtxt.petrsim-cache
  "$petrsim" import mmdet3d-infos train.pkl -o R.pbtxt >/dev/null 2>&1 &
  "$petrsim" import mmdet3d-infos val.pkl -o R.pbtxt >/dev/null 2>&1 &
  wait
  for input in train val; do
    "$petrsim" import mmdet3d-infos "$input.pkl" -o R.pbtxt >race.out 2>race.err
    cmp -s R.pbtxt "only_$input.pbtxt" || fail "round $round: R.pbtxt is not $input.pkl's import ($(cat race.err))"
  done
  ls | grep -q '\.tmp' && fail "round $round: a temporary file was left: $(ls | grep '\.tmp')"
done
echo "import_cache: all cases passed"
