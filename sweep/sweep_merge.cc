// Sweeps, the shard files (sweep.h): writing one (`petrsim sweep --shard K/N`) and RunMerge,
// which reads and checks N of them and prints what the unsharded sweep prints.
#include "sweep/sweep_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "base/assert.h"
#include "base/error.h"
#include "base/json_text.h"
#include "base/temp_files.h"

namespace petrsim {

using sweep_internal::FormatSweep;
using sweep_internal::Json;
using sweep_internal::OutcomeNames;
using sweep_internal::ReadFileBytes;
using sweep_internal::RunRecord;
using sweep_internal::ShardRuns;
using sweep_internal::SweepIdentity;
using sweep_internal::Write;

namespace {

constexpr std::string_view kShardFormat = "petrsim-sweep-shard";
constexpr int kShardVersion = 1;

// Reads a JSON member for merge, with errors naming the file and the member.
class ShardReader {
 public:
  explicit ShardReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void Fail(const std::string& where, const std::string& what) const {
    throw ScenarioError(path_ + ": " + where + ": " + what);
  }

  const Json& Member(const Json& object, const std::string& where, const char* name) const {
    if (!object.is_object()) Fail(where, "expected an object");
    const auto it = object.find(name);
    if (it == object.end()) Fail(where, std::string("missing member '") + name + "'");
    return *it;
  }

  uint64_t Unsigned(const Json& object, const std::string& where, const char* name, uint64_t max = UINT64_MAX) const {
    const Json& value = Member(object, where, name);
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
      Fail(where + "." + name, "expected an unsigned integer, got " + JsonText(value));
    }
    const uint64_t number = value.get<uint64_t>();
    if (number > max) Fail(where + "." + name, fmt::format("must be <= {}, got {}", max, number));
    return number;
  }

  int64_t Signed(const Json& object, const std::string& where, const char* name) const {
    const Json& value = Member(object, where, name);
    if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX})) {
      Fail(where + "." + name, "expected a 64-bit integer, got " + JsonText(value));
    }
    return value.get<int64_t>();
  }

  std::string String(const Json& object, const std::string& where, const char* name) const {
    const Json& value = Member(object, where, name);
    if (!value.is_string()) Fail(where + "." + name, "expected a string, got " + JsonText(value));
    return value.get<std::string>();
  }

  std::vector<std::string> Strings(const Json& value, const std::string& where) const {
    if (!value.is_array()) Fail(where, "expected a list of strings, got " + JsonText(value));
    std::vector<std::string> strings;
    for (const Json& item : value) {
      if (!item.is_string()) Fail(where, "expected a list of strings, got " + JsonText(value));
      strings.push_back(item.get<std::string>());
    }
    return strings;
  }

 private:
  std::string path_;
};

SweepIdentity IdentityFromJson(const ShardReader& reader, const Json& json) {
  SweepIdentity identity;
  identity.scenario_path = reader.String(json, "sweep", "scenario");
  identity.scenario_hash = reader.String(json, "sweep", "scenario_fnv1a64");
  const Json& vary = reader.Member(json, "sweep", "vary");
  if (!vary.is_array()) reader.Fail("sweep.vary", "expected a list");
  for (size_t a = 0; a < vary.size(); ++a) {
    const std::string where = fmt::format("sweep.vary[{}]", a);
    SweepAxis axis;
    axis.path = reader.String(vary[a], where, "path");
    axis.values = reader.Strings(reader.Member(vary[a], where, "values"), where + ".values");
    if (axis.values.empty()) reader.Fail(where + ".values", "empty");
    identity.vary.push_back(std::move(axis));
  }
  identity.sets = reader.Strings(reader.Member(json, "sweep", "sets"), "sweep.sets");
  identity.seeds = static_cast<uint32_t>(reader.Unsigned(json, "sweep", "seeds", UINT32_MAX));
  if (identity.seeds == 0) reader.Fail("sweep.seeds", "must be >= 1");
  if (!reader.Member(json, "sweep", "seed_base").is_null()) {
    identity.seed_base = reader.Unsigned(json, "sweep", "seed_base");
  }
  uint64_t runs = identity.seeds;
  for (const SweepAxis& axis : identity.vary) {
    if (runs * axis.values.size() > kSweepRunsMax) reader.Fail("sweep", "too many runs");
    runs *= axis.values.size();
  }
  if (reader.Unsigned(json, "sweep", "runs") != identity.Runs() ||
      reader.Unsigned(json, "sweep", "combinations") != identity.Combinations()) {
    reader.Fail("sweep", "the combinations and runs do not match --vary and --seeds");
  }
  return identity;
}

