// Internals of the Flight Recorder reader (flight_recorder.h) shared by its files: the Converter from a dump's values
// (pickle nodes, whichever format they were read from) to an FrDump, and the JSON dump's reader
// (flight_recorder_json.cc).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file_io.h"
#include "formats/flight_recorder/flight_recorder.h"
#include "formats/pickle/pickle.h"

namespace petrsim::flight_recorder_internal {

// "an int", "a str", "None": a type name as the messages say it.
inline std::string WithArticle(const std::string& type) {
  if (type == "None") return type;
  return (type.find_first_of("aeiou") == 0 ? "an " : "a ") + type;
}

using Type = PickleNode::Type;

class Converter {
 public:
  // `file_bytes`: the dump's size. Memo references let a small pickle name one value many
  // times; the conversion copies what it reads, so it is given a budget of work (dict keys
  // scanned, ints and string bytes copied) proportional to the file, and refuses beyond it.
  Converter(const std::string& path, uint64_t file_bytes)
      : path_(path), budget_limit_(std::max<uint64_t>(uint64_t{1} << 22, 64 * file_bytes)), budget_(budget_limit_) {}

  void Charge(uint64_t work, const std::string& where) const {
    if (work > budget_) {
      Fail(where, fmt::format("the dump expands to more than {} values (memo references that repeat one value "
                              "many times?); petrsim refuses to expand it",
                              budget_limit_));
    }
    budget_ -= work;
  }
  const PickleNode* Get(const PickleNode& dict, const char* key, const std::string& where) const {
    Charge(dict.entries.size() + 1, where);
    return dict.Get(key);
  }

