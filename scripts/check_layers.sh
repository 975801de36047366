#!/usr/bin/env bash
# The layering of docs/design.md, checked from the includes: prints which folder includes which
# (folder -> folder(count) ...) and fails, naming the file and the include, where a folder
# reaches one it must not; and the purity of the floors (no clock or threads in scenario/ to
# check/, no LibTorch outside real/). Run from anywhere: scripts/check_layers.sh [--graph]
#   --graph   print the graph only (exit 0)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each folder and the folders its code may include (besides itself).
declare -A allowed=(
  # The pure domain model, floor by floor (docs/design.md): each may include those below it.
  [base]=""
  [proto]=""
  [scenario]="base proto"
  [data]="base proto scenario"
  [plan]="base proto scenario"
  [check]="base proto scenario data plan"
  [formats/pickle]="base proto scenario"
  [formats/pyconfig]="base proto scenario"
  [formats/mmcv]="base proto scenario formats/pyconfig"
  [formats/flight_recorder]="base proto scenario formats/pickle"
  [formats/torch_logs]="base proto scenario"
  [trace]="base proto scenario"
  [sim]="base proto scenario data plan check trace formats/torch_logs"
  [comm]="base proto scenario data plan check sim"
  [real]="base proto scenario data plan check trace formats/torch_logs"
  [replay]="base proto scenario data plan check trace formats/pickle formats/flight_recorder formats/torch_logs sim"
  [sweep]="base proto scenario data plan check sim"
  # docs/design.md: importers/ turns probe traces into scenarios, so trace/ (a floor below) is allowed.
  [importers]="base proto scenario data plan check trace formats/pickle formats/pyconfig formats/mmcv formats/torch_logs"
  [cli]="base proto scenario data plan check trace formats/pickle sim replay sweep importers"
  # docs/design.md: props/ is a leaf (nothing includes it) holding the properties of sim/, replay/
  # and the pickle reader's first pass and one pass.
  [props]="base proto scenario data plan check formats/pickle sim replay"
  [bench]="base proto scenario data plan check sim real trace"
  [fuzz]="base proto scenario data plan check trace formats/pickle formats/pyconfig formats/mmcv formats/flight_recorder formats/torch_logs replay importers"
)
exceptions=()

folder_of() {  # the layer an include path or a file belongs to
  case "$1" in
    formats/*/*) local rest=${1#formats/}; echo "formats/${rest%%/*}" ;;
    */*) echo "${1%%/*}" ;;
    *) echo "" ;;
  esac
}

graph_only=0
[ "${1:-}" = "--graph" ] && graph_only=1
declare -A edges=()
violations=0
while IFS= read -r line; do
  file=${line%%:*}
  target=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${line#*:}")
  from=$(folder_of "$file")
  [[ "$file" == *_test.cc ]] && from=tests  # a test beside its code may include anything, as tests/ may
  to=$(folder_of "$target")
  [ -z "$to" ] || [ "$to" = "$from" ] && continue
  [ -d "$to" ] || continue  # a generated or system header
  edges["$from $to"]=$(( ${edges["$from $to"]:-0} + 1 ))
  [ "$graph_only" = 1 ] && continue
  [[ -v allowed[$from] ]] || continue  # tests/ may include anything
  ok=0
  for a in ${allowed[$from]}; do [ "$a" = "$to" ] && ok=1; done
  for e in "${exceptions[@]}"; do [ "$e" = "$file:$to" ] && ok=1; done
  if [ "$ok" = 0 ]; then
    echo "layering: $file includes \"$target\": $from/ may include only: ${allowed[$from]:-nothing of ours}"
    violations=$((violations + 1))
  fi
done < <(git ls-files '*.h' '*.cc' | xargs grep -H '^#include "' || true)

for from in base proto scenario data plan check formats/pickle formats/pyconfig formats/mmcv formats/flight_recorder formats/torch_logs trace sim comm real replay sweep importers cli props bench fuzz tests; do
  out=""
  for key in "${!edges[@]}"; do
    [ "${key% *}" = "$from" ] && out+="${key#* }(${edges[$key]}) "
  done
  echo "$from -> $(tr ' ' '\n' <<<"$out" | sort | tr '\n' ' ')"
done
# Purity, per floor: the pure model (scenario/ to check/) keeps no clock and no threads, and only
# real/ (and what tests or benchmarks it) includes LibTorch, c10d, CUDA or NCCL.
pure='^#include <(thread|mutex|shared_mutex|atomic|condition_variable|future|chrono|ctime|time\.h|unistd\.h|signal\.h|csignal)>'
libtorch='^#include <(torch/|ATen/|c10/|c10d/|cuda|nccl)'
while IFS= read -r line; do
  echo "purity: ${line%%:*} includes ${line#*:#include }: scenario/, data/, plan/ and check/ keep no clock and no threads"
  violations=$((violations + 1))
done < <(git ls-files 'scenario/*' 'data/*' 'plan/*' 'check/*' 'proto/*' | grep -v '_test\.cc$' | grep -E '\.(h|cc)$' |
         xargs grep -HE "$pure" || true)
while IFS= read -r line; do
  echo "purity: ${line%%:*} includes ${line#*:#include }: only real/ includes LibTorch, c10d, CUDA or NCCL"
  violations=$((violations + 1))
done < <(git ls-files '*.h' '*.cc' | grep -vE '^(real|tests|bench)/' | xargs grep -HE "$libtorch" || true)

if [ "$violations" -gt 0 ]; then
  echo "layering: $violations include(s) against docs/design.md's layers"
  exit 1
fi
