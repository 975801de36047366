// PyTorch Flight Recorder dumps (ProcessGroupNCCL's TORCH_NCCL_TRACE_BUFFER_SIZE /
// TORCH_FR_BUFFER_SIZE debug info): the pickle (protocol 2) and the JSON dump formats, every
// version docs/research/flight_recorder_formats.md lists, read into one model. Top-level keys:
// version ("2.x"), pg_config ({name: {name, desc, ranks}}), pg_status ({pg_id:
// {last_enqueued_collective, last_started_collective, last_completed_collective}}: ints in the
// pickle, decimal strings in JSON), entries (list of {record_id, pg_id, process_group: (name,
// desc), collective_seq_id, p2p_seq_id, op_id, profiling_name, time_created_ns, input_sizes,
// input_dtypes, output_sizes, output_dtypes, state, timeout_ms, is_p2p, ...}; left out of JSON
// when empty), and nccl_version or comm_lib_version. The earliest dumps are a bare list of
// entries. Versions other than 2.x are refused; keys petrsim does not know are ignored; a
// missing required key, or a key of the wrong type, is an error naming the file and key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace petrsim {

struct FrEntry {
  int64_t record_id = 0;
  int64_t pg_id = -1;   // the dumping process's local process group index
  std::string pg_name;  // process_group[0]: the group's name (its global id)
  std::string pg_desc;  // process_group[1]
  int64_t collective_seq_id = 0;
  int64_t p2p_seq_id = 0;
  int64_t op_id = 0;
  std::string profiling_name;  // e.g. "nccl:all_reduce"
  int64_t time_created_ns = 0;
  std::vector<std::vector<int64_t>> input_sizes, output_sizes;
  std::vector<std::string> input_dtypes, output_dtypes;
  std::string state;  // scheduled, started, completed
  int64_t timeout_ms = 0;
  bool is_p2p = false;
};

struct FrGroupConfig {
  std::string name, desc;
  std::vector<uint32_t> ranks;
};

struct FrGroupStatus {
  int64_t last_enqueued = -1;
  int64_t last_started = -1;
  int64_t last_completed = -1;
};

struct FrDump {
  std::string path;
  uint32_t rank = 0;
  std::string version;           // "2.x"; empty for a bare list
  bool bare_list = false;        // the earliest form (PyTorch 2.2): the entries list alone
  std::string comm_lib_version;  // the communication library's version, e.g. "2.27.3"
  std::string lib_version_key;   // the key that named it: "nccl_version" (2.6-2.9), "comm_lib_version" (2.10)
  std::map<std::string, FrGroupConfig> pg_config;  // by group name
  // The world: the ranks of the default group (the pg_config group described "default_pg", else
  // the one named "0", the name PyTorch gives the world group); empty when the dump does not say.
  std::vector<uint32_t> world_ranks;
  std::map<int64_t, FrGroupStatus> pg_status;  // by local pg_id
  bool has_pg_status = false;
  std::vector<FrEntry> entries;
  // The file was cut short or corrupt after its start: what went wrong (file, byte offset);
  // the fields above hold what could be read.
  std::optional<std::string> partial;
};

// Reads one dump (pickle if it starts with byte 0x80, JSON if with '{' after blanks). The
// rank is the trailing number of the file name (PyTorch names dumps <prefix><rank>), or the
// dump's own "rank" key when it has one. Throws ScenarioError naming the file and the byte
// offset (pickle) or key (both) on bad input.
FrDump ReadFlightRecorderDump(const std::string& path);

// How a pickle dump is read: entry by entry, each converted as the pickle machine adds it to the list (memory follows
// one batch of entries), or as one tree built first (the reference the streamed read is tested against).
enum class FrPickleRead { kStreamed, kWhole };

// The same over the file's bytes; `display_name` starts every error message, and the rank is
// the dump's own "rank" key or `rank_from_name` (nothing: the dump must name it).
FrDump ParseFlightRecorderDump(std::string_view bytes, const std::string& display_name,
                               std::optional<uint32_t> rank_from_name,
                               FrPickleRead pickle_read = FrPickleRead::kStreamed);

// The PyTorch releases that write a dump format: `first` to `last` ("2.5", "2.7"); `last` empty:
// `first` and later; `development`: only builds between releases (nightlies), not a release.
struct FrTorchReleases {
  std::string first, last;
  bool development = false;
};

// The releases that write the dump's format (its `version`, or the bare list), as PyTorch's
// source history shows them (flight_recorder.cc cites the evidence per format; most bounds come
// from the dates of the pull requests that changed the format against the releases' branch
// cuts); nothing for a format petrsim does not know.
std::optional<FrTorchReleases> FrFormatTorchReleases(const FrDump& dump);

// What the dump says of the release, for a report: the format, the PyTorch releases that write
// it, and the communication library's version as the dump names it, e.g.
//   "Flight Recorder format 2.4 (PyTorch 2.5-2.7), NCCL 2.21.5"
//   "Flight Recorder format 2.10 (PyTorch 2.9 or later), comm_lib_version 2.27.3"
//   "Flight Recorder format 2.7 (PyTorch 2.8 development builds), NCCL 2.27.3"
//   "Flight Recorder bare list (PyTorch 2.2)"
//   "Flight Recorder format 2.0 (a PyTorch release petrsim does not know)"
std::string FrDumpReleaseText(const FrDump& dump);

// The world size the dump says (its default group's ranks), or nothing.
std::optional<uint32_t> FrDumpWorldSize(const FrDump& dump);

// True when the file looks like a Flight Recorder dump rather than a petrsim trace.
bool LooksLikeFlightRecorderDump(const std::string& path);

// The groups of bare-list dumps, matched across the dumps of one job. A bare list names a group by
// its pg_id alone, which is ProcessGroupNCCL::uid_: `uid_(process_group_id++)` with `static
// std::atomic<size_t> process_group_id = 0` (ProcessGroupNCCL.cpp of that era, whose
// NCCLTraceBuffer::record(uid_, seq_, ...) wrote the list), that is the index of the group among
// the groups THIS process created. PyTorch's own analyzer says the same of pg_id
// (tools/flight_recorder/components/builder.py: "pg_id: ProcessGroupNCCL::uid_ ... corresponds
// to nothing in groups table"). So one id names different groups on different ranks (in a
// Megatron job, local id 5 is the tensor-parallel group of each rank: 8 groups of 2 ranks) and one
// group has different ids (the expert-parallel group is id 10 on ranks 8-11 and id 11 on ranks
// 12-15), and no dump says which ranks a group has.
//
// Here each (rank, local id) stream of collectives joins the first group of that local id whose
// calls it overlaps at some sequence number and agrees with (the same op) at every one; else it
// starts a group. Streams that never overlap are not matched (groups at unrelated sequence numbers
// are different groups). A group is named "<local id>@<ranks>" ("10@8,9,11"). Its members are the
// ranks matched to it and the ranks that wait in no call at all (no entry pending, or no dump
// below the highest rank): those are the ranks the others may be waiting for, and the list cannot
// say which group they belong to, so they are counted in each. Entries' pg_name and the dumps'
// pg_config are rewritten; dumps that are not bare lists are left as they are. Returns notes
// saying what was inferred (empty when no dump is a bare list).
std::vector<std::string> MatchBareListGroups(std::vector<FrDump>& dumps);

}  // namespace petrsim
