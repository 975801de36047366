// sweep/: many simulated runs of one scenario (sim/simulator.h), the
// cartesian product of --vary values times --seeds seeds, run in parallel and summarised per
// combination (hang probability, outcome counts, time to hang, throughput, stream breaks).
//
// Runs. Combinations are the cartesian product of the --vary axes in the order the flags are
// given, the last axis varying fastest. Global run index = combination * seeds + seed index i.
// Run (combination c, seed index i) simulates: the scenario file, then the --set overrides in
// order, then c's overrides in axis order, then
//   job.seed = (job.seed + i) mod 2^31   (the training script's --seed: the sampler's group
//                                   stream and the DataLoader workers' numpy RNGs), and
//   run seed = seed_base + i        (SimOptions::run_seed: petrsim's cost-jitter streams), where
//                                   seed_base is --seed-base, else 0 (so seed index 0 of a
//                                   sweep is the plain `petrsim SCENARIO` run).
// scenario.seed is left alone, so a synthetic dataset stays the same across seeds (it is built
// once); to vary the dataset too, --vary seed=1,2,3. Every
// combination is validated (ValidateScenario) before any run starts, every run again before it
// runs. Any error of a run (a dataset that cannot be built, a sampler the job would reject) stops
// the sweep with that error, naming the run; nothing is printed then.
//
// Datasets. A Dataset is built once per distinct key = the serialized scenario.dataset, filters,
// grouping and resample, plus scenario.seed when a sub-dataset is synthetic (its frames depend on
// it). Built datasets are kept in a small LRU cache of kDatasetCacheSize entries shared by the
// workers (a dataset being built by one worker is awaited, not built twice); at most
// jobs + kDatasetCacheSize datasets are alive at once. Runs are executed seed-major (all
// combinations of seed 0, then of seed 1, ...) so that combinations not touching the dataset
// share it; results are gathered by global run index, so output does not depend on --jobs or on
// thread timing.
//
// Per run record: outcome and cause, iterations completed, time to hang, virtual end time,
// iterations per second of virtual time, stream breaks, events. Time to hang is
// SimResult.blocked_at_ns (when the last waiting rank blocked in the collective that never
// completes) for hang, desync and rank_died; for such a run without it, the desync's time, then
// the first watchdog's, then the end time. Other outcomes have none.
//
// Summary per combination: runs; hang probability = runs whose outcome is not `completed`
// (limit_reached included: the job did not complete within petrsim's limits) / runs; outcome
// counts; time to hang median and p90 over the runs that have one (nearest-rank percentile:
// the ceil(p/100 * n)-th smallest); mean iterations/s over the runs with at least one completed
// iteration; mean stream breaks per run over all runs.
//
// Sharding. --shard K/N (K 1-based, 1 <= K <= N) runs only the runs whose global run index % N ==
// K - 1 and always writes a shard file: JSON with the sweep's identity (scenario path and a hash
// of its bytes, --vary, --set, --seeds, --seed-base, N), K and the raw per-run records.
// `petrsim merge` joins the N shard files of one sweep and prints exactly what the unsharded
// sweep prints in the same format.
//
// The page. --html FILE (sweep and merge; not with --shard, whose file holds only some runs)
// also writes one self-contained XHTML file with SVG plots: per combination the hang
// probability with its 95% Wilson score interval, the time to hang as an ECDF, the stream breaks
// of every run as a strip plot, and the summary table (with the interval's bounds). It is
// written through an AtomicFile opened before the runs (a path that cannot be written fails
// before any run) and committed before anything is printed on `out`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace petrsim {

inline constexpr size_t kDatasetCacheSize = 4;
// Runs of one sweep (combinations x seeds), a bound on memory and time (STYLE 7).
inline constexpr uint64_t kSweepRunsMax = 10'000'000;

enum class SweepFormat { kTable, kJson, kCsv };

// One --vary flag: a field path (as for --set) and its values, in the order given.
struct SweepAxis {
  std::string path;
  std::vector<std::string> values;
  bool operator==(const SweepAxis&) const = default;
};

// --shard K/N; index is 1-based.
struct SweepShard {
  uint32_t index = 1;
  uint32_t count = 1;
  bool operator==(const SweepShard&) const = default;
};

struct SweepSpec {
  std::string scenario_path;
  std::vector<SweepAxis> vary;        // no axis: one combination, the scenario itself
  std::vector<std::string> sets;      // --set path=value, applied before the combination's values
  uint32_t seeds = 1;                 // >= 1
  std::optional<uint64_t> seed_base;  // first run seed (cost jitter); default 0
  uint32_t jobs = 0;                  // worker threads; 0: std::thread::hardware_concurrency() (at least 1)
  std::optional<SweepShard> shard;    // set: write a shard file (JSON) for `petrsim merge`
  SweepFormat format = SweepFormat::kTable;
  bool json_runs = false;  // kJson: list every run's record under its combination
  std::string html_path;   // --html: also write the page there ("": none)
  // Called after each run with (runs done, runs of this shard), from the worker threads but
  // never concurrently. May be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// Parses one --vary flag "path=v1,v2,...". Throws ScenarioError naming --vary and the flag when
// '=' is missing, the path or a value is empty, or a value is given twice. The path itself is
// checked against the schema by RunSweep (which reports an unknown field the same way).
SweepAxis ParseVary(const std::string& text);

// Parses "K/N" with 1 <= K <= N. Throws ScenarioError naming --shard.
SweepShard ParseShard(const std::string& text);

// Run i of every combination adds i to job.seed, so with --vary job.seed=a,b,... and --seeds N
// two combinations whose job seeds are less than N apart run some of the same job seeds (the
// same sampler streams and worker RNGs: their runs are not independent samples). Returns the
// warning that says so, naming the first such pair and the job seeds they share, e.g. for
// --vary job.seed=0,1,2 --seeds 4: "--vary job.seed=0,1,2 with --seeds 4: run i of a combination
// uses job.seed + i, so job.seed=0 and job.seed=1 both run job seeds 1..3 ..."; nothing when no
// --vary axis is job.seed or the combinations' job seeds are disjoint. RunSweep prints it on
// stderr (as "petrsim sweep: warning: ...") before the runs.
std::optional<std::string> JobSeedOverlap(const SweepSpec& spec);

// Runs the sweep and writes its table / JSON / CSV (or, with spec.shard, the shard file) to
// `out`. Throws ScenarioError before writing anything on bad input or a failed run. Returns the
// exit code, 0.
int RunSweep(const SweepSpec& spec, std::FILE* out);

// Joins shard files written by `petrsim sweep --shard K/N` and writes the same output the
// unsharded sweep writes in `format`. Throws ScenarioError naming the file when a file cannot be
// read or parsed, the files come from different sweeps, or a shard is missing or given twice.
// Returns the exit code, 0.
// With `html_path`, writes the page there too, as the unsharded sweep does.
int RunMerge(const std::vector<std::string>& paths, SweepFormat format, bool json_runs, std::FILE* out,
             const std::string& html_path = "");

}  // namespace petrsim