RunRecord RecordFromJson(const ShardReader& reader, const Json& json, const std::string& where,
                         const SweepIdentity& identity) {
  RunRecord record;
  record.run = reader.Unsigned(json, where, "run");
  if (record.run >= identity.Runs()) {
    reader.Fail(where + ".run", fmt::format("must be < {} (the sweep's runs), got {}", identity.Runs(), record.run));
  }
  record.combination = reader.Unsigned(json, where, "combination");
  record.seed_index = static_cast<uint32_t>(reader.Unsigned(json, where, "seed_index", UINT32_MAX));
  if (record.combination != record.run / identity.seeds || record.seed_index != record.run % identity.seeds) {
    reader.Fail(where, fmt::format("combination {} and seed_index {} do not match run {}", record.combination,
                                   record.seed_index, record.run));
  }
  record.scenario_seed = reader.Unsigned(json, where, "run_seed");
  record.job_seed = static_cast<uint32_t>(reader.Unsigned(json, where, "job_seed", UINT32_MAX));
  record.outcome = reader.String(json, where, "outcome");
  if (std::find(OutcomeNames().begin(), OutcomeNames().end(), record.outcome) == OutcomeNames().end()) {
    reader.Fail(where + ".outcome", "unknown outcome '" + record.outcome + "'");
  }
  record.cause = reader.String(json, where, "cause");
  record.job_iterations = reader.Unsigned(json, where, "job_iterations");
  record.iterations_completed = reader.Unsigned(json, where, "iterations_completed");
  if (!reader.Member(json, where, "time_to_hang_ns").is_null()) {
    record.time_to_hang_ns = reader.Signed(json, where, "time_to_hang_ns");
  }
  record.end_ns = reader.Signed(json, where, "end_ns");
  record.last_iteration_end_ns = reader.Signed(json, where, "last_iteration_end_ns");
  record.stream_breaks = reader.Unsigned(json, where, "stream_breaks");
  record.events = reader.Unsigned(json, where, "events");
  return record;
}

std::string DescribeIdentityDifference(const Json& a, const Json& b) {
  for (const auto& [key, value] : a.items()) {
    const auto it = b.find(key);
    if (it == b.end()) return key + " missing";
    if (*it != value) return key + " " + JsonText(*it) + " instead of " + JsonText(value);
  }
  return "different sweep";
}

}  // namespace

namespace sweep_internal {

std::string FormatShard(const SweepIdentity& identity, const SweepShard& shard, const std::vector<RunRecord>& records) {
  Json runs = Json::array();
  for (const RunRecord& record : records) runs.push_back(RecordJson(identity, record));
  const Json document{{"format", kShardFormat},
                      {"version", kShardVersion},
                      {"sweep", IdentityJson(identity)},
                      {"shard", Json{{"index", shard.index}, {"count", shard.count}}},
                      {"runs", runs}};
  return JsonText(document, 1) + "\n";
}

// The runs of shard K/N (1-based K) of a sweep of `total` runs, ascending.
std::vector<uint64_t> ShardRuns(uint64_t total, const SweepShard& shard) {
  std::vector<uint64_t> runs;
  for (uint64_t run = shard.index - 1; run < total; run += shard.count) runs.push_back(run);
  return runs;
}

}  // namespace sweep_internal

