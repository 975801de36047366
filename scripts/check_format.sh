#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted as .clang-format says, with the clang-format
# the style was written against (Debian 12's, version 14; scripts/setup.sh installs it). Lists
# the files that differ and how to fix them. Another major version formats some constructs
# differently, so with it the check is skipped (exit 77, ctest's SKIP_RETURN_CODE), not failed.
#   scripts/check_format.sh          check (ctest `format`, label unit)
#   scripts/check_format.sh --fix    reformat the files in place
set -euo pipefail
cd "$(dirname "$0")/.."
tool=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$tool" ]; then
  echo "skipped: no clang-format (scripts/setup.sh installs Debian's clang-format)"
  exit 77
fi
major=$("$tool" --version | sed -E 's/.*version ([0-9]+).*/\1/')
if [ "$major" != 14 ]; then
  echo "skipped: $tool is version $major; the style is checked with clang-format 14"
  exit 77
fi
mapfile -t files < <(git ls-files '*.cc' '*.h')
if [ "${1:-}" = "--fix" ]; then
  "$tool" -i "${files[@]}"
  exit 0
fi
bad=()
for file in "${files[@]}"; do
  "$tool" --dry-run --Werror "$file" >/dev/null 2>&1 || bad+=("$file")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'format: %s differs from .clang-format\n' "${bad[@]}"
  echo "format: ${#bad[@]} file(s); run scripts/check_format.sh --fix"
  exit 1
fi
echo "format: ${#files[@]} files as .clang-format says"
