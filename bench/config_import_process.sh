#!/usr/bin/env bash
# Whole-process wall time and peak RSS of `petrsim import mmdet3d-config` on each codebase config of
# the tests (tests/data/configs/codebases: the config, its _base_ chain and, with a plugin, the
# dataset class's source parsed; the small info file of the tests), and of the import followed by
# `check`, over N runs. Goal (issue 27): a config import under 100 ms. The process's own start is
# printed first (`petrsim --version`) as the floor of every figure.
# Usage: bench/config_import_process.sh [N] [PETRSIM]   (default: 5 runs of build/petrsim)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
petrsim="${2:-build/petrsim}"
source bench/measure.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
measure "petrsim --version (the process's start)" "$petrsim" --version
for config in tests/data/configs/codebases/*/*.py; do
  name="$(basename "$(dirname "$config")")/$(basename "$config")"
  infos=tests/data/importers/mini_infos_train.pkl
  [[ "$name" == far3d/* ]] && infos=tests/data/importers/mini_av2_infos_train.pkl
  # As many --infos as the config's ann_file names (train, val, train, ...).
  args=(--infos "$infos")
  if ! "$petrsim" import mmdet3d-config "$config" --gpus 2 "${args[@]}" --quiet -o "$work/s.pb" > /dev/null 2>&1; then
    args=(--infos "$infos" tests/data/importers/mini_infos_val.pkl)
  fi
  measure "import $name" "$petrsim" import mmdet3d-config "$config" --gpus 2 "${args[@]}" --quiet -o "$work/s.pb"
  measure "import + check $name" sh -c "\"$petrsim\" import mmdet3d-config \"$config\" --gpus 2 ${args[*]} \
--quiet -o \"$work/s.pb\" && \"$petrsim\" check \"$work/s.pb\""
done
