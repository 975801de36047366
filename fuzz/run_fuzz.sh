#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ (once; ccache and ninja make later runs
# cheap) and runs each for SECONDS (default 20) from a seed corpus: the Flight Recorder fixtures,
# their JSON form and petrsim traces. A crash, undefined behaviour (UBSan), a leak, a timeout (10 s per input) or an
# allocation over 2 GiB fails the run; the reproducer is left in build-fuzz/artifacts/.
# Usage: fuzz/run_fuzz.sh [SECONDS [SEED [RUNS]]]  (the ctest `fuzz_smoke`: 4,000 inputs per
#                                         target with seed 1, at most 60 s each;
#                                         $PETRSIM names the petrsim that makes seed traces)
#        fuzz/run_fuzz.sh 3600 0         (a longer, randomly seeded run on demand)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
# libFuzzer's seed: 1 by default, so that the ctest smoke run is the same run every time (on a
# fresh corpus, as in CI); 0 picks a random one, for exploratory runs.
seed="${2:-1}"
# A number of inputs per target (0: as many as the time allows). With a fixed seed and a fixed
# number of runs, the smoke run explores exactly the same inputs on every machine.
runs="${3:-0}"
build="${PETRSIM_FUZZ_BUILD_DIR:-build-fuzz}"
if ! command -v clang++ > /dev/null; then
  echo "run_fuzz: clang++ is missing (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 1
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPETRSIM_FUZZ=ON -DPETRSIM_BUILD_TESTS=OFF -DPETRSIM_BUILD_BENCH=OFF -DPETRSIM_WITH_REAL=OFF > /dev/null
cmake --build "$build" --target fuzz_pickle fuzz_trace fuzz_scenario fuzz_infos fuzz_pyconfig fuzz_log -j "${PETRSIM_JOBS:-2}"

corpus="$build/corpus"
rm -rf "$build/artifacts"  # findings of earlier runs are theirs, not this run's
mkdir -p "$corpus/pickle" "$corpus/trace" "$corpus/scenario" "$corpus/infos" "$corpus/pyconfig" "$corpus/log" "$build/artifacts"
cp -n tests/data/flight_recorder/nvrx/*/_dump_* "$corpus/pickle/" 2>/dev/null || true
for f in tests/data/flight_recorder/nvrx/lock_gil_2nd/_dump_*; do cp -n "$f" "$corpus/pickle/lock_gil_2nd_$(basename "$f")"; done
for f in tests/data/flight_recorder_json/synthetic_lock_gil_2nd/*.json; do cp -n "$f" "$corpus/pickle/json_$(basename "$f")"; done
# petrsim traces of two small simulated runs (a hang and a completed job), when petrsim is built.
petrsim="${PETRSIM:-build/petrsim}"
if [ -x "$petrsim" ] && [ -z "$(ls -A "$corpus/trace")" ]; then
  "$petrsim" scenarios/tiny.pbtxt --trace "$build/seed_tiny" > /dev/null || true
  "$petrsim" scenarios/regressions/conditional_skip_blames_the_skipping_rank.pbtxt --trace "$build/seed_skip" --trace-ring 50 > /dev/null || true
  for f in "$build"/seed_tiny/*.pbtrace "$build"/seed_skip/*.pbtrace; do
    [ -f "$f" ] && cp "$f" "$corpus/trace/$(basename "$(dirname "$f")")_$(basename "$f")"
  done
fi

# Scenarios: every shipped one, one with overrides, one in the JSON mapping; infos: the importer
# fixtures.
for f in scenarios/*.pbtxt scenarios/regressions/*.pbtxt; do cp -n "$f" "$corpus/scenario/"; done
{ cat scenarios/tiny.pbtxt; printf '\n#--set\njob.world_size=4\nfaults[0].straggler.rank=1\nresample.policy=global\n'; } \
  > "$corpus/scenario/tiny_with_sets"
printf '{"job": {"worldSize": 2, "samplesPerGpu": 1}, "dataset": {"subdatasets": [{"name": "d", "explicit": {"scenes": [{"gtCounts": [1, 0, 2]}]}}]}}\n' \
  > "$corpus/scenario/json_small"
cp -n tests/data/importers/*.pkl "$corpus/infos/" 2>/dev/null || true
# Hostile inputs of issue 33 (tests/data/hostile/README.md): pickles, scenarios, Flight Recorder dumps, logs.
cp -n tests/data/hostile/*.pkl "$corpus/infos/" 2>/dev/null || true
cp -n tests/data/hostile/*.pkl "$corpus/pickle/" 2>/dev/null || true
cp -n tests/data/hostile/*.pbtxt "$corpus/scenario/" 2>/dev/null || true
cp -n tests/data/hostile/*.json "$corpus/pickle/" 2>/dev/null || true
cp -n tests/data/hostile/*.log tests/data/hostile/*.log.gz "$corpus/log/" 2>/dev/null || true
# Python configs: every one under tests/data/configs (petrsim's own, of every construct and error).
find tests/data/configs -name '*.py' | while read -r f; do cp -n "$f" "$corpus/pyconfig/$(echo "$f" | tr / _)"; done

# Training logs: every one under tests/data/logs, and the seed job's own, gzipped once too.
for f in tests/data/logs/*.log; do cp -n "$f" "$corpus/log/"; done
[ -f "$corpus/log/seed_job_excerpt.log.gz" ] || gzip -c tests/data/logs/seed_job_excerpt.log > "$corpus/log/seed_job_excerpt.log.gz"

for target in fuzz_pickle fuzz_trace fuzz_scenario fuzz_infos fuzz_pyconfig fuzz_log; do
  dir="$corpus/${target#fuzz_}"
  echo "run_fuzz: $target for $seconds s"
  status=0
  "$build/fuzz/$target" "$dir" -seed="$seed" -runs="$( [ "$runs" -gt 0 ] && echo "$runs" || echo -1 )" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -artifact_prefix="$build/artifacts/$target-" -print_final_stats=1 \
    > "$build/$target.log" 2>&1 || status=$?
  grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==ERROR|SUMMARY|readers disagree|INFO: seed corpus)" "$build/$target.log" || true
  if [ "$status" -ne 0 ] || ls "$build/artifacts/$target-"* > /dev/null 2>&1; then
    echo "run_fuzz: $target failed (exit $status); log: $build/$target.log; inputs: $(ls "$build/artifacts/" 2>/dev/null)" >&2
    exit 1
  fi
done
echo "run_fuzz: no crash, undefined behaviour, leak, timeout or allocation over 2 GiB"