namespace {

// What the shard files read so far make up: the sweep (from the first file), its shard count,
// the file of each shard given, and the records of the runs.
struct Merge {
  std::optional<SweepIdentity> identity;
  Json reference_identity;
  std::string reference_path;
  uint32_t count = 0;
  std::vector<std::string> shard_paths;  // by index - 1; empty: not given
  std::vector<RunRecord> records;
  std::vector<bool> seen;
};

// The shard file's JSON document, checked for its format and version.
Json ReadShardDocument(const std::string& path, const ShardReader& reader) {
  const std::string bytes = ReadFileBytes(path, "shard file");
  Json document;
  try {
    document = Json::parse(bytes);
  } catch (const Json::parse_error& error) {
    throw ScenarioError(path + ": not a JSON shard file: " + error.what());
  }
  if (!document.is_object() || !document.contains("format") || document.at("format") != std::string(kShardFormat)) {
    throw ScenarioError(path + ": not a shard file of `petrsim sweep --shard K/N`");
  }
  if (reader.Unsigned(document, "file", "version") != kShardVersion) {
    reader.Fail("version", fmt::format("expected {}", kShardVersion));
  }
  return document;
}

// Shard `index` of `file_count` of sweep `sweep`: the first file sets the sweep; the others must
// be of the same one, and each shard is given once.
void AddShard(const std::string& path, const Json& sweep, const SweepIdentity& file_identity, uint64_t index,
              uint64_t file_count, Merge& merge) {
  if (!merge.identity) {
    merge.identity = file_identity;
    merge.reference_identity = sweep;
    merge.reference_path = path;
    merge.count = static_cast<uint32_t>(file_count);
    merge.shard_paths.assign(merge.count, "");
    merge.records.resize(merge.identity->Runs());
    merge.seen.assign(merge.identity->Runs(), false);
  } else {
    if (sweep != merge.reference_identity) {
      throw ScenarioError(path + ": from a different sweep than " + merge.reference_path + " (" +
                          DescribeIdentityDifference(merge.reference_identity, sweep) + ")");
    }
    if (file_count != merge.count) {
      throw ScenarioError(fmt::format("{}: shard {}/{} of {} shards, but {} is one of {}", path, index, file_count,
                                      file_count, merge.reference_path, merge.count));
    }
  }
  if (!merge.shard_paths[index - 1].empty()) {
    throw ScenarioError(
        fmt::format("{}: shard {}/{} given twice (also {})", path, index, merge.count, merge.shard_paths[index - 1]));
  }
  merge.shard_paths[index - 1] = path;
}

// The runs of shard `index`: exactly the runs of that shard, in order.
void AddRuns(const ShardReader& reader, const Json& document, uint64_t index, Merge& merge) {
  const Json& runs = reader.Member(document, "file", "runs");
  if (!runs.is_array()) reader.Fail("runs", "expected a list");
  const std::vector<uint64_t> expected =
      ShardRuns(merge.identity->Runs(), SweepShard{static_cast<uint32_t>(index), merge.count});
  if (runs.size() != expected.size()) {
    reader.Fail("runs", fmt::format("shard {}/{} has {} runs, the file holds {}", index, merge.count, expected.size(),
                                    runs.size()));
  }
  for (size_t k = 0; k < runs.size(); ++k) {
    const std::string where = fmt::format("runs[{}]", k);
    RunRecord record = RecordFromJson(reader, runs[k], where, *merge.identity);
    if (record.run != expected[k]) {
      reader.Fail(where + ".run",
                  fmt::format("expected run {} of shard {}/{}, got {}", expected[k], index, merge.count, record.run));
    }
    merge.seen[record.run] = true;
    merge.records[record.run] = std::move(record);
  }
}

void ReadShardFile(const std::string& path, Merge& merge) {
  const ShardReader reader(path);
  const Json document = ReadShardDocument(path, reader);
  const Json& sweep = reader.Member(document, "file", "sweep");
  const SweepIdentity file_identity = IdentityFromJson(reader, sweep);
  const Json& shard_json = reader.Member(document, "file", "shard");
  const uint64_t index = reader.Unsigned(shard_json, "shard", "index", UINT32_MAX);
  const uint64_t file_count = reader.Unsigned(shard_json, "shard", "count", UINT32_MAX);
  if (file_count == 0 || index == 0 || index > file_count) {
    reader.Fail("shard", fmt::format("expected K/N with 1 <= K <= N, got {}/{}", index, file_count));
  }
  AddShard(path, sweep, file_identity, index, file_count, merge);
  AddRuns(reader, document, index, merge);
}

}  // namespace

int RunMerge(const std::vector<std::string>& paths, SweepFormat format, bool json_runs, std::FILE* out,
             const std::string& html_path) {
  if (paths.empty()) throw ScenarioError("merge: no shard files given");
  Merge merge;
  for (const std::string& path : paths) ReadShardFile(path, merge);
  std::vector<std::string> missing;
  for (uint32_t k = 0; k < merge.count; ++k) {
    if (merge.shard_paths[k].empty()) missing.push_back(fmt::format("{}/{}", k + 1, merge.count));
  }
  if (!missing.empty()) {
    throw ScenarioError(fmt::format("merge: shard{} {} of the sweep in {} missing", missing.size() == 1 ? "" : "s",
                                    fmt::join(missing, ", "), merge.reference_path));
  }
  PETRSIM_ASSERT(std::all_of(merge.seen.begin(), merge.seen.end(), [](bool s) { return s; }));
  if (!html_path.empty()) {
    try {
      WriteFileAtomically(html_path, SweepHtml(*merge.identity, merge.records));
    } catch (const ScenarioError& error) {
      throw ScenarioError(std::string("--html: ") + error.what());
    }
  }
  Write(FormatSweep(*merge.identity, merge.records, format, json_runs), out);
  return 0;
}

}  // namespace petrsim
