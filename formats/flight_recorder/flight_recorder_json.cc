// Flight Recorder dumps in JSON (dump_json): parsed by nlohmann's SAX events as the text is read, each entry converted
// as soon as it is whole; see flight_recorder_internal.h.
#include <exception>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/assert.h"
#include "base/chunked_chars.h"
#include "formats/flight_recorder/flight_recorder_internal.h"

namespace petrsim::flight_recorder_internal {
namespace {

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

}  // namespace

bool ParseJsonDump(std::string_view prefix, RegularFileChunks* file, const Converter& converter,
                   const std::string& display_name, FrDump& dump) {
  JsonDepth depth(display_name, kPickleDepthMax);
  JsonDumpChunks chunks(prefix, file, depth);
  PickleDocument doc;
  JsonDumpReader reader(doc, converter, dump, display_name);
  ChunkedChars<JsonDumpChunks> chars(chunks);
  nlohmann::json::sax_parse(chars.begin(), chars.end(), &reader);
  PETRSIM_ASSERT(reader.root() != nullptr);
  const bool has_rank = converter.Convert(*reader.root(), dump, /*entries_read=*/true);
  if (reader.entry_error()) std::rethrow_exception(reader.entry_error());
  return has_rank;
}

}  // namespace petrsim::flight_recorder_internal
