// JSON configs (what cfg.dump('x.json') writes: json.dump of the dict; `_base_` works there too in
// mmcv), read with nlohmann's SAX parser so that each value knows its line.
#include <algorithm>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "base/error.h"
#include "formats/mmcv/config_internal.h"
#include "formats/pyconfig/lexer.h"
#include "formats/pyconfig/limits.h"

namespace petrsim::mmcv_internal {
namespace {

using pyconfig::Budget;
using pyconfig::kMaxNesting;
using pyconfig::Location;

// Reads like a const char*, and remembers the last non-blank character nlohmann's lexer read, for
// the line of each value.
struct TrackingIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* p = nullptr;
  const char** last = nullptr;

  reference operator*() const {
    if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') *last = p;
    return *p;
  }
  TrackingIterator& operator++() {
    ++p;
    return *this;
  }
  TrackingIterator operator++(int) {
    TrackingIterator old = *this;
    ++p;
    return old;
  }
  bool operator==(const TrackingIterator& other) const { return p == other.p; }
  bool operator!=(const TrackingIterator& other) const { return p != other.p; }
};

class JsonBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  JsonBuilder(std::string_view text, std::string path, Budget* budget)
      : text_(text), path_(std::move(path)), budget_(budget), counted_(text.data()), last_(text.data()) {}

  const char** last() { return &last_; }
  ConfigValue Take() { return std::move(root_); }

  bool null() override { return Add(std::monostate{}); }
  bool boolean(bool v) override { return Add(v); }
  bool number_integer(number_integer_t v) override { return Add(static_cast<int64_t>(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw ScenarioError(WhereNow() + ": integer " + std::to_string(v) + " too large (petrsim reads 64-bit integers)");
    }
    return Add(static_cast<int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t& /*text*/) override { return Add(static_cast<double>(v)); }
  bool string(string_t& v) override { return Add(std::move(v)); }
  bool binary(binary_t& /*v*/) override { throw ScenarioError(WhereNow() + ": binary data in a JSON config"); }
  bool start_object(std::size_t /*size*/) override { return Open(true); }
  bool key(string_t& k) override {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t /*size*/) override { return Open(false); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& error) override {
    const size_t at = std::min(position > 0 ? position - 1 : 0, text_.size());
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < at; ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    std::string message = error.what();
    const size_t column = message.find("column ");
    if (column != std::string::npos) {
      const size_t colon = message.find(": ", column);
      if (colon != std::string::npos) message = message.substr(colon + 2);
    }
    throw ScenarioError(Location(path_, line, static_cast<int>(at - line_start) + 1) + ": not valid JSON: " + message);
  }

 private:
  struct Frame {
    bool is_dict = false;
    ConfigList list;
    ConfigDictBuilder dict;
    std::string key;
    std::string where;
  };

  int LineNow() {
    while (counted_ < last_) {
      if (*counted_ == '\n') ++line_;
      ++counted_;
    }
    return line_;
  }
  std::string WhereNow() { return path_ + ":" + std::to_string(LineNow()); }

  template <typename T>
  ConfigValue MakeValue(T&& x) {
    ConfigValue v;
    v.value = std::forward<T>(x);
    v.where = WhereNow();
    const std::string* s = v.AsString();
    budget_->Charge(1, s != nullptr ? s->size() : 0, v.where);
    return v;
  }
  template <typename T>
  bool Add(T&& x) {
    Place(MakeValue(std::forward<T>(x)));
    return true;
  }
  void Place(ConfigValue v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return;
    }
    Frame& top = stack_.back();
    if (!top.is_dict) {
      top.list.items.push_back(std::move(v));
    } else {
      budget_->Charge(0, top.key.size(), v.where);
      top.dict.Set(std::move(top.key), std::move(v));  // json.load: the last of a repeated key wins
      top.key.clear();
    }
  }
  bool Open(bool is_dict) {
    if (static_cast<int>(stack_.size()) >= kMaxNesting) {
      throw ScenarioError(WhereNow() + ": JSON nested deeper than " + std::to_string(kMaxNesting) +
                          " levels (petrsim's limit)");
    }
    Frame frame;
    frame.is_dict = is_dict;
    frame.where = WhereNow();
    budget_->Charge(1, 0, frame.where);
    stack_.push_back(std::move(frame));
    return true;
  }
  bool Close() {
    Frame& top = stack_.back();
    ConfigValue v;
    v.where = std::move(top.where);
    if (top.is_dict) {
      v.value = top.dict.Take();
    } else {
      v.value = std::move(top.list);
    }
    stack_.pop_back();
    Place(std::move(v));
    return true;
  }

  std::string_view text_;
  std::string path_;
  Budget* budget_;
  const char* counted_;
  const char* last_;
  int line_ = 1;
  std::vector<Frame> stack_;
  ConfigValue root_;
};

}  // namespace

FileValues EvaluateJson(std::string_view original, const std::string& path, Budget* budget) {
  pyconfig::CheckText(original, path, 1);
  // mmcv's _pre_substitute_base_vars works on the text: a bare {{_base_.x}} becomes a string. The
  // newlines it spanned are kept after it, so that lines stay where they were.
  std::string text;
  size_t p = 0;
  while (p < original.size()) {
    const size_t at = original.find("{{", p);
    if (at == std::string_view::npos) break;
    size_t end = 0;
    std::string variable;
    if (pyconfig::MatchBraces(original, at, true, &end, &variable)) {
      text.append(original.substr(p, at - p));
      text += "\"\\u0000{{_base_." + variable + "}}\"";
      for (size_t i = at; i < end; ++i) {
        if (original[i] == '\n') text += '\n';
      }
      p = end;
      continue;
    }
    text.append(original.substr(p, at + 1 - p));
    p = at + 1;
  }
  text.append(original.substr(p));

  JsonBuilder builder(text, path, budget);
  TrackingIterator first{text.data(), builder.last()};
  TrackingIterator last{text.data() + text.size(), builder.last()};
  nlohmann::json::sax_parse(first, last, &builder);
  ConfigValue root = builder.Take();
  ConfigDict* dict = std::get_if<ConfigDict>(&root.value);
  if (dict == nullptr) {
    throw ScenarioError(path + ": a JSON config must be an object (mmcv: cfg_dict must be a dict), found " +
                        ConfigValue::KindName(root.kind()));
  }
  FileValues out;
  for (auto& [key, value] : dict->entries) {
    if (key == "_base_") {
      out.has_base = true;
      out.base_where = value.where;
      out.base = std::move(value);
    } else {
      out.dict.entries.emplace_back(key, std::move(value));
    }
  }
  return out;
}

}  // namespace petrsim::mmcv_internal
