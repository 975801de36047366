// Flight Recorder dumps; see flight_recorder.h.
#include "formats/flight_recorder/flight_recorder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/assert.h"
#include "base/chunked_chars.h"
#include "base/error.h"
#include "base/file_io.h"
#include "formats/pickle/pickle.h"

namespace petrsim {
namespace {

// "an int", "a str", "None": a type name as the messages say it.
std::string WithArticle(const std::string& type) {
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

// A JSON dump read by nlohmann's SAX events into pickle nodes, without a JSON DOM: each entry of the entries list
// (the root's "entries", or the root list of a bare-list dump) is converted as soon as it is whole and its nodes
// dropped, so that memory grows with the entries converted, not with the text of each (a 510 MB dump of a million
// entries took 7.7 GB as a DOM and its nodes). An entry's error waits until the top level is checked (a dump of
// another version is refused as such), then is thrown.
class JsonDumpReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  JsonDumpReader(PickleDocument& doc, const Converter& converter, FrDump& dump, const std::string& path)
      : doc_(doc), converter_(converter), dump_(dump), path_(path) {}

  const PickleNode* root() const { return root_; }
  const std::exception_ptr& entry_error() const { return entry_error_; }

  bool null() override { return Attach(New(Type::kNone)); }
  bool boolean(bool value) override {
    PickleNode* node = New(Type::kBool);
    node->boolean = value;
    return Attach(node);
  }
  bool number_integer(number_integer_t value) override {
    PickleNode* node = New(Type::kInt);
    node->integer = value;
    return Attach(node);
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (value > static_cast<uint64_t>(INT64_MAX)) throw ScenarioError(path_ + ": an integer wider than 64 bits");
    return number_integer(static_cast<int64_t>(value));
  }
  bool number_float(number_float_t value, const string_t& /*text*/) override {
    PickleNode* node = New(Type::kFloat);
    node->real = value;
    return Attach(node);
  }
  bool string(string_t& value) override {
    PickleNode* node = New(Type::kString);
    node->text = std::move(value);
    return Attach(node);
  }
  bool binary(binary_t& /*value*/) override { throw ScenarioError(path_ + ": unsupported JSON value"); }
  bool start_object(size_t /*size*/) override { return Open(Type::kDict); }
  bool key(string_t& value) override {
    key_ = New(Type::kString);
    key_->text = std::move(value);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(size_t /*size*/) override { return Open(Type::kList); }
  bool end_array() override { return Close(); }
  bool parse_error(size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& error) override {
    if (error.id >= 101 && error.id <= 199) {
      throw ScenarioError(fmt::format("{}: byte {}: not valid JSON: {}", path_, position, error.what()));
    }
    throw ScenarioError(fmt::format("{}: not valid JSON: {}", path_, error.what()));  // e.g. 1e999
  }

 private:
  PickleNode* New(Type type) {
    doc_.arena.push_back(std::make_unique<PickleNode>());
    doc_.arena.back()->type = type;
    return doc_.arena.back().get();
  }

  bool Open(Type type) {
    PickleNode* node = New(type);
    Attach(node);
    stack_.push_back(node);
    // The entries list: the root list (a bare-list dump), or the root dict's "entries".
    if (stack_.size() == 1 && type == Type::kList) dump_.bare_list = true;
    if ((stack_.size() == 1 && type == Type::kList) ||
        (stack_.size() == 2 && type == Type::kList && key_of_[1] != nullptr && key_of_[1]->text == "entries")) {
      entries_ = node;
      entries_depth_ = stack_.size();
    }
    return true;
  }

  bool Close() {
    PickleNode* closed = stack_.back();
    stack_.pop_back();
    if (closed == entries_) entries_ = nullptr;
    if (entries_ != nullptr && stack_.size() == entries_depth_) Converted(closed);
    return true;
  }

  bool Attach(PickleNode* node) {
    if (stack_.empty()) {
      root_ = node;
      return true;
    }
    PickleNode* parent = stack_.back();
    if (parent == entries_) {
      entry_mark_ = doc_.arena.size() - 1;  // the entry's own node is the last one made
      if (node->type != Type::kDict && node->type != Type::kList) Converted(node);
      return true;
    }
    if (parent->type == Type::kDict) {
      parent->entries.emplace_back(key_, node);
      if (stack_.size() == 1) key_of_[1] = key_;
    } else {
      parent->items.push_back(node);
    }
    return true;
  }

  // An entry is whole: converted (unless an earlier one failed), then its nodes dropped.
  void Converted(const PickleNode* entry) {
    if (!entry_error_) {
      try {
        converter_.ConvertEntry(*entry, entry_index_, false, dump_);
      } catch (const ScenarioError&) {
        entry_error_ = std::current_exception();
      }
    }
    ++entry_index_;
    doc_.arena.resize(entry_mark_);
  }

  PickleDocument& doc_;
  const Converter& converter_;
  FrDump& dump_;
  const std::string& path_;
  const PickleNode* root_ = nullptr;
  std::vector<PickleNode*> stack_;
  PickleNode* key_ = nullptr;
  PickleNode* key_of_[2] = {nullptr, nullptr};  // the key of the root's value being read
  PickleNode* entries_ = nullptr;
  size_t entries_depth_ = 0;
  size_t entry_mark_ = 0;
  size_t entry_index_ = 0;
  std::exception_ptr entry_error_;
};

bool RankFromFileName(const std::string& path, uint32_t& rank) {
  const std::string name = std::filesystem::path(path).filename().string();
  size_t end = name.size();
  if (end >= 5 && name.compare(end - 5, 5, ".json") == 0) end -= 5;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (begin == end || end - begin > 7) return false;
  if (std::stoul(name.substr(begin, end - begin)) >= (1ul << 20)) return false;
  rank = static_cast<uint32_t>(std::stoul(name.substr(begin, end - begin)));
  return true;
}

char FirstByte(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\n' && c != '\t' && c != '\r') return c;
  }
  return 0;
}

}  // namespace

bool LooksLikeFlightRecorderDump(const std::string& path) {
  const char c = FirstByte(path);
  return static_cast<uint8_t>(c) == 0x80 || c == '{';
}

namespace {

// The nesting of JSON arrays and objects (outside strings), followed chunk by chunk as the file is read, so that a
// hostile file is refused, with the byte where it passes the limit, before the parser builds it.
class JsonDepth {
 public:
  JsonDepth(const std::string& name, int limit) : name_(name), limit_(limit) {}
  void Feed(std::string_view chunk) {
    for (size_t i = 0; i < chunk.size(); ++i) {
      const char c = chunk[i];
      if (escaped_) {
        escaped_ = false;
      } else if (in_string_) {
        if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if ((c == '[' || c == '{') && ++depth_ > limit_) {
        throw ScenarioError(fmt::format("{}: byte {}: JSON nested deeper than {} levels", name_, offset_ + i, limit_));
      } else if (c == ']' || c == '}') {
        --depth_;
      }
    }
    offset_ += chunk.size();
  }

 private:
  const std::string& name_;
  const int limit_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  uint64_t offset_ = 0;
};

// The chunks of a JSON dump as the parser reads them: `prefix` (what was read to tell the format) first, then the
// rest of `file` (none: `prefix` is the whole dump), each checked for depth before the parser sees it.
class JsonDumpChunks {
 public:
  JsonDumpChunks(std::string_view prefix, RegularFileChunks* file, JsonDepth& depth)
      : prefix_(prefix), file_(file), depth_(depth) {}
  std::string_view Next() {
    std::string_view chunk;
    if (!prefix_done_) {
      prefix_done_ = true;
      chunk = prefix_;
    } else if (file_ != nullptr) {
      chunk = file_->Next();
    }
    depth_.Feed(chunk);
    return chunk;
  }