  [[noreturn]] void Fail(const std::string& where, const std::string& what) const {
    throw ScenarioError(fmt::format("{}: {}: {}", path_, where, what));
  }
  const PickleNode& Need(const PickleNode& dict, const char* key, const std::string& where) const {
    const PickleNode* value = Get(dict, key, where);
    if (value == nullptr) Fail(where, fmt::format("missing key '{}'", key));
    return *value;
  }
  std::string Str(const PickleNode& node, const std::string& where) const {
    if (node.type != Type::kString) Fail(where, "expected a str, found " + WithArticle(node.TypeName()));
    Charge(node.text.size() + 1, where);
    return node.text;
  }
  int64_t Int(const PickleNode& node, const std::string& where) const {
    if (node.type == Type::kInt) return node.integer;
    if (node.type == Type::kBool) return node.boolean ? 1 : 0;
    Fail(where, "expected an int, found " + WithArticle(node.TypeName()));
  }
  // An int, or a str holding one in decimal: PyTorch's dump_json writes the pg_status values with
  // std::to_string (getPgStatusJson), the pickle writes ints (getPgStatus).
  int64_t IntOrDecimal(const PickleNode& node, const std::string& where) const {
    if (node.type != Type::kString) return Int(node, where);
    const std::string& text = node.text;
    const size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
    if (text.size() == digits || text.size() - digits > 18 ||
        text.find_first_not_of("0123456789", digits) != std::string::npos) {
      Fail(where, fmt::format("expected an int (or a str of one), found the str '{}'", text.substr(0, 40)));
    }
    return std::stoll(text);
  }
  int64_t OptIntOrDecimal(const PickleNode& dict, const char* key, const std::string& where, int64_t fallback) const {
    const PickleNode* value = Get(dict, key, where);
    if (value == nullptr || value->type == Type::kNone) return fallback;
    return IntOrDecimal(*value, where + "." + key);
  }
  int64_t NeedInt(const PickleNode& dict, const char* key, const std::string& where) const {
    return Int(Need(dict, key, where), where + "." + key);
  }
  std::string NeedStr(const PickleNode& dict, const char* key, const std::string& where) const {
    return Str(Need(dict, key, where), where + "." + key);
  }
  int64_t OptInt(const PickleNode& dict, const char* key, const std::string& where, int64_t fallback) const {
    const PickleNode* value = Get(dict, key, where);
    if (value == nullptr || value->type == Type::kNone) return fallback;
    return Int(*value, where + "." + key);
  }
  std::string OptStr(const PickleNode& dict, const char* key, const std::string& where) const {
    const PickleNode* value = Get(dict, key, where);
    if (value == nullptr || value->type == Type::kNone) return {};
    return Str(*value, where + "." + key);
  }
  std::vector<std::vector<int64_t>> Sizes(const PickleNode* node, const std::string& where) const {
    std::vector<std::vector<int64_t>> sizes;
    if (node == nullptr || node->type == Type::kNone) return sizes;
    if (!node->is_sequence()) Fail(where, "expected a list of shapes, found " + WithArticle(node->TypeName()));
    for (const PickleNode* shape : node->items) {
      if (!shape->is_sequence())
        Fail(where, "expected a shape (list of ints), found " + WithArticle(shape->TypeName()));
      Charge(shape->items.size() + 1, where);
      auto& out = sizes.emplace_back();
      for (const PickleNode* dim : shape->items) out.push_back(Int(*dim, where));
    }
    return sizes;
  }
  std::vector<std::string> Strings(const PickleNode* node, const std::string& where) const {
    std::vector<std::string> out;
    if (node == nullptr || node->type == Type::kNone) return out;
    if (!node->is_sequence()) Fail(where, "expected a list of str, found " + WithArticle(node->TypeName()));
    for (const PickleNode* item : node->items) out.push_back(Str(*item, where));
    return out;
  }
  // "[0, 1, 2]" (what the pickle holds) or a list of ints (JSON).
  std::vector<uint32_t> Ranks(const PickleNode& node, const std::string& where) const {
    std::vector<uint32_t> ranks;
    const auto add = [&](int64_t rank) {
      if (rank < 0 || rank >= (int64_t{1} << 20)) Fail(where, fmt::format("rank {} out of range", rank));
      ranks.push_back(static_cast<uint32_t>(rank));
    };
    if (node.is_sequence()) {
      for (const PickleNode* item : node.items) add(Int(*item, where));
      return ranks;
    }
    const std::string text = Str(node, where);
    size_t i = 0;
    while (i < text.size() && (text[i] == '[' || text[i] == ' ')) ++i;
    while (i < text.size() && text[i] != ']') {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
        Fail(where, fmt::format("expected a list of ranks like '[0, 1]', found '{}'", text));
      }
      int64_t rank = 0;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        rank = rank * 10 + (text[i] - '0');
        if (rank >= (int64_t{1} << 20)) Fail(where, fmt::format("rank out of range in '{}'", text));
        ++i;
      }
      add(rank);
      while (i < text.size() && (text[i] == ',' || text[i] == ' ')) ++i;
    }
    return ranks;
  }

  // The entries list. Required in each entry: what places a call in its group's sequence and
  // says what it is (process_group, collective_seq_id, profiling_name, state, is_p2p), written
  // by every 2.x writer; in a bare list (2.2) the group is its pg_id and the sequence seq_id.
  // The last entry of a cut dump is kept only if it kept them all. Other keys are optional and
  // keys petrsim does not know (frames, thread_name, duration_ms, ...) are ignored.
  void ConvertEntries(const PickleNode& entries, FrDump& dump) const {
    if (!entries.is_sequence()) Fail("entries", "expected a list, found " + WithArticle(entries.TypeName()));
    const size_t before = dump.entries.size();
    dump.entries.reserve(before + entries.items.size());
    for (size_t i = 0; i < entries.items.size(); ++i) {
      ConvertEntry(*entries.items[i], i, dump.partial && i + 1 == entries.items.size(), dump);
    }
    // One entry per dict, the cut last one aside.
    PETRSIM_ASSERT(dump.entries.size() - before <= entries.items.size());
  }

  // Entry `i` of the list; `cut_last`: the last entry of a cut dump, dropped unless it is whole.
  void ConvertEntry(const PickleNode& e, size_t i, bool cut_last, FrDump& dump) const {
    static const std::vector<const char*> kRequiredBare = {"pg_id", "profiling_name"};
    static const std::vector<const char*> kRequired = {"process_group", "collective_seq_id", "profiling_name", "state",
                                                       "is_p2p"};
    const std::string where = fmt::format("entries[{}]", i);
    if (e.type != Type::kDict) {
      if (cut_last) return;
      Fail(where, "expected a dict, found " + WithArticle(e.TypeName()));
    }
    bool complete = true;
    for (const char* key : dump.bare_list ? kRequiredBare : kRequired) {
      complete = complete && Get(e, key, where) != nullptr;
    }
    if (dump.bare_list) {
      complete = complete && (Get(e, "collective_seq_id", where) != nullptr || Get(e, "seq_id", where) != nullptr);
    }
    if (cut_last && !complete) return;
    FrEntry entry;
    entry.record_id = OptInt(e, "record_id", where, static_cast<int64_t>(i));
    if (dump.bare_list) {
      ConvertBareListGroup(e, where, entry);
    } else {
      ConvertGroup(e, where, entry);
    }
    entry.p2p_seq_id = OptInt(e, "p2p_seq_id", where, 0);
    entry.op_id = OptInt(e, "op_id", where, 0);
    entry.profiling_name = NeedStr(e, "profiling_name", where);
    entry.time_created_ns = OptInt(e, "time_created_ns", where, 0);
    if (const PickleNode* sizes = Get(e, "input_sizes", where); sizes != nullptr) {
      entry.input_sizes = Sizes(sizes, where + ".input_sizes");
    }
    if (const PickleNode* sizes = Get(e, "output_sizes", where); sizes != nullptr) {
      entry.output_sizes = Sizes(sizes, where + ".output_sizes");
    }
    entry.input_dtypes = Strings(Get(e, "input_dtypes", where), where + ".input_dtypes");
    entry.output_dtypes = Strings(Get(e, "output_dtypes", where), where + ".output_dtypes");
    entry.state = dump.bare_list ? OptStr(e, "state", where) : NeedStr(e, "state", where);
    entry.timeout_ms = OptInt(e, "timeout_ms", where, 0);
    if (!dump.bare_list) {
      entry.is_p2p = NeedInt(e, "is_p2p", where) != 0;
    } else if (Get(e, "is_p2p", where) != nullptr) {
      entry.is_p2p = OptInt(e, "is_p2p", where, 0) != 0;
    } else {  // before is_p2p: a send or recv by its name (ProcessGroupNCCL's "nccl:send 0->1")
      entry.is_p2p = entry.profiling_name.rfind("nccl:send", 0) == 0 || entry.profiling_name.rfind("nccl:recv", 0) == 0;
    }
    dump.entries.push_back(std::move(entry));
  }

  // A bare-list entry's group and sequence: its pg_id (the group's index in its process) and
  // seq_id, and the sizes of PR #110960's one flat `sizes` list (later entries write
  // input_sizes/output_sizes).
  void ConvertBareListGroup(const PickleNode& e, const std::string& where, FrEntry& entry) const {
    entry.pg_id = NeedInt(e, "pg_id", where);
    entry.pg_name = std::to_string(entry.pg_id);
    const PickleNode* seq = Get(e, "collective_seq_id", where);
    if (seq == nullptr) seq = Get(e, "seq_id", where);
    if (seq == nullptr) Fail(where, "missing key 'seq_id'");
    entry.collective_seq_id = Int(*seq, where + ".seq_id");
    if (const PickleNode* sizes = Get(e, "sizes", where); sizes != nullptr && sizes->is_sequence()) {
      auto& shape = entry.input_sizes.emplace_back();
      Charge(sizes->items.size() + 1, where);
      for (const PickleNode* dim : sizes->items) shape.push_back(Int(*dim, where + ".sizes"));
      entry.output_sizes = entry.input_sizes;
    }
  }

  // A 2.x entry's group and sequence: process_group (name, desc) and collective_seq_id.
  void ConvertGroup(const PickleNode& e, const std::string& where, FrEntry& entry) const {
    entry.pg_id = OptInt(e, "pg_id", where, -1);
    const PickleNode& group = Need(e, "process_group", where);
    if (!group.is_sequence() || group.items.size() != 2) {
      Fail(where + ".process_group", "expected (name, desc), found " + WithArticle(group.TypeName()));
    }
    entry.pg_name = Str(*group.items[0], where + ".process_group[0]");
    entry.pg_desc = Str(*group.items[1], where + ".process_group[1]");
    entry.collective_seq_id = NeedInt(e, "collective_seq_id", where);
  }

  // Returns whether the dump named its rank. `entries_read`: the entries were converted as they were read (a JSON
  // dump, a streamed pickle), and the list holds none of them.
  bool Convert(const PickleNode& root, FrDump& dump, bool entries_read = false) const {
    bool has_rank = false;
    // The earliest dumps (PyTorch 2.2, before the dict of pytorch/pytorch#118044) are the bare
    // list of entries, with no version, pg_config nor pg_status.
    if (root.is_sequence()) {
      dump.bare_list = true;
      if (!entries_read) ConvertEntries(root, dump);
      return false;
    }
    if (root.type != Type::kDict) Fail("top level", "expected a dict or a list, found " + WithArticle(root.TypeName()));
    const PickleNode* version = Get(root, "version", "top level");
    if (version == nullptr) {
      if (dump.partial) Fail("top level", "missing key 'version' (the file is cut short: " + *dump.partial + ")");
      Fail("top level", "missing key 'version': not a Flight Recorder dump");
    }
    dump.version = Str(*version, "version");
    if (dump.version.rfind("2.", 0) != 0) {
      Fail("version",
           fmt::format("Flight Recorder dump version '{}' is not supported (petrsim reads 2.x)", dump.version));
    }
    dump.comm_lib_version = OptStr(root, "comm_lib_version", "top level");
    dump.lib_version_key = dump.comm_lib_version.empty() ? "" : "comm_lib_version";
    if (dump.comm_lib_version.empty()) {
      dump.comm_lib_version = OptStr(root, "nccl_version", "top level");
      if (!dump.comm_lib_version.empty()) dump.lib_version_key = "nccl_version";
    }
    if (const PickleNode* rank = Get(root, "rank", "top level"); rank != nullptr && rank->type != Type::kNone) {
      const int64_t value = Int(*rank, "rank");
      if (value < 0 || value >= (int64_t{1} << 20)) Fail("rank", fmt::format("rank {} out of range", value));
      dump.rank = static_cast<uint32_t>(value);
      has_rank = true;
    }
    if (const PickleNode* config = Get(root, "pg_config", "top level"); config != nullptr) {
      ConvertPgConfig(*config, dump);
    }
    if (const PickleNode* status = Get(root, "pg_status", "top level"); status != nullptr) {
      ConvertPgStatus(*status, dump);
    }
    // dump_json leaves `entries` out when there are none (and both formats without collectives).
    if (const PickleNode* entries = Get(root, "entries", "top level"); entries != nullptr) {
      if (!entries_read) {
        ConvertEntries(*entries, dump);
      } else if (!entries->is_sequence()) {  // read as they came only where they were a list
        Fail("entries", "expected a list, found " + WithArticle(entries->TypeName()));
      }
    }
    return has_rank;
  }

  // pg_config: each group's desc and ranks; the world is the default_pg's ranks (or group 0's).
  void ConvertPgConfig(const PickleNode& config, FrDump& dump) const {
    if (config.type != Type::kDict) Fail("pg_config", "expected a dict, found " + WithArticle(config.TypeName()));
    for (const auto& [key, value] : config.entries) {
      const std::string name = Str(*key, "pg_config key");
      const std::string where = "pg_config['" + name + "']";
      if (value->type != Type::kDict) Fail(where, "expected a dict, found " + WithArticle(value->TypeName()));
      FrGroupConfig group;
      group.name = name;
      group.desc = OptStr(*value, "desc", where);
      group.ranks = Ranks(Need(*value, "ranks", where), where + ".ranks");
      dump.pg_config[name] = std::move(group);
    }
    for (const auto& [name, group] : dump.pg_config) {
      if (group.desc == "default_pg") dump.world_ranks = group.ranks;
    }
    if (dump.world_ranks.empty() && dump.pg_config.count("0") > 0) dump.world_ranks = dump.pg_config.at("0").ranks;
  }

  // pg_status: per group index, the last collective enqueued, started and completed.
  void ConvertPgStatus(const PickleNode& status, FrDump& dump) const {
    if (status.type != Type::kDict) Fail("pg_status", "expected a dict, found " + WithArticle(status.TypeName()));
    dump.has_pg_status = true;
    for (const auto& [key, value] : status.entries) {
      const std::string where = "pg_status[" + (key->type == Type::kString ? key->text : std::string("?")) + "]";
      int64_t pg_id = 0;
      if (key->type == Type::kString) {
        const std::string& text = key->text;
        if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) {
          Fail(where, "expected a process group index");
        }
        pg_id = std::stoll(text);
      } else {
        pg_id = Int(*key, "pg_status key");
      }
      if (value->type != Type::kDict) Fail(where, "expected a dict, found " + WithArticle(value->TypeName()));
      FrGroupStatus group;
      group.last_enqueued = OptIntOrDecimal(*value, "last_enqueued_collective", where, -1);
      group.last_started = OptIntOrDecimal(*value, "last_started_collective", where, -1);
      group.last_completed = OptIntOrDecimal(*value, "last_completed_collective", where, -1);
      dump.pg_status[pg_id] = group;
    }
  }

 private:
  const std::string& path_;
  const uint64_t budget_limit_;
  mutable uint64_t budget_;
};

// A JSON dump read entry by entry as its text comes: `prefix` (what was read to tell the format, or the whole dump)
// first, then the rest of `file` (null: none), each chunk checked for depth before the parser sees it. Whether the
// dump named its rank.
bool ParseJsonDump(std::string_view prefix, RegularFileChunks* file, const Converter& converter,
                   const std::string& display_name, FrDump& dump);

}  // namespace petrsim::flight_recorder_internal
