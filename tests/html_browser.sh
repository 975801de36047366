#!/usr/bin/env bash
# What a browser makes of the pages of `sweep --html` and `diagnose --html`: Debian's chromium,
# headless, loads each page; the DOM it built holds the plots and the table (an unescaped string
# or an ill-formed tag would change it), and its screenshot shows the plots' colours
# (tests/html_browser_check.py). Skipped (exit 77) where no chromium is installed: it is not part
# of scripts/setup.sh (about 290 MB installed); `apt-get install chromium` enables it.
# Usage: tests/html_browser.sh PETRSIM WORK_DIR
set -euo pipefail
petrsim=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "skip: no chromium installed (apt-get install chromium to run this test)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
scenario=scenarios/tiny.pbtxt

fail() {
  echo "html_browser: $*" >&2
  exit 1
}

"$petrsim" sweep "$scenario" --vary resample.policy=in_group,global --seeds 20 --quiet --html "$work/sweep.html" \
  >/dev/null || fail "sweep --html: exit $?"
code=0
"$petrsim" "$scenario" --trace "$work/traces" --quiet >/dev/null || code=$?
[ "$code" = 1 ] || fail "recording $scenario: exit $code, expected 1 (hang)"
code=0
"$petrsim" diagnose "$work/traces" --html "$work/diagnose.html" >/dev/null || code=$?
[ "$code" = 1 ] || fail "diagnose --html: exit $code, expected 1"

flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars "--user-data-dir=$work/profile")
for page in sweep diagnose; do
  timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$work/$page.html" >"$work/$page.dom.html" \
    2>"$work/$page.dom.err" || fail "$page: chromium --dump-dom: exit $?: $(tail -3 "$work/$page.dom.err")"
  timeout 120 "$browser" "${flags[@]}" --window-size=1100,1600 "--screenshot=$work/$page.png" \
    "file://$work/$page.html" >/dev/null 2>"$work/$page.png.err" ||
    fail "$page: chromium --screenshot: exit $?: $(tail -3 "$work/$page.png.err")"
  /usr/bin/python3 "$here/html_browser_check.py" "$page" "$work/$page.dom.html" "$work/$page.png"
  echo "$page: chromium renders the plots"
done
