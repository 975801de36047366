#!/usr/bin/env bash
# Runs a command with LibTorch's CPU kernels forced to one path, so a result that depends on the
# floating-point kernels (rounding, reduction order) shows up on any machine, not only on the one
# whose native path differs:
#   tests/on_cpu_capability.sh CAPABILITY DNNL_ISA COMMAND [ARGS...]
# CAPABILITY: ATEN_CPU_CAPABILITY (default, avx2, avx512); DNNL_ISA: DNNL_MAX_CPU_ISA for
# oneDNN's convolutions (SSE41, AVX2, ALL ...). ATen takes the variable without checking the CPU,
# so a path this CPU cannot run is skipped (exit 77, ctest's SKIP_RETURN_CODE), never run.
set -euo pipefail
capability=$1 isa=$2
shift 2
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
need=()
case "$capability" in
  default) ;;
  avx2) need=(avx2 fma) ;;
  avx512) need=(avx512f avx512bw avx512vl avx512dq fma) ;;
  *) echo "on_cpu_capability.sh: unknown capability '$capability' (expected default, avx2 or avx512)" >&2; exit 2 ;;
esac
for flag in "${need[@]}"; do
  if [[ "$flags" != *" $flag "* ]]; then
    echo "skipped: this CPU lacks $flag, which ATEN_CPU_CAPABILITY=$capability needs"
    exit 77
  fi
done
echo "ATEN_CPU_CAPABILITY=$capability DNNL_MAX_CPU_ISA=$isa $*"
ATEN_CPU_CAPABILITY=$capability DNNL_MAX_CPU_ISA=$isa exec "$@"
