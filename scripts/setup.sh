#!/usr/bin/env bash
# Installs the Debian packages petrsim needs (only those missing), then configures and builds
# into build/ with Ninja (and ccache when present). Safe to run again: it does nothing twice.
# Usage: scripts/setup.sh [extra cmake arguments, e.g. -DPETRSIM_SANITIZE=ON]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libprotobuf-dev protobuf-compiler
  libboost-graph-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev zlib1g-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libtorch-dev libgloo-dev
  python3-numpy python3-torch
  python3-venv python3-wheel
  clang libclang-rt-14-dev clang-format
  # Real Slurm for tests/slurm_cluster.sh (ctest -L slurm), which runs its own daemons from its
  # own slurm.conf and stops them; the system's services need no configuration.
  slurm-wlm munge
)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build_dir="${PETRSIM_BUILD_DIR:-build}"
# ccache keys on the compile command, which names this checkout's absolute path: with the base
# directory set, a fresh clone elsewhere (CI's) reuses what another checkout compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
cmake -S . -B "$build_dir" -G Ninja "$@"
# Two cores, 24 GiB: two compile jobs are the most this machine wants.
cmake --build "$build_dir" -j "${PETRSIM_JOBS:-2}"
