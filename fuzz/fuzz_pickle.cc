// libFuzzer target: arbitrary bytes as a Flight Recorder dump (pickle or JSON). Any input must
// end in a dump or a ScenarioError: no crash, no hang, no unbounded allocation. And a pickle dump
// read entry by entry (FrPickleRead::kStreamed, what diagnose does) must read as the whole tree
// does: the same fields of every entry and table, or the same error. And record mode's first pass
// split between two threads at an offset the input picks (pickle_memo_scan.cc; a file needs
// 64 MiB for that otherwise) must count the memo indices read back as one pass does.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "formats/flight_recorder/flight_recorder.h"
#include "formats/pickle/pickle.h"
#include "formats/pickle/pickle_internal.h"

namespace {

// Every field of a dump read with `how`, or its error, as text.
std::string Read(std::string_view bytes, petrsim::FrPickleRead how) {
  std::string out;
  try {
    const petrsim::FrDump dump = petrsim::ParseFlightRecorderDump(bytes, "fuzz", 0u, how);
    out = dump.version + '|' + dump.comm_lib_version + '|' + std::to_string(dump.rank) + '|' +
          std::to_string(dump.bare_list) + '|' + dump.partial.value_or("-") + '|' + std::to_string(dump.has_pg_status);
    for (const uint32_t r : dump.world_ranks) out += ',' + std::to_string(r);
    for (const auto& [name, group] : dump.pg_config) {
      out += '\n' + name + '|' + group.desc;
      for (const uint32_t r : group.ranks) out += ',' + std::to_string(r);
    }
    for (const auto& [id, s] : dump.pg_status) {
      out += '\n' + std::to_string(id) + '|' + std::to_string(s.last_enqueued) + '|' + std::to_string(s.last_started) +
             '|' + std::to_string(s.last_completed);
    }
    for (const petrsim::FrEntry& e : dump.entries) {
      out += '\n' + std::to_string(e.record_id) + '|' + std::to_string(e.pg_id) + '|' + e.pg_name + '|' + e.pg_desc +
             '|' + std::to_string(e.collective_seq_id) + '|' + std::to_string(e.p2p_seq_id) + '|' +
             std::to_string(e.op_id) + '|' + e.profiling_name + '|' + std::to_string(e.time_created_ns) + '|' +
             e.state + '|' + std::to_string(e.timeout_ms) + '|' + std::to_string(e.is_p2p);
      for (const auto* sizes : {&e.input_sizes, &e.output_sizes}) {
        out += '|';
        for (const auto& shape : *sizes) {
          out += '[';
          for (const int64_t d : shape) out += std::to_string(d) + ',';
        }
      }
      for (const auto* dtypes : {&e.input_dtypes, &e.output_dtypes}) {
        out += '|';
        for (const std::string& d : *dtypes) out += d + ',';
      }
    }
  } catch (const petrsim::ScenarioError& error) {
    out = std::string("error: ") + error.what();
  }
  return out;
}

}  // namespace

// The first pass alone and split at an offset taken from the input's first bytes.
void CompareSplitFirstPass(std::string_view bytes) {
  if (bytes.size() < 8) return;
  uint64_t at = 0;
  for (int i = 0; i < 4; ++i) at = at << 8 | static_cast<uint8_t>(bytes[i]);
  at = 1 + at % (bytes.size() - 1);
  using petrsim::pickle_internal::MemoFetches;
  using petrsim::pickle_internal::ScanSplit;
  ScanSplit never;
  never.from_bytes = UINT64_MAX;
  // Small heads, guesses and release steps, so that the helper counts past its head.
  ScanSplit how;
  how.from_bytes = 0;
  how.at = at;
  how.head_opcodes = 1 + static_cast<uint8_t>(bytes[4]) % 32;
  how.trial_opcodes = 1 + static_cast<uint8_t>(bytes[5]) % 16;
  how.progress_bytes = 1 + static_cast<uint8_t>(bytes[6]);
  const MemoFetches one(bytes, {}, {}, never);
  const MemoFetches split(bytes, {}, {}, how);
  for (uint64_t index = 0; index < 4096 + bytes.size(); ++index) {
    if (one.Fetched(index) != split.Fetched(index) || one.FetchedOnce(index) != split.FetchedOnce(index)) {
      std::abort();  // the split pass counted otherwise
    }
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CompareSplitFirstPass(bytes);
  try {
    const petrsim::PickleDocument doc = petrsim::ParsePickle(bytes, "fuzz");
    (void)doc;
  } catch (const petrsim::ScenarioError&) {
  }
  const std::string streamed = Read(bytes, petrsim::FrPickleRead::kStreamed);
  if (Read(bytes, petrsim::FrPickleRead::kWhole) != streamed) std::abort();  // the two reads of a pickle differ
  return 0;
}