 private:
  std::string_view prefix_;
  bool prefix_done_ = false;
  RegularFileChunks* file_;
  JsonDepth& depth_;
};

// A JSON dump, read entry by entry from `chunks` (JsonDumpReader); whether it named its rank.
bool ParseJsonDump(JsonDumpChunks& chunks, const Converter& converter, const std::string& display_name, FrDump& dump) {
  PickleDocument doc;
  JsonDumpReader reader(doc, converter, dump, display_name);
  ChunkedChars<JsonDumpChunks> chars(chunks);
  nlohmann::json::sax_parse(chars.begin(), chars.end(), &reader);
  PETRSIM_ASSERT(reader.root() != nullptr);
  const bool has_rank = converter.Convert(*reader.root(), dump, /*entries_read=*/true);
  if (reader.entry_error()) std::rethrow_exception(reader.entry_error());
  return has_rank;
}

// The keys of an entry the converter reads (ConvertEntry): a streamed pickle keeps only these of each entry.
const std::vector<std::string> kEntryKeys = {
    "record_id",    "pg_id",          "process_group",   "collective_seq_id", "seq_id",       "p2p_seq_id",
    "op_id",        "profiling_name", "time_created_ns", "input_sizes",       "output_sizes", "sizes",
    "input_dtypes", "output_dtypes",  "state",           "timeout_ms",        "is_p2p"};

// Whether a pickle's top level is a list (a bare-list dump) or a dict, from its first opcodes (PROTO, FRAME, then
// EMPTY_LIST or EMPTY_DICT, as PyTorch's pickler writes them); nothing when they say neither.
std::optional<bool> PickleTopIsList(std::string_view bytes) {
  size_t at = 0;
  if (at + 2 <= bytes.size() && static_cast<uint8_t>(bytes[at]) == 0x80) at += 2;  // PROTO n
  if (at < bytes.size() && static_cast<uint8_t>(bytes[at]) == 0x95) at += 9;       // FRAME, 8-byte length
  if (at >= bytes.size()) return std::nullopt;
  if (bytes[at] == ']') return true;
  if (bytes[at] == '}') return false;
  return std::nullopt;
}

// Whether the entries were all handed over, and only they: the top level is what its first opcode said, and its
// entries (the top level itself, or its 'entries') are the one record list, each item handed (kDropped). Not so for a
// hand-made layout (a top-level value popped and replaced, entries in a tuple or a dict, a second entries list, a
// record changed after it was added): the whole tree is read then.
bool HandedEveryEntry(const PickleDocument& doc, bool top_list, uint64_t handed) {
  if ((doc.root->type == Type::kList) != top_list) return false;
  if (doc.partial && doc.partial->find(kRecordChangedAfterHandOver) != std::string::npos) {
    return false;
  }
  const PickleNode* entries = top_list ? doc.root : doc.root->type == Type::kDict ? doc.root->Get("entries") : nullptr;
  if (entries == nullptr) return handed == 0;
  return entries->type == Type::kList && entries->items.size() == handed &&
         std::all_of(entries->items.begin(), entries->items.end(),
                     [](const PickleNode* item) { return item->type == Type::kDropped; });
}

// A pickle dump read entry by entry (PickleOptions::on_record): each entry converted as the pickle machine adds it
// to the list, and its nodes reused, so that memory follows one batch of entries, not the dump (a 1 M-entry dump
// built a tree of 3.46 GB). As in a JSON dump, an entry's error waits for the top level; and, as tree mode reads a
// cut dump, an incomplete last entry of a cut dump is dropped, not an error. Nothing when the top level is neither
// a list nor a dict by its first opcodes (the tree is built then).
std::optional<bool> ParseStreamedPickleDump(std::string_view bytes, const Converter& converter,
                                            const std::string& display_name, FrDump& dump) {
  const std::optional<bool> top_list = PickleTopIsList(bytes);
  if (!top_list) return std::nullopt;
  dump.bare_list = *top_list;
  PickleOptions options;
  options.record_lists = {"entries"};
  options.record_top_list = *top_list;
  options.record_keys = kEntryKeys;
  std::exception_ptr entry_error;
  std::optional<std::pair<uint64_t, std::exception_ptr>> incomplete;  // the last entry handed, if it lacked a key
  options.on_record = [&](const PickleNode& entry, uint64_t index) {
    if (entry_error) return;
    if (incomplete) entry_error = incomplete->second;  // not the last one: its missing key is an error
    if (entry_error) return;
    try {
      const size_t before = dump.entries.size();
      converter.ConvertEntry(entry, index, /*cut_last=*/true, dump);
      if (dump.entries.size() == before) {  // incomplete: an error unless it turns out the last of a cut dump
        try {
          converter.ConvertEntry(entry, index, /*cut_last=*/false, dump);
        } catch (const ScenarioError&) {
          incomplete.emplace(index, std::current_exception());
        }
      }
    } catch (const ScenarioError&) {
      entry_error = std::current_exception();
    }
  };
  uint64_t handed = 0;
  const auto convert = options.on_record;
  options.on_record = [&](const PickleNode& entry, uint64_t index) {
    ++handed;
    convert(entry, index);
  };
  std::optional<PickleDocument> doc;
  try {
    doc.emplace(ParsePickle(bytes, display_name, options));
  } catch (const PickleError&) {
    return std::nullopt;  // the whole tree's read says what is wrong (or salvages what the stream could not)
  }
  if (!HandedEveryEntry(*doc, *top_list, handed)) return std::nullopt;
  dump.partial = doc->partial;
  if (incomplete && !dump.partial && !entry_error) entry_error = incomplete->second;
  const bool has_rank = converter.Convert(*doc->root, dump, /*entries_read=*/true);
  if (entry_error) std::rethrow_exception(entry_error);
  return has_rank;
}

// What every dump must satisfy once read: a rank, from its name or its own key.
void FinishDump(const FrDump& dump, bool has_rank, std::optional<uint32_t> rank_from_name) {
  if (!rank_from_name && !has_rank) {
    throw ScenarioError(
        fmt::format("{}: cannot tell the rank: the file name does not end in a "
                    "number and the dump has no 'rank' key",
                    dump.path));
  }
  // What the converter checked as it read: a 'rank' key in range, and no version or pg_status in
  // the bare list of PyTorch 2.2.
  if (has_rank) PETRSIM_ASSERT(dump.rank < (uint32_t{1} << 20));
  if (dump.bare_list) PETRSIM_ASSERT(dump.version.empty());
  if (dump.bare_list) PETRSIM_ASSERT(!dump.has_pg_status);
}

bool IsBlank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

FrDump ParseFlightRecorderDump(std::string_view bytes, const std::string& display_name,
                               std::optional<uint32_t> rank_from_name, FrPickleRead pickle_read) {
  FrDump dump;
  dump.path = display_name;
  if (rank_from_name) dump.rank = *rank_from_name;
  const Converter converter(display_name, bytes.size());
  size_t first = 0;
  while (first < bytes.size() && IsBlank(bytes[first])) ++first;
  bool has_rank = false;
  if (first < bytes.size() && static_cast<uint8_t>(bytes[first]) == 0x80) {
    std::optional<bool> streamed;
    if (pickle_read == FrPickleRead::kStreamed) {
      // Its own dump and budget: where the stream cannot take the entries, the tree's read starts afresh.
      FrDump attempt = dump;
      const Converter streaming(display_name, bytes.size());
      streamed = ParseStreamedPickleDump(bytes.substr(first), streaming, display_name, attempt);
      if (streamed) dump = std::move(attempt);
    }
    if (streamed) {
      has_rank = *streamed;
    } else {
      const PickleDocument doc = ParsePickle(bytes.substr(first), display_name);
      dump.partial = doc.partial;
      has_rank = converter.Convert(*doc.root, dump);
    }
  } else if (first < bytes.size() && bytes[first] == '{') {
    JsonDepth depth(display_name, kPickleDepthMax);
    JsonDumpChunks chunks(bytes, nullptr, depth);
    has_rank = ParseJsonDump(chunks, converter, display_name, dump);
  } else {
    throw ScenarioError(
        fmt::format("{}: byte 0: neither a Flight Recorder pickle (starts with 0x80) nor a JSON dump (starts "
                    "with '{{'){}",
                    display_name, first >= bytes.size() ? ": the file is empty" : ""));
  }
  FinishDump(dump, has_rank, rank_from_name);
  return dump;
}

namespace {

// "0-3", "8,9,11": ranks ascending, runs of three or more as a range, the others joined by `sep`.
std::string CompactRanks(const std::vector<uint32_t>& ranks, const char* sep) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += sep;
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace

// Which PyTorch releases write which dump format. Evidence, per format (S: source read in a
// stored copy; PR: a pytorch/pytorch pull request, its date and diff). The release dates are as
// PyTorch announced them, not read in a stored copy: 2.2.0 on 30 Jan 2024, 2.4.0 on 24 Jul 2024,
// 2.6.0 on 29 Jan 2025, 2.7.0 on 23 Apr 2025, each from a branch cut some five weeks before.
// docs/research/flight_recorder_formats.md has the rest.
//   bare list: PR #110960 (Oct 2023) writes the list of entries; PR #118044/#118046 (23 Jan 2024,
//     after the 2.2 branch cut) make it a dict with a version. So 2.2.
//   "2.2": a dict with a version exists from #118046 (so 2.3 at the earliest); S: NCCLUtils.hpp
//     with version_val "2.2" and no pg_status; pg_status came with "2.3" in PR #131268 (Jul 2024),
//     after the 2.4 branch cut. So 2.3-2.4 (which of the two, or both, is not read).
//   "2.3": from #131268 (after the 2.4 cut) until "2.4", which main had by PR #141648
//     (27 Nov 2024: FlightRecorder.hpp split out of NCCLUtils.hpp with version_val "2.4"), before
//     the 2.6 cut. So 2.5.
//   "2.4": S: pytorch/pytorch FlightRecorder.hpp at 911ce84b and 00f0e2f6, version_val "2.4";
//     on main by 27 Nov 2024 (#141648) and until "2.5", which PR #151048's diff (10 Apr 2025,
//     after the 2.7 cut) shows on main. So 2.5-2.7 (whether 2.5 shipped "2.3" or "2.4" is not
//     read).
//   "2.5": after 27 Nov 2024 ("2.4", before the 2.6 cut) and before #151048 made it "2.6"
//     (10 Apr 2025, after the 2.7 cut). So 2.6-2.7.
//   "2.6" to "2.8": #151048 (10 Apr 2025) bumps "2.5" to "2.6" and adds nccl_version; the 2.8
//     tree already says "2.9" (below). So only the development builds between 2.7 and 2.8.
//   "2.9": S: ROCm/pytorch commit 10b22ea5, a merge whose conflict shows one side with
//     version.txt "2.8.0" and FlightRecorder.hpp version_val "2.9", nccl_version_key. So 2.8
//     (the nvrx dumps are "2.9" with NCCL 2.27.3).
//   "2.10": S: the other side of that conflict, version.txt "2.9.0" with version_val "2.10" and
//     comm_lib_version_key; pytorch/pytorch FlightRecorderDetail.hpp (cb41e3a4) writes
//     comm_lib_version. So 2.9 or later (no later format is read).
std::optional<FrTorchReleases> FrFormatTorchReleases(const FrDump& dump) {
  if (dump.bare_list) return FrTorchReleases{"2.2", "2.2", false};
  static const std::map<std::string, FrTorchReleases> kReleases = {
      {"2.2", {"2.3", "2.4", false}}, {"2.3", {"2.5", "2.5", false}}, {"2.4", {"2.5", "2.7", false}},
      {"2.5", {"2.6", "2.7", false}}, {"2.6", {"2.8", "2.8", true}},  {"2.7", {"2.8", "2.8", true}},
      {"2.8", {"2.8", "2.8", true}},  {"2.9", {"2.8", "2.8", false}}, {"2.10", {"2.9", "", false}},
  };
  const auto it = kReleases.find(dump.version);
  if (it == kReleases.end()) return std::nullopt;
  return it->second;
}

std::string FrDumpReleaseText(const FrDump& dump) {
  std::string text = dump.bare_list ? "Flight Recorder bare list" : "Flight Recorder format " + dump.version;
  const auto releases = FrFormatTorchReleases(dump);
  if (!releases) {
    text += " (a PyTorch release petrsim does not know)";
  } else if (releases->development) {
    text += fmt::format(" (PyTorch {} development builds)", releases->first);
  } else if (releases->last.empty()) {
    text += fmt::format(" (PyTorch {} or later)", releases->first);
  } else if (releases->first == releases->last) {
    text += fmt::format(" (PyTorch {})", releases->first);
  } else {
    text += fmt::format(" (PyTorch {}-{})", releases->first, releases->last);
  }
  if (!dump.comm_lib_version.empty()) {
    text += dump.lib_version_key == "nccl_version" ? ", NCCL " : ", comm_lib_version ";
    text += dump.comm_lib_version;
  }
  return text;
}

std::optional<uint32_t> FrDumpWorldSize(const FrDump& dump) {
  if (dump.world_ranks.empty()) return std::nullopt;
  return static_cast<uint32_t>(dump.world_ranks.size());
}

namespace {

// The ranks that wait in no call: nothing pending in their dump, or no dump below the highest
// rank (then `without_dump` is set).
std::vector<uint32_t> IdleRanks(const std::vector<FrDump>& dumps, bool& without_dump) {
  uint32_t end = 0;
  std::set<uint32_t> waiting, dumped;
  for (const FrDump& dump : dumps) {
    end = std::max(end, dump.rank + 1);
    dumped.insert(dump.rank);
    for (const FrEntry& e : dump.entries) {
      if (e.state != "completed") {
        waiting.insert(dump.rank);
        break;
      }
    }
  }
  std::vector<uint32_t> idle;
  without_dump = false;
  for (uint32_t r = 0; r < end; ++r) {
    if (waiting.count(r) > 0) continue;
    idle.push_back(r);
    without_dump = without_dump || dumped.count(r) == 0;
  }
  return idle;
}

// The process groups the bare-list dumps' (rank, local id) streams of collectives form.
struct BareListGroups {
  struct Group {
    int64_t local_id = 0;
    std::map<int64_t, std::string> ops;  // sequence number -> op, of every stream matched
    std::vector<uint32_t> ranks;
    std::string name;
  };
  std::vector<Group> groups;
  std::map<std::pair<size_t, int64_t>, size_t> group_of;  // (dump index, local id) -> group
};

// The first group of `candidates` whose calls overlap `ops` and agree with them where they do;
// `groups.size()` when none.
size_t AgreeingGroup(const std::vector<BareListGroups::Group>& groups, const std::vector<size_t>& candidates,
                     const std::map<int64_t, std::string>& ops) {
  for (const size_t g : candidates) {
    bool overlap = false, agree = true;
    for (const auto& [seq, op] : ops) {
      const auto it = groups[g].ops.find(seq);
      if (it == groups[g].ops.end()) continue;
      overlap = true;
      if (it->second != op) {
        agree = false;
        break;
      }
    }
    if (overlap && agree) return g;
  }
  return groups.size();
}

// Each (rank, local id) stream joins the first group of that local id it overlaps and agrees
// with; the groups are named <local id>@<ranks>.
BareListGroups MatchStreams(const std::vector<FrDump>& dumps, const std::vector<size_t>& bare) {
  BareListGroups out;
  std::vector<BareListGroups::Group>& groups = out.groups;
  std::map<int64_t, std::vector<size_t>> groups_of_id;
  for (const size_t i : bare) {
    std::map<int64_t, std::map<int64_t, std::string>> streams;  // local id -> seq -> op
    for (const FrEntry& e : dumps[i].entries) {
      if (!e.is_p2p) streams[e.pg_id].emplace(e.collective_seq_id, e.profiling_name);
    }
    for (const auto& [id, ops] : streams) {
      const size_t chosen = AgreeingGroup(groups, groups_of_id[id], ops);
      if (chosen == groups.size()) {
        groups.emplace_back().local_id = id;
        groups_of_id[id].push_back(chosen);
      }
      groups[chosen].ops.insert(ops.begin(), ops.end());
      groups[chosen].ranks.push_back(dumps[i].rank);
      out.group_of[{i, id}] = chosen;
    }
  }
  for (BareListGroups::Group& group : groups) {
    PETRSIM_ASSERT(!group.ranks.empty());  // a group is made for the stream that joins it
    std::sort(group.ranks.begin(), group.ranks.end());
    group.name = fmt::format("{}@{}", group.local_id, CompactRanks(group.ranks, ","));
  }
  return out;
}

}  // namespace

std::vector<std::string> MatchBareListGroups(std::vector<FrDump>& dumps) {
  std::vector<size_t> bare;
  for (size_t i = 0; i < dumps.size(); ++i) {
    if (dumps[i].bare_list) bare.push_back(i);
  }
  if (bare.empty()) return {};
  std::sort(bare.begin(), bare.end(), [&](size_t a, size_t b) { return dumps[a].rank < dumps[b].rank; });
  bool idle_without_dump = false;
  const std::vector<uint32_t> idle = IdleRanks(dumps, idle_without_dump);
  const BareListGroups matched = MatchStreams(dumps, bare);
  for (const size_t i : bare) {
    FrDump& dump = dumps[i];
    for (FrEntry& e : dump.entries) {
      const auto it = matched.group_of.find({i, e.pg_id});
      if (it == matched.group_of.end()) continue;  // a point-to-point call on an id with no collective
      const BareListGroups::Group& group = matched.groups[it->second];
      e.pg_name = group.name;
      if (dump.pg_config.count(group.name) > 0) continue;
      FrGroupConfig config;
      config.name = group.name;
      std::set_union(group.ranks.begin(), group.ranks.end(), idle.begin(), idle.end(),
                     std::back_inserter(config.ranks));
      PETRSIM_ASSERT(config.ranks.size() >= group.ranks.size());
      dump.pg_config[group.name] = std::move(config);
    }
  }

  std::vector<std::string> notes;
  notes.push_back(fmt::format(
      "bare-list dumps (PyTorch 2.2) name a process group by its index among the groups each process created "
      "(ProcessGroupNCCL::uid_), which differs from rank to rank, and not its members: {} group(s) matched across "
      "ranks by their calls (the same op at each sequence number two ranks both recorded), named <index>@<ranks>",
      matched.groups.size()));
  if (!idle.empty()) {
    notes.push_back(
        fmt::format("rank(s) {} wait in no call (nothing pending in their dump{}): the bare list cannot "
                    "say which groups they belong to, so each group counts them among its members",
                    CompactRanks(idle, ", "), idle_without_dump ? ", or no dump" : ""));
  }
  return notes;
}

FrDump ReadFlightRecorderDump(const std::string& path) {
  constexpr uint64_t kMaxBytes = uint64_t{1} << 32;
  uint32_t rank = 0;
  const bool named = RankFromFileName(path, rank);
  const std::optional<uint32_t> rank_from_name = named ? std::optional<uint32_t>(rank) : std::nullopt;
  RegularFileChunks file(path, "Flight Recorder dump", kMaxBytes);
  // Read up to the first byte that is not blank: it tells the format.
  std::string prefix;
  for (std::string_view chunk = file.Next(); !chunk.empty(); chunk = file.Next()) {
    prefix.append(chunk);
    const auto first = std::find_if_not(prefix.begin(), prefix.end(), IsBlank);
    if (first == prefix.end()) continue;
    if (*first != '{') break;
    // A JSON dump is parsed as it is read: its text is never held whole.
    FrDump dump;
    dump.path = path;
    if (named) dump.rank = rank;
    const Converter converter(path, file.size_at_open());
    JsonDepth depth(path, kPickleDepthMax);
    JsonDumpChunks chunks(prefix, &file, depth);
    const bool has_rank = ParseJsonDump(chunks, converter, path, dump);
    FinishDump(dump, has_rank, rank_from_name);
    return dump;
  }
  // A pickle (or neither, which the parser says): read whole, as the pickle machine reads it.
  for (std::string_view chunk = file.Next(); !chunk.empty(); chunk = file.Next()) prefix.append(chunk);
  return ParseFlightRecorderDump(prefix, path, rank_from_name);
}

}  // namespace petrsim
