#!/usr/bin/env bash
# Runs the tests as the README's second command does (ctest over build/, two at a time, the
# output of a failing test shown) and ends with every test that was skipped and why: ctest's
# skips (a script's exit 77, GoogleTest's GTEST_SKIP per discovered case, disabled tests) and
# GoogleTest cases skipped inside a ctest test that passed (scripts/list_skipped_tests.py reads
# ctest's JUnit report). Arguments go to ctest: `scripts/run_tests.sh -L unit`, `-R nccl`. The
# exit status is ctest's.
set -uo pipefail
cd "$(dirname "$0")/.."
report=$(mktemp "${TMPDIR:-/tmp}/petrsim_ctest_XXXXXX.xml")
# Recorded checks (base/run_record.h) go to a directory of this run's own, never the user's
# ~/.cache/petrsim: every test's check runs as on a fresh machine.
export PETRSIM_CACHE_DIR
PETRSIM_CACHE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/petrsim_test_cache_XXXXXX")
trap 'rm -f "$report"; rm -rf "$PETRSIM_CACHE_DIR"' EXIT
# The output of passed tests is kept whole (ctest keeps 1 KiB by default), so that a case skipped
# inside a passing test is found.
status=0
ctest --test-dir build --output-on-failure -j 2 --output-junit "$report" --test-output-size-passed 1048576 "$@" ||
  status=$?
echo
if command -v python3 > /dev/null; then
  python3 scripts/list_skipped_tests.py "$report" || true
else
  echo "Skipped tests: not listed (no python3 to read ctest's report)"
fi
exit "$status"
