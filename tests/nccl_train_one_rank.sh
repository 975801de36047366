#!/usr/bin/env bash
# A 1-rank NCCL job through the whole plan (ctest label gpu): `petrsim train` on the tiny scenario
# with --backend nccl (the NCCL backend, real/nccl_backend.h) issues every collective of the
# scenario's plan, scenario-sized, on the GPU; it must finish (exit 0) with the parameters the same
# job reaches on Gloo, since one rank's collectives give back what it gave them, so every value
# went to the device and back in its dtype unchanged. NCCL refuses two ranks on one GPU, so one
# rank it is. Skipped (77) where petrsim_train says this machine has no GPU.
#   tests/nccl_train_one_rank.sh PETRSIM SCENARIO WORK_DIR
set -uo pipefail
petrsim=$1 scenario=$2 work=$3
args=("$scenario" --nproc 1 --iterations 4 --set resample.policy=global --quiet)
nccl_out=$("$petrsim" train "${args[@]}" --backend nccl --trace "$work/nccl_one_rank_trace" 2>&1)
code=$?
if [ "$code" = 2 ] && grep -q "has no GPU the NCCL backend can use" <<<"$nccl_out"; then
  echo "skipped: $(grep -m1 -o 'this machine has no GPU the NCCL backend can use[^;]*' <<<"$nccl_out")"
  exit 77
fi
if [ "$code" != 0 ]; then
  echo "petrsim train --backend nccl --nproc 1: exit $code, expected 0"
  echo "$nccl_out"
  exit 1
fi
gloo_out=$("$petrsim" train "${args[@]}" --backend gloo 2>&1) || { echo "the same job on Gloo failed:"; echo "$gloo_out"; exit 1; }
nccl_hash=$(grep -o 'parameters hash [0-9a-f]*' <<<"$nccl_out")
gloo_hash=$(grep -o 'parameters hash [0-9a-f]*' <<<"$gloo_out")
if [ -z "$nccl_hash" ] || [ "$nccl_hash" != "$gloo_hash" ]; then
  echo "NCCL and Gloo end with different parameters: '$nccl_hash' vs '$gloo_hash'"
  echo "--- nccl"; echo "$nccl_out"; echo "--- gloo"; echo "$gloo_out"
  exit 1
fi
# The recorded run issued the scenario's plan: `petrsim plan` of its trace lists the collectives
# `petrsim plan` of the scenario lists for the same iterations.
recorded=$("$petrsim" plan "$work/nccl_one_rank_trace" --json) || { echo "petrsim plan of the trace failed"; exit 1; }
planned=$("$petrsim" plan "$scenario" --set resample.policy=global --iterations 4 --json) || { echo "petrsim plan failed"; exit 1; }
count() { grep -o '"op"' <<<"$1" | wc -l; }
if [ "$(count "$recorded")" != "$(count "$planned")" ] || [ "$(count "$recorded")" = 0 ]; then
  echo "the NCCL run recorded $(count "$recorded") collectives where the plan has $(count "$planned")"
  exit 1
fi
echo "NCCL, 1 rank: $nccl_hash as on Gloo; $(count "$recorded") collectives as planned"
