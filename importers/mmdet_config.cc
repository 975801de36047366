// Reading mmcv 1.x configs without running them; see mmdet_config.h for what is read and why.
// The pieces: a Python tokenizer (Lexer), an evaluator that parses and evaluates one statement at
// a time (Evaluator: pure, it only builds values), a JSON reader (nlohmann's SAX parser), and
// mmcv's _file2dict over them (LoadFile, MergeAIntoB, SubstituteBaseVars).
#include "importers/mmdet_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "model/error.h"
#include "model/file_io.h"

namespace petrsim {

// ---------------------------------------------------------------------------------------------
// ConfigValue and ConfigDict.

const ConfigValue* ConfigDict::Get(std::string_view key) const {
  for (const auto& entry : entries) {
    if (entry.key == key) return &entry.value;
  }
  return nullptr;
}

ConfigValue* ConfigDict::Get(std::string_view key) {
  for (auto& entry : entries) {
    if (entry.key == key) return &entry.value;
  }
  return nullptr;
}

void ConfigDict::Set(std::string key, ConfigValue value) {
  if (ConfigValue* existing = Get(key)) {
    *existing = std::move(value);
    return;
  }
  entries.emplace_back(std::move(key), std::move(value));
}

bool ConfigDict::Erase(std::string_view key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->key == key) {
      entries.erase(it);
      return true;
    }
  }
  return false;
}

std::optional<double> ConfigValue::AsNumber() const {
  if (const int64_t* i = AsInt()) return static_cast<double>(*i);
  if (const double* d = AsFloat()) return *d;
  return std::nullopt;
}

const std::vector<ConfigValue>* ConfigValue::AsSequence() const {
  if (const auto* list = std::get_if<ConfigList>(&value)) return &list->items;
  if (const auto* tuple = std::get_if<ConfigTuple>(&value)) return &tuple->items;
  return nullptr;
}

bool ConfigValue::Truthy() const {
  switch (kind()) {
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return std::get<bool>(value);
    case Kind::kInt:
      return std::get<int64_t>(value) != 0;
    case Kind::kFloat:
      return std::get<double>(value) != 0.0;  // NaN is true in Python too
    case Kind::kString:
      return !std::get<std::string>(value).empty();
    case Kind::kList:
    case Kind::kTuple:
      return !AsSequence()->empty();
    case Kind::kDict:
      return !AsDict()->entries.empty();
  }
  return false;
}

const ConfigValue* ConfigValue::Find(std::string_view dotted_path) const {
  const ConfigValue* current = this;
  while (!dotted_path.empty()) {
    const size_t dot = dotted_path.find('.');
    const std::string_view step = dotted_path.substr(0, dot);
    dotted_path = dot == std::string_view::npos ? std::string_view() : dotted_path.substr(dot + 1);
    if (const ConfigDict* dict = current->AsDict()) {
      current = dict->Get(step);
    } else if (const std::vector<ConfigValue>* items = current->AsSequence()) {
      size_t index = 0;
      const auto [end, error] = std::from_chars(step.data(), step.data() + step.size(), index);
      if (error != std::errc() || end != step.data() + step.size() || step.empty() || index >= items->size()) {
        return nullptr;
      }
      current = &(*items)[index];
    } else {
      return nullptr;
    }
    if (current == nullptr) return nullptr;
  }
  return current;
}

const char* ConfigValue::KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "a bool";
    case Kind::kInt:
      return "an int";
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "a string";
    case Kind::kList:
      return "a list";
    case Kind::kTuple:
      return "a tuple";
    case Kind::kDict:
      return "a dict";
  }
  return "a value";
}

namespace {

// Python's repr of a float ('r' format: shortest round trip; exponent form when the decimal point
// would be before -4 or after 16 digits).
std::string PythonFloatRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), x, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  std::string sign;
  if (!text.empty() && text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const size_t e = text.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (text[i] != '.') digits += text[i];
  }
  const int exponent = std::atoi(text.c_str() + e + 1);
  const int point = exponent + 1;  // digits before the decimal point
  const int count = static_cast<int>(digits.size());
  if (point <= -4 || point > 16) {
    std::string out = sign + digits.substr(0, 1);
    if (count > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_text;
  }
  if (point <= 0) return sign + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (point >= count) return sign + digits + std::string(static_cast<size_t>(point - count), '0') + ".0";
  return sign + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

std::string PythonStringRepr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

void AppendRepr(const ConfigValue& v, std::string* out) {
  switch (v.kind()) {
    case ConfigValue::Kind::kNone:
      *out += "None";
      return;
    case ConfigValue::Kind::kBool:
      *out += *v.AsBool() ? "True" : "False";
      return;
    case ConfigValue::Kind::kInt:
      *out += std::to_string(*v.AsInt());
      return;
    case ConfigValue::Kind::kFloat:
      *out += PythonFloatRepr(*v.AsFloat());
      return;
    case ConfigValue::Kind::kString:
      *out += PythonStringRepr(*v.AsString());
      return;
    case ConfigValue::Kind::kList:
    case ConfigValue::Kind::kTuple: {
      const bool tuple = v.kind() == ConfigValue::Kind::kTuple;
      const auto& items = *v.AsSequence();
      *out += tuple ? '(' : '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += ", ";
        AppendRepr(items[i], out);
      }
      if (tuple && items.size() == 1) *out += ',';
      *out += tuple ? ')' : ']';
      return;
    }
    case ConfigValue::Kind::kDict: {
      *out += '{';
      bool first = true;
      for (const auto& [key, value] : v.AsDict()->entries) {
        if (!first) *out += ", ";
        first = false;
        *out += PythonStringRepr(key) + ": ";
        AppendRepr(value, out);
      }
      *out += '}';
      return;
    }
  }
}

}  // namespace

std::string ConfigValue::Repr() const {
  std::string out;
  AppendRepr(*this, &out);
  return out;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Limits and shared text.

constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
constexpr int kMaxNesting = 200;     // brackets, and the parser's recursion
constexpr int kMaxValueDepth = 256;  // a value's depth (names can stack literals)
constexpr int kMaxBaseDepth = 32;
constexpr size_t kMaxFiles = 256;
constexpr size_t kMaxNodes = 1'000'000;
constexpr size_t kMaxTokens = 2'000'000;
constexpr size_t kMaxStringBytes = size_t{64} << 20;
constexpr int64_t kMaxRangeLength = int64_t{1} << 20;

const char kUnsupportedTail[] =
    " is not supported in a config petrsim reads without running it (only assignments of literals, dict(), lists, "
    "tuples and arithmetic over earlier names)";

// A `{{_base_.a.b}}` placeholder while a file is read: the string kMarker + "a.b" + "}}". It starts
// with a NUL, which no config file holds as text (a NUL byte is refused); mmcv uses a random string.
const std::string kMarker("\0{{_base_.", 10);

bool HasMarker(const std::string& s) { return s.find(kMarker) != std::string::npos; }

// The variable of a string that is exactly one placeholder, or nullopt.
std::optional<std::string> PlaceholderVariable(const std::string& s) {
  if (s.size() <= kMarker.size() + 2 || s.compare(0, kMarker.size(), kMarker) != 0 ||
      s.compare(s.size() - 2, 2, "}}") != 0) {
    return std::nullopt;
  }
  std::string variable = s.substr(kMarker.size(), s.size() - kMarker.size() - 2);
  if (HasMarker(variable)) return std::nullopt;
  return variable;
}

// How a string holding a placeholder reads in a message: "{{_base_.a.b}}" or the string's text.
std::string PlaceholderText(const std::string& s) {
  const size_t at = s.find(kMarker);
  if (at == std::string::npos) return s;
  const size_t end = s.find("}}", at);
  return s.substr(at + 1, end == std::string::npos ? std::string::npos : end + 2 - at - 1);
}

std::string Location(const std::string& path, int line, int col) {
  return path + ":" + std::to_string(line) + ":" + std::to_string(col);
}

const std::unordered_set<std::string>& PythonKeywords() {
  static const std::unordered_set<std::string> keywords = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return keywords;
}

bool IsKeyword(const std::string& name) { return PythonKeywords().count(name) > 0; }

const std::unordered_set<std::string>& PythonBuiltins() {
  static const std::unordered_set<std::string> builtins = {
      "abs",       "all",           "any",     "bin",     "bool",   "bytearray",  "bytes",      "callable",
      "chr",       "compile",       "complex", "delattr", "dict",   "dir",        "divmod",     "enumerate",
      "eval",      "exec",          "filter",  "float",   "format", "frozenset",  "getattr",    "globals",
      "hasattr",   "hash",          "hex",     "id",      "input",  "int",        "isinstance", "issubclass",
      "iter",      "len",           "list",    "locals",  "map",    "max",        "min",        "next",
      "object",    "oct",           "open",    "ord",     "pow",    "print",      "range",      "repr",
      "reversed",  "round",         "set",     "setattr", "slice",  "sorted",     "str",        "sum",
      "super",     "tuple",         "type",    "vars",    "zip",    "__import__", "__file__",   "__name__",
      "Exception", "NotImplemented"};
  return builtins;
}

// Counts values and string bytes built during one read, so that `[x] * n`, names copied many
// times or a huge JSON file end in an error, not in exhausted memory.
class Budget {
 public:
  void Charge(size_t nodes, size_t bytes, const std::string& where) {
    nodes_ += nodes;
    bytes_ += bytes;
    if (nodes_ > kMaxNodes) {
      throw ScenarioError(where + ": the config builds more than " + std::to_string(kMaxNodes) +
                          " values (petrsim's limit for a config)");
    }
    if (bytes_ > kMaxStringBytes) {
      throw ScenarioError(where + ": the config builds more than " + std::to_string(kMaxStringBytes >> 20) +
                          " MiB of strings (petrsim's limit for a config)");
    }
  }
  size_t nodes_left() const { return kMaxNodes - std::min(nodes_, kMaxNodes); }
  size_t bytes_left() const { return kMaxStringBytes - std::min(bytes_, kMaxStringBytes); }

 private:
  size_t nodes_ = 0;
  size_t bytes_ = 0;
};

void Measure(const ConfigValue& v, size_t* nodes, size_t* bytes) {
  ++*nodes;
  if (const std::string* s = v.AsString()) *bytes += s->size();
  if (const auto* items = v.AsSequence()) {
    for (const ConfigValue& item : *items) Measure(item, nodes, bytes);
  } else if (const ConfigDict* dict = v.AsDict()) {
    for (const auto& [key, value] : dict->entries) {
      *bytes += key.size();
      Measure(value, nodes, bytes);
    }
  }
}

// Depth of nesting: a scalar 0, a container 1 + its deepest item.
int Depth(const ConfigValue& v) {
  int deepest = -1;
  if (const auto* items = v.AsSequence()) {
    for (const ConfigValue& item : *items) deepest = std::max(deepest, Depth(item));
  } else if (const ConfigDict* dict = v.AsDict()) {
    for (const auto& entry : dict->entries) deepest = std::max(deepest, Depth(entry.value));
  } else {
    return 0;
  }
  return deepest + 1;
}

// A ConfigDict being built, with a hash index of its keys (a config may hold many keys).
class DictBuilder {
 public:
  DictBuilder() = default;
  explicit DictBuilder(ConfigDict dict) : dict_(std::move(dict)) {
    for (size_t i = 0; i < dict_.entries.size(); ++i) index_.emplace(dict_.entries[i].key, i);
  }
  ConfigValue* Get(const std::string& key) {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &dict_.entries[it->second].value;
  }
  const ConfigValue* Get(const std::string& key) const {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &dict_.entries[it->second].value;
  }
  // Python's d[key] = value: an existing key keeps its place.
  void Set(std::string key, ConfigValue value) {
    const auto it = index_.find(key);
    if (it != index_.end()) {
      dict_.entries[it->second].value = std::move(value);
      return;
    }
    index_.emplace(key, dict_.entries.size());
    dict_.entries.emplace_back(std::move(key), std::move(value));
  }
  const ConfigDict& dict() const { return dict_; }
  ConfigDict Take() {
    index_.clear();
    return std::move(dict_);
  }

 private:
  ConfigDict dict_;
  std::unordered_map<std::string, size_t> index_;
};

// Python's type name, for messages shaped like Python's own.
const char* PyType(const ConfigValue& v) {
  switch (v.kind()) {
    case ConfigValue::Kind::kNone:
      return "NoneType";
    case ConfigValue::Kind::kBool:
      return "bool";
    case ConfigValue::Kind::kInt:
      return "int";
    case ConfigValue::Kind::kFloat:
      return "float";
    case ConfigValue::Kind::kString:
      return "str";
    case ConfigValue::Kind::kList:
      return "list";
    case ConfigValue::Kind::kTuple:
      return "tuple";
    case ConfigValue::Kind::kDict:
      return "dict";
  }
  return "object";
}

// ---------------------------------------------------------------------------------------------
// Text checks: UTF-8 (what Python reads a source file as), no NUL byte.

bool IsNewlineAt(std::string_view s, size_t p, size_t* length) {
  if (p >= s.size()) return false;
  if (s[p] == '\n') {
    *length = 1;
    return true;
  }
  if (s[p] == '\r') {
    *length = p + 1 < s.size() && s[p + 1] == '\n' ? 2 : 1;
    return true;
  }
  return false;
}

void CheckText(std::string_view text, const std::string& path, int first_line) {
  int line = first_line;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size();) {
    size_t newline = 0;
    if (IsNewlineAt(text, i, &newline)) {
      i += newline;
      ++line;
      line_start = i;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    const int col = static_cast<int>(i - line_start) + 1;
    if (c == 0) {
      throw ScenarioError(Location(path, line, col) + ": a NUL byte: this is not a Python config (a binary file?)");
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    }
    bool valid = length > 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      const unsigned char lo = k == 1 ? low : 0x80;
      const unsigned char hi = k == 1 ? high : 0xBF;
      valid = next >= lo && next <= hi;
    }
    if (!valid) {
      char byte[8];
      std::snprintf(byte, sizeof(byte), "0x%02X", c);
      throw ScenarioError(Location(path, line, col) + ": not UTF-8 text (byte " + byte +
                          "); a Python config is UTF-8 (a binary file?)");
    }
    i += length;
  }
}

// `{{ \s* NAME \s* }}` at `p`: the span's end and NAME. With `base_only`, NAME must be
// `_base_.` followed by [\w.]+ (mmcv's r'\{\{\s*_base_\.([\w\.]+)\s*\}\}'), and `name` gets what
// follows `_base_.`.
bool MatchBraces(std::string_view s, size_t p, bool base_only, size_t* end, std::string* name) {
  if (p + 1 >= s.size() || s[p] != '{' || s[p + 1] != '{') return false;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  auto is_word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
  };
  size_t q = p + 2;
  while (q < s.size() && is_space(s[q])) ++q;
  if (base_only) {
    if (s.substr(q, 7) != "_base_.") return false;
    q += 7;
  }
  const size_t start = q;
  while (q < s.size() && (is_word(s[q]) || (base_only && s[q] == '.'))) ++q;
  if (q == start) return false;
  *name = std::string(s.substr(start, q - start));
  while (q < s.size() && is_space(s[q])) ++q;
  if (s.substr(q, 2) != "}}") return false;
  *end = q + 2;
  return true;
}

// mmcv's _substitute_predefined_vars: {{ fileDirname }} and friends, everywhere in the text.
std::string SubstitutePredefined(std::string_view text, const std::string& path) {
  if (text.find("{{") == std::string_view::npos) return std::string(text);
  namespace fs = std::filesystem;
  const fs::path absolute = fs::absolute(fs::path(path)).lexically_normal();
  auto slashes = [](std::string s) {
    std::replace(s.begin(), s.end(), '\\', '/');
    return s;
  };
  const std::unordered_map<std::string, std::string> values = {
      {"fileDirname", slashes(absolute.parent_path().string())},
      {"fileBasename", slashes(absolute.filename().string())},
      {"fileBasenameNoExtension", slashes(absolute.stem().string())},
      {"fileExtname", slashes(absolute.extension().string())}};
  std::string out;
  size_t p = 0;
  while (p < text.size()) {
    const size_t at = text.find("{{", p);
    if (at == std::string_view::npos) break;
    size_t end = 0;
    std::string name;
    if (MatchBraces(text, at, false, &end, &name)) {
      const auto it = values.find(name);
      if (it != values.end()) {
        out.append(text.substr(p, at - p));
        out += it->second;
        p = end;
        continue;
      }
    }
    out.append(text.substr(p, at + 1 - p));
    p = at + 1;
  }
  out.append(text.substr(p));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The tokenizer.

struct Token {
  enum class Kind : uint8_t { kName, kInt, kFloat, kString, kBaseRef, kOp, kNewline, kEnd };
  Kind kind = Kind::kEnd;
  bool indented = false;  // first token of a logical line that starts with whitespace
  bool has_for = false;   // an opening bracket whose own level holds `for`: a comprehension
  int line = 0;
  int col = 0;
  uint32_t str = 0;  // a string's value, a placeholder's variable: an index into Lexed::strings
  union {
    int64_t int_value = 0;
    double float_value;
  };
  std::string text;  // a name, an operator, a number's or a placeholder's source text
};

struct Lexed {
  std::vector<Token> tokens;
  std::vector<std::string> strings;
};

class Lexer {
 public:
  Lexer(std::string_view text, std::string path, int first_line, bool base_refs)
      : s_(text), path_(std::move(path)), line_(first_line), base_refs_(base_refs) {}

  Lexed Run() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") {
      pos_ = 3;
      line_start_ = 3;
    }
    bool logical_start = true;
    bool indent_pending = false;
    while (true) {
      if (logical_start && open_.empty()) {
        size_t p = pos_;
        while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\f')) ++p;
        size_t newline = 0;
        if (p >= s_.size()) {
          pos_ = p;
          break;
        }
        if (s_[p] == '#') {
          pos_ = p;
          SkipComment();
          continue;
        }
        if (IsNewlineAt(s_, p, &newline)) {
          pos_ = p + newline;
          NewLine();
          continue;
        }
        indent_pending = p > pos_;
        pos_ = p;
        logical_start = false;
      }
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      size_t newline = 0;
      if (c == ' ' || c == '\t' || c == '\f') {
        ++pos_;
        continue;
      }
      if (c == '#') {
        SkipComment();
        continue;
      }
      if (IsNewlineAt(s_, pos_, &newline)) {
        if (open_.empty()) {
          Token t = Make(Token::Kind::kNewline, Col());
          out_.push_back(std::move(t));
          logical_start = true;
        }
        pos_ += newline;
        NewLine();
        continue;
      }
      const size_t before = out_.size();
      if (before >= kMaxTokens) {
        Fail(line_, Col(), "more than " + std::to_string(kMaxTokens) + " tokens (petrsim's limit for a config)");
      }
      if (c == '\\') {
        if (IsNewlineAt(s_, pos_ + 1, &newline)) {
          pos_ += 1 + newline;
          NewLine();
          continue;
        }
        if (pos_ + 1 >= s_.size()) Fail(line_, Col(), "unexpected end of file after a line continuation '\\'");
        Fail(line_, Col(), "unexpected character after a line continuation '\\'");
      } else if (IsIdentStart(c)) {
        LexNameOrString();
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && pos_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1])))) {
        LexNumber();
      } else if (c == '\'' || c == '"') {
        LexString(false, line_, Col());
      } else {
        LexOperator();
      }
      if (indent_pending && out_.size() > before) {
        out_[before].indented = true;
        indent_pending = false;
      }
    }
    if (!open_.empty()) {
      const Open& open = open_.back();
      Fail(open.line, open.col,
           std::string("unbalanced bracket: '") + open.c + "' is never closed (expected '" + Closer(open.c) +
               "' before the end of the file)");
    }
    if (!out_.empty() && out_.back().kind != Token::Kind::kNewline) out_.push_back(Make(Token::Kind::kNewline, Col()));
    out_.push_back(Make(Token::Kind::kEnd, Col()));
    return Lexed{std::move(out_), std::move(strings_)};
  }

 private:
  struct Open {
    char c;
    int line;
    int col;
    size_t token;  // its index in out_
  };

  [[noreturn]] void Fail(int line, int col, const std::string& message) const {
    throw ScenarioError(Location(path_, line, col) + ": " + message);
  }
  [[noreturn]] void Unsupported(int line, int col, const std::string& construct) const {
    Fail(line, col, construct + kUnsupportedTail);
  }
  int Col() const { return static_cast<int>(pos_ - line_start_) + 1; }
  void NewLine() {
    ++line_;
    line_start_ = pos_;
  }
  Token Make(Token::Kind kind, int col) const {
    Token t;
    t.kind = kind;
    t.line = line_;
    t.col = col;
    return t;
  }
  static char Closer(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }
  static bool IsIdentStart(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
  }
  static bool IsIdentChar(char c) { return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

  void SkipComment() {
    size_t newline = 0;
    while (pos_ < s_.size() && !IsNewlineAt(s_, pos_, &newline)) ++pos_;
  }

  void LexNameOrString() {
    const int col = Col();
    const size_t start = pos_;
    while (pos_ < s_.size() && IsIdentChar(s_[pos_])) ++pos_;
    const std::string name(s_.substr(start, pos_ - start));
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"') && name.size() <= 2) {
      std::string lower = name;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      static const std::unordered_set<std::string> prefixes = {"r", "u", "f", "b", "fr", "rf", "br", "rb"};
      if (prefixes.count(lower) > 0) {
        if (lower.find('f') != std::string::npos) Unsupported(line_, col, "an f-string");
        if (lower.find('b') != std::string::npos) Unsupported(line_, col, "a bytes literal");
        LexString(lower == "r", line_, col);
        return;
      }
    }
    // A comprehension is known before its first item is evaluated (its names are unbound there).
    if ((name == "for" || name == "async") && !open_.empty()) out_[open_.back().token].has_for = true;
    Token t = Make(Token::Kind::kName, col);
    t.text = name;
    out_.push_back(std::move(t));
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // At the opening quote (the prefix, if any, already consumed; `line`/`col` are where it began).
  void LexString(bool raw, int line, int col) {
    const char quote = s_[pos_];
    const bool triple = s_.substr(pos_, 3) == std::string(3, quote);
    pos_ += triple ? 3 : 1;
    const size_t body = pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) {
        Fail(line, col,
             triple ? "unterminated triple-quoted string literal (it starts here)"
                    : "unterminated string literal (expected its closing quote before the end of the file)");
      }
      const char c = s_[pos_];
      size_t newline = 0;
      if (c == quote) {
        if (!triple) {
          ++pos_;
          break;
        }
        if (s_.substr(pos_, 3) == std::string(3, quote)) {
          pos_ += 3;
          break;
        }
        out += c;
        ++pos_;
        continue;
      }
      if (IsNewlineAt(s_, pos_, &newline)) {
        if (!triple) Fail(line, col, "unterminated string literal (expected its closing quote on the same line)");
        out += '\n';
        pos_ += newline;
        NewLine();
        continue;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      // A backslash.
      if (pos_ + 1 >= s_.size()) {
        ++pos_;
        continue;  // the end of the file: unterminated, above
      }
      const char e = s_[pos_ + 1];
      if (IsNewlineAt(s_, pos_ + 1, &newline)) {
        if (raw) out += "\\\n";
        pos_ += 1 + newline;
        NewLine();
        continue;
      }
      if (raw) {
        out += '\\';
        out += e;
        pos_ += 2;
        continue;
      }
      const int escape_col = Col();
      pos_ += 2;
      switch (e) {
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < digits; ++k) {
            const int h = pos_ < s_.size() ? HexValue(s_[pos_]) : -1;
            if (h < 0) {
              Fail(line_, escape_col,
                   std::string("truncated \\") + e + " escape (expected " + std::to_string(digits) + " hex digits)");
            }
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++pos_;
          }
          if (cp > 0x10FFFF) Fail(line_, escape_col, "illegal Unicode character in a \\U escape");
          if (cp >= 0xD800 && cp <= 0xDFFF) {
            Fail(line_, escape_col, "a surrogate code point escape (petrsim reads strings as UTF-8)");
          }
          AppendUtf8(cp, &out);
          break;
        }
        case 'N':
          Unsupported(line_, escape_col, "a \\N{...} escape (a named Unicode character)");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(s_[pos_] - '0');
              ++pos_;
            }
            AppendUtf8(cp, &out);
          } else {
            out += '\\';  // Python keeps an unknown escape as it is
            --pos_;       // the escaped character is read again as an ordinary one
          }
      }
    }
    if (base_refs_) {
      // mmcv replaces `{{_base_.x}}` by a quoted placeholder even inside a string, where it is
      // never substituted again: refuse it.
      const std::string_view source = s_.substr(body, pos_ - body);
      for (size_t at = source.find("{{"); at != std::string_view::npos; at = source.find("{{", at + 1)) {
        size_t end = 0;
        std::string variable;
        if (MatchBraces(source, at, true, &end, &variable)) {
          Fail(line, col,
               "{{_base_." + variable +
                   "}} inside a string literal: mmcv substitutes a base's variable only as a whole value (write "
                   "name = {{_base_." +
                   variable + "}} without quotes)");
        }
      }
    }
    Token t;
    t.kind = Token::Kind::kString;
    t.line = line;
    t.col = col;
    t.str = static_cast<uint32_t>(strings_.size());
    strings_.push_back(std::move(out));
    out_.push_back(std::move(t));
  }

  // Digits of `base` with single underscores between them; appends them (without underscores).
  void ReadDigits(int base, std::string* digits) {
    auto is_digit = [base](char c) {
      const int v = HexValue(c);
      return v >= 0 && v < base;
    };
    while (pos_ < s_.size()) {
      if (s_[pos_] == '_' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1]) && !digits->empty()) {
        ++pos_;
      }
      if (!is_digit(s_[pos_])) break;
      *digits += s_[pos_];
      ++pos_;
    }
  }

  void LexNumber() {
    const int col = Col();
    const size_t start = pos_;
    Token t = Make(Token::Kind::kInt, col);
    auto invalid = [&]() {
      Fail(line_, col, "invalid number literal '" + std::string(s_.substr(start, pos_ + 1 - start)) + "'");
    };
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] != '\0' &&
        std::strchr("xXoObB", s_[pos_ + 1]) != nullptr) {
      const char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[pos_ + 1])));
      const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
      pos_ += 2;
      if (pos_ < s_.size() && s_[pos_] == '_') ++pos_;  // 0x_ff is valid
      std::string digits;
      ReadDigits(base, &digits);
      if (digits.empty()) invalid();
      uint64_t value = 0;
      for (const char d : digits) {
        const auto v = static_cast<uint64_t>(HexValue(d));
        if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - v) / static_cast<uint64_t>(base)) {
          Fail(line_, col, "integer literal too large (petrsim reads 64-bit integers)");
        }
        value = value * static_cast<uint64_t>(base) + v;
      }
      t.int_value = static_cast<int64_t>(value);
    } else {
      std::string int_part;
      ReadDigits(10, &int_part);
      std::string text = int_part;
      bool is_float = false;
      if (pos_ < s_.size() && s_[pos_] == '.') {
        is_float = true;
        ++pos_;
        text += '.';
        std::string fraction;
        ReadDigits(10, &fraction);
        text += fraction;
      }
      if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
        size_t q = pos_ + 1;
        if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
        if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
          is_float = true;
          text += 'e';
          if (s_[pos_ + 1] == '-') text += '-';
          pos_ = q;
          std::string exponent;
          ReadDigits(10, &exponent);
          text += exponent;
        }
      }
      if (pos_ < s_.size() && (s_[pos_] == 'j' || s_[pos_] == 'J')) Unsupported(line_, col, "a complex number");
      if (is_float) {
        t.kind = Token::Kind::kFloat;
        if (text[0] == '.') text.insert(text.begin(), '0');
        double value = 0;
        const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
        if (result.ec == std::errc::result_out_of_range) {
          value = std::strtod(text.c_str(), nullptr);  // Python: inf, or 0.0 for a tiny one
        } else if (result.ec != std::errc() || result.ptr != text.data() + text.size()) {
          invalid();
        }
        t.float_value = value;
      } else {
        if (int_part.size() > 1 && int_part[0] == '0' && int_part.find_first_not_of('0') != std::string::npos) {
          Fail(line_, col,
               "leading zeros in a decimal integer literal are not permitted (Python syntax; an octal number is "
               "written 0o17)");
        }
        uint64_t value = 0;
        for (const char d : int_part) {
          const auto v = static_cast<uint64_t>(d - '0');
          if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - v) / 10) {
            Fail(line_, col, "integer literal too large (petrsim reads 64-bit integers)");
          }
          value = value * 10 + v;
        }
        t.int_value = static_cast<int64_t>(value);
      }
    }
    if (pos_ < s_.size() && (IsIdentChar(s_[pos_]) || s_[pos_] == '_')) invalid();
    t.text = std::string(s_.substr(start, pos_ - start));
    out_.push_back(std::move(t));
  }

  void LexOperator() {
    const int col = Col();
    const char c = s_[pos_];
    if (c == '{' && base_refs_) {
      size_t end = 0;
      std::string variable;
      if (MatchBraces(s_, pos_, true, &end, &variable)) {
        Token t = Make(Token::Kind::kBaseRef, col);
        t.str = static_cast<uint32_t>(strings_.size());
        strings_.push_back(variable);
        t.text = "{{_base_." + variable + "}}";
        for (size_t p = pos_; p < end; ++p) {
          size_t newline = 0;
          if (IsNewlineAt(s_, p, &newline) && newline == 1) {
            line_start_ = p + 1;
            ++line_;
          }
        }
        pos_ = end;
        out_.push_back(std::move(t));
        return;
      }
    }
    static const char* const kOperators[] = {
        "**=", "//=", ">>=", "<<=", "...", "!=", "**", "//", "<<", ">>", "<=", ">=", "==", "+=", "-=", "*=",
        "/=",  "%=",  "&=",  "|=",  "^=",  "@=", "->", ":=", "+",  "-",  "*",  "/",  "%",  "@",  "&",  "|",
        "^",   "~",   "<",   ">",   "(",   ")",  "[",  "]",  "{",  "}",  ",",  ":",  ".",  ";",  "="};
    for (const char* op : kOperators) {
      const size_t length = std::strlen(op);
      if (s_.substr(pos_, length) != op) continue;
      if (length == 1 && (c == '(' || c == '[' || c == '{')) {
        if (static_cast<int>(open_.size()) >= kMaxNesting) {
          Fail(line_, col, "brackets nested deeper than " + std::to_string(kMaxNesting) + " (petrsim's limit)");
        }
        open_.push_back({c, line_, col, out_.size()});
      } else if (length == 1 && (c == ')' || c == ']' || c == '}')) {
        if (open_.empty()) Fail(line_, col, std::string("unbalanced bracket: '") + c + "' closes no open bracket");
        const Open open = open_.back();
        if (Closer(open.c) != c) {
          Fail(line_, col,
               std::string("unbalanced bracket: '") + c + "' closes the '" + open.c + "' opened at line " +
                   std::to_string(open.line) + ":" + std::to_string(open.col) + " (expected '" + Closer(open.c) + "')");
        }
        open_.pop_back();
      }
      Token t = Make(Token::Kind::kOp, col);
      t.text = op;
      pos_ += length;
      out_.push_back(std::move(t));
      return;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) Fail(line_, col, std::string("unexpected character '") + c + "'");
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", u);
    Fail(line_, col, std::string("unexpected character (byte ") + byte + ")");
  }

  std::string_view s_;
  std::string path_;
  size_t pos_ = 0;
  int line_;
  size_t line_start_ = 0;
  bool base_refs_;
  std::vector<Open> open_;
  std::vector<Token> out_;
  std::vector<std::string> strings_;
};

// ---------------------------------------------------------------------------------------------
// The evaluator: parses one statement at a time and evaluates it at once (errors come in file
// order); it only ever builds values.

enum class Mode { kFile, kLogBlock };

struct FileValues {
  ConfigDict dict;  // the file's cfg_dict before its bases: names in first-assignment order
  bool has_base = false;
  ConfigValue base;        // the `_base_` value
  std::string base_where;  // FILE:LINE:COL of the (last) `_base_` assignment
};

class Evaluator {
 public:
  Evaluator(Lexed lexed, std::string path, Mode mode, Budget* budget)
      : toks_(std::move(lexed.tokens)),
        strings_(std::move(lexed.strings)),
        path_(std::move(path)),
        mode_(mode),
        budget_(budget) {}

  FileValues Run() {
    while (Tok().kind != Token::Kind::kEnd) {
      if (Tok().kind == Token::Kind::kNewline) {
        Advance();
        continue;
      }
      if (Tok().indented) {
        Fail(Tok(),
             "unexpected indentation (a Python IndentationError): a config's statements start at the beginning of "
             "their line");
      }
      Statement();
      while (IsOp(Tok(), ";")) {
        Advance();
        if (AtStatementEnd()) break;
        Statement();
      }
      if (Tok().kind != Token::Kind::kNewline && Tok().kind != Token::Kind::kEnd) {
        FailExpected(Tok(), "the end of the statement");
      }
    }
    FileValues out;
    ConfigDict names = names_.Take();
    for (auto& [name, value] : names.entries) {
      if (name == "_base_") {
        out.has_base = true;
        out.base = std::move(value);
        out.base_where = base_where_;
      } else if (name.compare(0, 2, "__") != 0) {
        out.dict.entries.emplace_back(name, std::move(value));
      }
    }
    return out;
  }

 private:
  // ---- tokens
  const Token& Tok() const { return toks_[pos_]; }
  const Token& Peek(size_t k) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void Advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  static bool IsOp(const Token& t, const char* op) { return t.kind == Token::Kind::kOp && t.text == op; }
  static bool IsName(const Token& t, const char* name) { return t.kind == Token::Kind::kName && t.text == name; }
  bool AtStatementEnd() const {
    return Tok().kind == Token::Kind::kNewline || Tok().kind == Token::Kind::kEnd || IsOp(Tok(), ";");
  }

  // ---- messages
  std::string At(const Token& t) const { return Location(path_, t.line, t.col); }
  std::string Where(const Token& t) const { return path_ + ":" + std::to_string(t.line); }
  [[noreturn]] void Fail(const Token& t, const std::string& message) const {
    throw ScenarioError(At(t) + ": " + message);
  }
  [[noreturn]] void Unsupported(const Token& t, const std::string& construct, const std::string& hint = "") const {
    Fail(t, construct + kUnsupportedTail + hint);
  }
  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case Token::Kind::kName:
        return IsKeyword(t.text) ? "the keyword '" + t.text + "'" : "the name '" + t.text + "'";
      case Token::Kind::kInt:
      case Token::Kind::kFloat:
        return "the number " + t.text;
      case Token::Kind::kString:
        return "a string";
      case Token::Kind::kBaseRef:
        return t.text;
      case Token::Kind::kOp:
        return "'" + t.text + "'";
      case Token::Kind::kNewline:
        return "the end of the line";
      case Token::Kind::kEnd:
        return "the end of the file";
    }
    return "a token";
  }
  [[noreturn]] void FailExpected(const Token& t, const std::string& expected) const {
    Fail(t, "expected " + expected + ", found " + Describe(t));
  }
  void Expect(const char* op, const std::string& expected) {
    if (!IsOp(Tok(), op)) FailExpected(Tok(), expected);
    Advance();
  }

  // ---- recursion guard
  class Guard {
   public:
    Guard(Evaluator* e, const Token& t) : e_(e) {
      if (++e_->depth_ > kMaxNesting) {
        e_->Fail(t, "expression nested deeper than " + std::to_string(kMaxNesting) + " levels (petrsim's limit)");
      }
    }
    ~Guard() { --e_->depth_; }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Evaluator* e_;
  };

  // ---- values
  template <typename T>
  ConfigValue Make(T&& x, const Token& at) {
    ConfigValue v;
    v.value = std::forward<T>(x);
    v.where = Where(at);
    const std::string* s = v.AsString();
    budget_->Charge(1, s != nullptr ? s->size() : 0, At(at));
    return v;
  }
  ConfigValue Copy(const ConfigValue& v, const Token& at) {
    size_t nodes = 0;
    size_t bytes = 0;
    Measure(v, &nodes, &bytes);
    budget_->Charge(nodes, bytes, At(at));
    return v;
  }

  // ---- statements
  void Statement() {
    const Token& first = Tok();
    if (first.kind == Token::Kind::kName && IsKeyword(first.text)) {
      static const std::unordered_map<std::string, std::string> kStatements = {
          {"import", "an import"},
          {"from", "a from-import"},
          {"if", "an if statement"},
          {"elif", "an if statement ('elif')"},
          {"else", "an 'else' clause"},
          {"for", "a for loop"},
          {"while", "a while loop"},
          {"def", "a function definition (def)"},
          {"class", "a class definition"},
          {"with", "a with statement"},
          {"try", "a try statement"},
          {"except", "a try statement ('except')"},
          {"finally", "a try statement ('finally')"},
          {"return", "a return statement"},
          {"del", "a del statement"},
          {"assert", "an assert statement"},
          {"raise", "a raise statement"},
          {"global", "a global declaration"},
          {"nonlocal", "a nonlocal declaration"},
          {"pass", "a pass statement"},
          {"break", "a break statement"},
          {"continue", "a continue statement"},
          {"async", "an async statement"}};
      const auto it = kStatements.find(first.text);
      if (it != kStatements.end()) Unsupported(first, it->second);
    }
    if (IsOp(first, "@")) Unsupported(first, "a decorator");

    // The statement's top-level '=' (a lambda's defaults come after its keyword: the scan stops there).
    std::vector<size_t> equals;
    size_t end = pos_;
    for (int depth = 0;; ++end) {
      const Token& t = toks_[end];
      if (t.kind == Token::Kind::kNewline || t.kind == Token::Kind::kEnd) break;
      if (depth == 0 && IsName(t, "lambda")) break;
      if (t.kind != Token::Kind::kOp) continue;
      if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
      if (t.text == ")" || t.text == "]" || t.text == "}") --depth;
      if (depth != 0) continue;
      if (t.text == ";") break;
      if (t.text == "=") equals.push_back(end);
      static const std::unordered_set<std::string> kAugmented = {
          "+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", ">>=", "<<=", "&=", "|=", "^="};
      if (kAugmented.count(t.text) > 0) Unsupported(t, "an augmented assignment ('" + t.text + "')");
      if (t.text == ":" && equals.empty()) {
        if (first.kind == Token::Kind::kName && end == pos_ + 1) {
          Unsupported(first, "an annotated assignment ('name: type = ...')");
        }
        Unsupported(first, "a compound statement ('" + first.text + " ...:')");
      }
    }

    if (equals.empty()) {
      bool only_strings = pos_ < end;
      for (size_t i = pos_; i < end && only_strings; ++i) {
        only_strings = toks_[i].kind == Token::Kind::kString;
      }
      if (only_strings &&
          (toks_[end].kind == Token::Kind::kNewline || toks_[end].kind == Token::Kind::kEnd || IsOp(toks_[end], ";"))) {
        pos_ = end;  // a docstring or another string statement: no effect
        return;
      }
      ParseTestList();
      if (!AtStatementEnd()) FailExpected(Tok(), "an operator or the end of the statement");
      Unsupported(first, "an expression statement (a value not assigned to a name)");
    }

    std::vector<const Token*> targets;
    size_t segment = pos_;
    for (const size_t eq : equals) {
      targets.push_back(&CheckTarget(segment, eq));
      segment = eq + 1;
    }
    pos_ = segment;
    if (AtStatementEnd()) FailExpected(Tok(), "an expression after '='");
    const Token& start = Tok();
    ConfigValue value = ParseTestList();
    if (!AtStatementEnd()) FailExpected(Tok(), "an operator or the end of the statement");
    if (Depth(value) > kMaxValueDepth) {
      Fail(start, "a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels (petrsim's limit)");
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      Assign(*targets[i], i + 1 == targets.size() ? std::move(value) : Copy(value, *targets[i]));
    }
  }

  // The target between `begin` and the '=' at `eq`: one name.
  const Token& CheckTarget(size_t begin, size_t eq) {
    const Token& first = toks_[begin];
    if (begin == eq) Fail(toks_[eq], "expected a name before '=', found '='");
    if (first.kind == Token::Kind::kName && !IsKeyword(first.text) && begin + 1 == eq) return first;
    int depth = 0;
    for (size_t i = begin; i < eq; ++i) {
      const Token& t = toks_[i];
      if (t.kind != Token::Kind::kOp) continue;
      if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
      if (t.text == ")" || t.text == "]" || t.text == "}") --depth;
      if (depth == 0 && t.text == ",") Unsupported(first, "a tuple-unpacking assignment");
    }
    if (IsOp(first, "(") || IsOp(first, "[")) Unsupported(first, "a tuple-unpacking assignment");
    if (IsOp(first, "*")) Unsupported(first, "a star expression ('*')");
    if (first.kind == Token::Kind::kName && IsKeyword(first.text)) {
      Fail(first, "cannot assign to the keyword '" + first.text + "'");
    }
    if (first.kind == Token::Kind::kName && IsOp(toks_[begin + 1], ".")) {
      std::string dotted = first.text;
      for (size_t i = begin + 1; i + 1 < eq && IsOp(toks_[i], ".") && toks_[i + 1].kind == Token::Kind::kName; i += 2) {
        dotted += "." + toks_[i + 1].text;
      }
      Unsupported(first, "an assignment to an attribute ('" + dotted + " = ...')");
    }
    if (first.kind == Token::Kind::kName && IsOp(toks_[begin + 1], "[")) {
      Unsupported(first, "an assignment to a subscript ('" + first.text + "[...] = ...')");
    }
    Fail(first, "cannot assign to an expression (expected a name before '=', found " + Describe(first) + ")");
  }

  void Assign(const Token& target, ConfigValue value) {
    if (target.text == "_base_") {
      if (mode_ == Mode::kLogBlock) {
        Fail(target,
             "_base_ in a Config block: mmcv prints the merged config, without _base_ (is this a config file?)");
      }
      base_where_ = At(target);
    }
    names_.Set(target.text, std::move(value));
  }

  // ---- expressions
  ConfigValue ParseTestList() {
    const Token& start = Tok();
    ConfigValue first = ParseTestOrStar();
    if (!IsOp(Tok(), ",")) return first;
    ConfigTuple tuple;
    tuple.items.push_back(std::move(first));
    while (IsOp(Tok(), ",")) {
      Advance();
      if (AtStatementEnd()) break;
      tuple.items.push_back(ParseTestOrStar());
    }
    return Make(std::move(tuple), start);
  }

  ConfigValue ParseTestOrStar() {
    if (IsOp(Tok(), "*") || IsOp(Tok(), "**")) Unsupported(Tok(), "a star expression ('" + Tok().text + "')");
    return ParseTest();
  }

  ConfigValue ParseTest() {
    const Guard guard(this, Tok());
    if (IsName(Tok(), "lambda")) Unsupported(Tok(), "a lambda");
    ConfigValue v = ParseArith();
    const Token& t = Tok();
    if (t.kind == Token::Kind::kOp) {
      static const std::unordered_set<std::string> kBitwise = {"|", "^", "&", "<<", ">>"};
      static const std::unordered_set<std::string> kCompare = {"==", "!=", "<", ">", "<=", ">=", "<>"};
      if (kBitwise.count(t.text) > 0) Unsupported(t, "a bitwise operator ('" + t.text + "')");
      if (kCompare.count(t.text) > 0) Unsupported(t, "a comparison ('" + t.text + "')");
      if (t.text == ":=") Unsupported(t, "an assignment expression (':=')");
    } else if (t.kind == Token::Kind::kName) {
      if (t.text == "in" || t.text == "is") Unsupported(t, "a comparison ('" + t.text + "')");
      if (t.text == "not") Unsupported(t, "a comparison ('not in')");
      if (t.text == "and" || t.text == "or") Unsupported(t, "a boolean operator ('" + t.text + "')");
      if (t.text == "if") Unsupported(t, "a conditional expression ('... if ... else ...')");
    }
    return v;
  }

  ConfigValue ParseArith() {
    const Token& start = Tok();
    ConfigValue v = ParseTerm();
    while (IsOp(Tok(), "+") || IsOp(Tok(), "-")) {
      const Token& op = Tok();
      Advance();
      ConfigValue right = ParseTerm();
      v = Binary(op, std::move(v), std::move(right), start);
    }
    return v;
  }

  ConfigValue ParseTerm() {
    const Token& start = Tok();
    ConfigValue v = ParseFactor();
    while (true) {
      const Token& op = Tok();
      if (IsOp(op, "@")) Unsupported(op, "a matrix multiplication ('@')");
      if (!IsOp(op, "*") && !IsOp(op, "/") && !IsOp(op, "//") && !IsOp(op, "%")) return v;
      Advance();
      ConfigValue right = ParseFactor();
      v = Binary(op, std::move(v), std::move(right), start);
    }
  }

  ConfigValue ParseFactor() {
    const Token& op = Tok();
    if (IsOp(op, "+") || IsOp(op, "-")) {
      const Guard guard(this, op);
      Advance();
      ConfigValue operand = ParseFactor();
      return Unary(op, std::move(operand), op);
    }
    if (IsOp(op, "~")) Unsupported(op, "a bitwise operator ('~')");
    return ParsePower();
  }

  ConfigValue ParsePower() {
    const Token& start = Tok();
    ConfigValue base = ParseAtomExpr();
    if (!IsOp(Tok(), "**")) return base;
    const Token& op = Tok();
    const Guard guard(this, op);
    Advance();
    ConfigValue exponent = ParseFactor();
    return Binary(op, std::move(base), std::move(exponent), start);
  }

  ConfigValue ParseAtomExpr() {
    ConfigValue v = ParseAtom();
    const Token& t = Tok();
    if (IsOp(t, ".")) {
      const Token& name = Peek(1);
      if (name.kind == Token::Kind::kName && IsOp(Peek(2), "(")) Unsupported(t, "a call of method '" + name.text + "'");
      if (name.kind == Token::Kind::kName) Unsupported(t, "attribute access ('." + name.text + "')");
      FailExpected(name, "a name after '.'");
    }
    if (IsOp(t, "(")) Unsupported(t, "a call of the result of an expression");
    if (IsOp(t, "[")) Unsupported(t, "a subscript ('[...]')");
    return v;
  }

  ConfigValue ParseAtom() {
    const Token& t = Tok();
    switch (t.kind) {
      case Token::Kind::kInt:
        Advance();
        return Make(t.int_value, t);
      case Token::Kind::kFloat:
        Advance();
        return Make(t.float_value, t);
      case Token::Kind::kString: {
        std::string text;
        while (Tok().kind == Token::Kind::kString) {  // adjacent literals: one string
          text += strings_[Tok().str];
          Advance();
        }
        return Make(std::move(text), t);
      }
      case Token::Kind::kBaseRef:
        Advance();
        return Make(kMarker + strings_[t.str] + "}}", t);
      case Token::Kind::kName:
        return ParseName();
      case Token::Kind::kOp:
        if (t.text == "(") return ParseParen();
        if (t.text == "[") return ParseList();
        if (t.text == "{") return ParseBrace();
        if (t.text == "...") Unsupported(t, "an Ellipsis ('...')");
        if (t.text == "*" || t.text == "**") Unsupported(t, "a star expression ('" + t.text + "')");
        FailExpected(t, "an expression");
      case Token::Kind::kNewline:
      case Token::Kind::kEnd:
        FailExpected(t, "an expression");
    }
    FailExpected(t, "an expression");
  }

  bool Defined(const std::string& name) const { return names_.Get(name) != nullptr; }

  ConfigValue ParseName() {
    const Token& t = Tok();
    const std::string& name = t.text;
    if (IsKeyword(name)) {
      if (name == "None") {
        Advance();
        return Make(std::monostate{}, t);
      }
      if (name == "True" || name == "False") {
        Advance();
        return Make(name == "True", t);
      }
      if (name == "lambda") Unsupported(t, "a lambda");
      if (name == "not") Unsupported(t, "a boolean operator ('not')");
      if (name == "await") Unsupported(t, "an await expression");
      if (name == "yield") Unsupported(t, "a yield expression");
      Fail(t, "expected an expression, found the keyword '" + name + "'");
    }
    const Token& next = Peek(1);
    if (IsOp(next, ":=")) Unsupported(next, "an assignment expression (':=')");
    if (IsOp(next, "(")) {
      if (name == "dict" && !Defined(name)) return ParseDictCall();
      if (name == "range" && mode_ == Mode::kLogBlock && !Defined(name)) return ParseRangeCall();
      Unsupported(t, "a call of '" + name + "'");
    }
    if (IsOp(next, ".")) {
      std::string dotted = name;
      size_t k = 1;
      while (IsOp(Peek(k), ".") && Peek(k + 1).kind == Token::Kind::kName) {
        dotted += "." + Peek(k + 1).text;
        k += 2;
      }
      if (IsOp(Peek(k), "(")) Unsupported(t, "a call of '" + dotted + "'");
      Unsupported(
          t, "attribute access ('" + dotted + "')",
          name == "_base_" ? "; mmcv 1.x reads a base file's variable as {{_base_." + dotted.substr(7) + "}}" : "");
    }
    if (IsOp(next, "[")) Unsupported(t, "a subscript ('" + name + "[...]')");
    Advance();
    if (const ConfigValue* value = names_.Get(name)) return Copy(*value, t);
    if (mode_ == Mode::kLogBlock && (name == "inf" || name == "nan")) {
      return Make(name == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN(),
                  t);
    }
    if (PythonBuiltins().count(name) > 0) Unsupported(t, "a reference to the builtin '" + name + "'");
    if (mode_ == Mode::kLogBlock) Fail(t, "name '" + name + "' is not defined (a Config block holds only values)");
    Fail(t, "name '" + name +
                "' is not defined (a config reads only names assigned above it in the same file; mmcv runs each file "
                "on its own, so a base file's variable is written {{_base_." +
                name + "}})");
  }

  ConfigValue ParseParen() {
    const Token& open = Tok();
    if (open.has_for) Unsupported(open, "a generator expression");
    Advance();
    if (IsOp(Tok(), ")")) {
      Advance();
      return Make(ConfigTuple{}, open);
    }
    if (IsName(Tok(), "yield")) Unsupported(Tok(), "a yield expression");
    ConfigValue first = ParseTestOrStar();
    if (IsOp(Tok(), ")")) {
      Advance();
      return first;
    }
    ConfigTuple tuple;
    tuple.items.push_back(std::move(first));
    while (true) {
      if (IsOp(Tok(), ")")) break;
      Expect(",", "',' or ')' in a tuple");
      if (IsOp(Tok(), ")")) break;
      tuple.items.push_back(ParseTestOrStar());
    }
    Advance();
    return Make(std::move(tuple), open);
  }

  ConfigValue ParseList() {
    const Token& open = Tok();
    if (open.has_for) Unsupported(open, "a list comprehension");
    Advance();
    ConfigList list;
    bool first = true;
    while (!IsOp(Tok(), "]")) {
      if (!first) {
        Expect(",", "',' or ']' in a list");
        if (IsOp(Tok(), "]")) break;
      }
      list.items.push_back(ParseTestOrStar());
      first = false;
    }
    Advance();
    return Make(std::move(list), open);
  }

  // A dict literal's key: a str, or an int stored as its text.
  std::string DictKey(const ConfigValue& key, const Token& at, std::unordered_map<std::string, bool>* is_int) {
    std::string text;
    bool integer = false;
    if (const std::string* s = key.AsString()) {
      if (HasMarker(*s)) {
        Fail(at, PlaceholderText(*s) + " as a dict key: mmcv substitutes a base's variable only where it is a value");
      }
      text = *s;
    } else if (const int64_t* i = key.AsInt()) {
      text = std::to_string(*i);
      integer = true;
    } else {
      Fail(at, std::string("a dict key that is ") + ConfigValue::KindName(key.kind()) +
                   " (petrsim reads str and int keys)");
    }
    const auto [it, inserted] = is_int->emplace(text, integer);
    if (!inserted && it->second != integer) {
      Fail(at, "the keys " + text + " and '" + text + "' in one dict (petrsim stores an int key as its text)");
    }
    return text;
  }

  void Splice(const Token& op, ConfigValue from, DictBuilder* into, bool call) {
    ConfigDict* dict = std::get_if<ConfigDict>(&from.value);
    if (dict == nullptr) {
      const std::string* s = from.AsString();
      if (s != nullptr && HasMarker(*s)) {
        Fail(op, "**" + PlaceholderText(*s) +
                     ": mmcv substitutes a base's variable only as a whole value (here it would still be its "
                     "placeholder string)");
      }
      Fail(op, std::string("'**' needs a dict, found ") + ConfigValue::KindName(from.kind()));
    }
    for (auto& [key, value] : dict->entries) {
      if (call && into->Get(key) != nullptr) {
        Fail(op, "dict() got multiple values for keyword argument '" + key + "' (Python raises TypeError)");
      }
      into->Set(key, std::move(value));
    }
  }

  ConfigValue ParseBrace() {
    const Token& open = Tok();
    if (open.has_for) {
      // {k: v for ...} or {x for ...}: a ':' on the brace's own level before the `for` tells them apart.
      int depth = 0;
      for (size_t i = pos_ + 1; i < toks_.size(); ++i) {
        const Token& t = toks_[i];
        if (t.kind == Token::Kind::kOp && (t.text == "(" || t.text == "[" || t.text == "{")) ++depth;
        if (t.kind == Token::Kind::kOp && (t.text == ")" || t.text == "]" || t.text == "}")) --depth;
        if (depth == 0 && IsOp(t, ":")) Unsupported(open, "a dict comprehension");
        if (depth < 0 || (depth == 0 && (IsName(t, "for") || IsName(t, "async")))) break;
      }
      Unsupported(open, "a set comprehension");
    }
    Advance();
    DictBuilder dict;
    std::unordered_map<std::string, bool> is_int;
    bool first = true;
    while (!IsOp(Tok(), "}")) {
      if (!first) {
        Expect(",", "',' or '}' in a dict");
        if (IsOp(Tok(), "}")) break;
      }
      if (IsOp(Tok(), "**")) {
        const Token& op = Tok();
        Advance();
        Splice(op, ParseTest(), &dict, false);
        first = false;
        continue;
      }
      const Token& key_token = Tok();
      const ConfigValue key = ParseTestOrStar();
      if (!IsOp(Tok(), ":")) {
        if (first && (IsOp(Tok(), ",") || IsOp(Tok(), "}"))) Unsupported(open, "a set literal ('{a, b}')");
        FailExpected(Tok(), "':' after a dict key");
      }
      Advance();
      ConfigValue value = ParseTest();
      dict.Set(DictKey(key, key_token, &is_int), std::move(value));
      first = false;
    }
    Advance();
    return Make(dict.Take(), open);
  }

  ConfigValue ParseDictCall() {
    const Token& name = Tok();
    Advance();  // dict
    if (Tok().has_for) Unsupported(Tok(), "a generator expression");
    Advance();  // (
    DictBuilder dict;
    std::unordered_set<std::string> keywords;
    while (!IsOp(Tok(), ")")) {
      const Token& t = Tok();
      if (IsOp(t, "**")) {
        Advance();
        Splice(t, ParseTest(), &dict, true);
      } else if (IsOp(t, "*")) {
        Unsupported(t, "a star expression ('*')");
      } else if (t.kind == Token::Kind::kName && IsOp(Peek(1), "=")) {
        if (IsKeyword(t.text)) Fail(t, "the keyword '" + t.text + "' cannot be an argument name");
        if (!keywords.insert(t.text).second) {
          Fail(t, "keyword argument repeated: '" + t.text + "' (a Python SyntaxError)");
        }
        Advance();
        Advance();
        ConfigValue value = ParseTest();
        if (dict.Get(t.text) != nullptr) {
          Fail(t, "dict() got multiple values for keyword argument '" + t.text + "' (Python raises TypeError)");
        }
        dict.Set(t.text, std::move(value));
      } else {
        Unsupported(t, "a positional argument to dict()", "; write dict(key=value, ..., **other_dict)");
      }
      if (IsOp(Tok(), ")")) break;
      Expect(",", "',' or ')' in the arguments of dict()");
    }
    Advance();
    return Make(dict.Take(), name);
  }

  // range(stop) / range(start, stop[, step]) in a log's Config block: the list of its ints.
  ConfigValue ParseRangeCall() {
    const Token& name = Tok();
    Advance();  // range
    Advance();  // (
    std::vector<int64_t> args;
    while (!IsOp(Tok(), ")")) {
      const Token& t = Tok();
      if (args.size() == 3) Fail(t, "range() takes at most 3 arguments");
      const ConfigValue v = ParseTest();
      if (const int64_t* i = v.AsInt()) {
        args.push_back(*i);
      } else if (const bool* b = v.AsBool()) {
        args.push_back(*b ? 1 : 0);
      } else {
        Fail(t, std::string("range() needs ints, found ") + ConfigValue::KindName(v.kind()));
      }
      if (IsOp(Tok(), ")")) break;
      Expect(",", "',' or ')' in the arguments of range()");
    }
    Advance();
    if (args.empty()) Fail(name, "range() needs at least 1 argument");
    const int64_t start = args.size() == 1 ? 0 : args[0];
    const int64_t stop = args.size() == 1 ? args[0] : args[1];
    const int64_t step = args.size() == 3 ? args[2] : 1;
    if (step == 0) Fail(name, "range() arg 3 must not be zero");
    __int128 count = 0;
    if (step > 0 && stop > start) count = (static_cast<__int128>(stop) - start + step - 1) / step;
    if (step < 0 && stop < start) count = (static_cast<__int128>(start) - stop - step - 1) / -step;
    if (count > kMaxRangeLength) {
      Fail(name, "range() of more than " + std::to_string(kMaxRangeLength) + " ints (petrsim's limit)");
    }
    ConfigList list;
    for (__int128 i = 0; i < count; ++i) {
      list.items.push_back(Make(static_cast<int64_t>(start + i * step), name));
    }
    return Make(std::move(list), name);
  }

  // ---- arithmetic, with Python's semantics
  [[noreturn]] void ZeroDivision(const Token& op, const char* what) const {
    Fail(op, std::string(what) + " (Python raises ZeroDivisionError)");
  }
  [[noreturn]] void Overflow(const Token& op) const {
    Fail(op, "integer overflow in '" + op.text + "' (petrsim reads 64-bit integers; Python's grow)");
  }
  [[noreturn]] void TypeError(const Token& op, const ConfigValue& a, const ConfigValue& b) const {
    Fail(op, "unsupported operand types for '" + op.text + "': '" + PyType(a) + "' and '" + PyType(b) +
                 "' (Python raises TypeError)");
  }

  static bool IsNumeric(const ConfigValue& v) {
    return v.kind() == ConfigValue::Kind::kBool || v.kind() == ConfigValue::Kind::kInt ||
           v.kind() == ConfigValue::Kind::kFloat;
  }
  static bool IsIntLike(const ConfigValue& v) {
    return v.kind() == ConfigValue::Kind::kBool || v.kind() == ConfigValue::Kind::kInt;
  }
  static int64_t IntOf(const ConfigValue& v) {
    if (const bool* b = v.AsBool()) return *b ? 1 : 0;
    return *v.AsInt();
  }
  static double FloatOf(const ConfigValue& v) {
    if (const double* d = v.AsFloat()) return *d;
    return static_cast<double>(IntOf(v));
  }

  void CheckPlaceholderOperand(const Token& op, const ConfigValue& v) const {
    const std::string* s = v.AsString();
    if (s != nullptr && HasMarker(*s)) {
      Fail(op, PlaceholderText(*s) + " is an operand of '" + op.text +
                   "': mmcv substitutes a base's variable only as a whole value (here it would still be its "
                   "placeholder string)");
    }
  }

  ConfigValue Unary(const Token& op, ConfigValue v, const Token& start) {
    CheckPlaceholderOperand(op, v);
    if (!IsNumeric(v)) {
      Fail(op, "bad operand type for unary " + op.text + ": '" + PyType(v) + "' (Python raises TypeError)");
    }
    budget_->Charge(1, 0, At(op));
    ConfigValue out;
    out.where = Where(start);
    if (const double* d = v.AsFloat()) {
      out.value = op.text == "-" ? -*d : *d;
    } else {
      const int64_t i = IntOf(v);
      if (op.text == "-" && i == std::numeric_limits<int64_t>::min()) Overflow(op);
      out.value = op.text == "-" ? -i : i;
    }
    return out;
  }

  ConfigValue Binary(const Token& op, ConfigValue a, ConfigValue b, const Token& start) {
    CheckPlaceholderOperand(op, a);
    CheckPlaceholderOperand(op, b);
    const std::string& o = op.text;
    ConfigValue out;
    out.where = Where(start);
    if (IsNumeric(a) && IsNumeric(b)) {
      if (IsIntLike(a) && IsIntLike(b) && o == "**") {
        IntPower(op, IntOf(a), IntOf(b), &out);
      } else if (IsIntLike(a) && IsIntLike(b) && o != "/") {
        out.value = IntOp(op, IntOf(a), IntOf(b));
      } else {
        out.value = FloatOp(op, FloatOf(a), FloatOf(b));
      }
      budget_->Charge(1, 0, At(op));
      return out;
    }
    if (o == "+") {
      if (a.kind() == b.kind() && a.kind() == ConfigValue::Kind::kString) {
        std::string& s = std::get<std::string>(a.value);
        budget_->Charge(1, s.size() + b.AsString()->size(), At(op));
        s += *b.AsString();
        out.value = std::move(s);
        return out;
      }
      if (a.kind() == b.kind() && (a.kind() == ConfigValue::Kind::kList || a.kind() == ConfigValue::Kind::kTuple)) {
        auto& left = a.kind() == ConfigValue::Kind::kList ? std::get<ConfigList>(a.value).items
                                                          : std::get<ConfigTuple>(a.value).items;
        auto& right = b.kind() == ConfigValue::Kind::kList ? std::get<ConfigList>(b.value).items
                                                           : std::get<ConfigTuple>(b.value).items;
        for (ConfigValue& item : right) left.push_back(std::move(item));
        out.value = std::move(a.value);
        budget_->Charge(1, 0, At(op));
        return out;
      }
      TypeError(op, a, b);
    }
    if (o == "*") {
      const bool a_seq = a.kind() == ConfigValue::Kind::kString || a.AsSequence() != nullptr;
      const bool b_seq = b.kind() == ConfigValue::Kind::kString || b.AsSequence() != nullptr;
      if (a_seq && IsIntLike(b)) return Repeat(op, std::move(a), IntOf(b), out.where);
      if (b_seq && IsIntLike(a)) return Repeat(op, std::move(b), IntOf(a), out.where);
      TypeError(op, a, b);
    }
    if (o == "%" && a.kind() == ConfigValue::Kind::kString) Unsupported(op, "string formatting with '%'");
    TypeError(op, a, b);
  }

  ConfigValue Repeat(const Token& op, ConfigValue seq, int64_t times, const std::string& where) {
    if (times < 0) times = 0;
    size_t nodes = 0;
    size_t bytes = 0;
    Measure(seq, &nodes, &bytes);
    const size_t each_nodes = nodes - 1;  // the container itself is not repeated
    const size_t each_bytes = bytes;
    const auto n = static_cast<uint64_t>(times);
    // Checked before multiplying (n can be near 2**63); Charge reports the limit.
    if (each_nodes > 0 && n > budget_->nodes_left() / each_nodes) budget_->Charge(kMaxNodes + 1, 0, At(op));
    if (each_bytes > 0 && n > budget_->bytes_left() / each_bytes) budget_->Charge(0, kMaxStringBytes + 1, At(op));
    budget_->Charge(each_nodes * n, each_bytes * n, At(op));
    ConfigValue out;
    out.where = where;
    if (std::string* s = std::get_if<std::string>(&seq.value)) {
      std::string text;
      text.reserve(s->size() * n);
      for (uint64_t i = 0; i < n; ++i) text += *s;
      out.value = std::move(text);
      return out;
    }
    auto& items = seq.kind() == ConfigValue::Kind::kList ? std::get<ConfigList>(seq.value).items
                                                         : std::get<ConfigTuple>(seq.value).items;
    std::vector<ConfigValue> repeated;
    repeated.reserve(items.size() * n);
    for (uint64_t i = 0; i < n; ++i) repeated.insert(repeated.end(), items.begin(), items.end());
    items = std::move(repeated);
    out.value = std::move(seq.value);
    return out;
  }

  int64_t IntOp(const Token& op, int64_t x, int64_t y) const {
    const std::string& o = op.text;
    int64_t r = 0;
    if (o == "+") {
      if (__builtin_add_overflow(x, y, &r)) Overflow(op);
      return r;
    }
    if (o == "-") {
      if (__builtin_sub_overflow(x, y, &r)) Overflow(op);
      return r;
    }
    if (o == "*") {
      if (__builtin_mul_overflow(x, y, &r)) Overflow(op);
      return r;
    }
    if (o == "//") {
      if (y == 0) ZeroDivision(op, "integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) Overflow(op);
      int64_t q = x / y;
      if (x % y != 0 && ((x < 0) != (y < 0))) --q;
      return q;
    }
    if (o == "%") {
      if (y == 0) ZeroDivision(op, "integer division or modulo by zero");
      if (y == -1) return 0;
      r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
    Fail(op, "internal: no integer operator '" + o + "'");
  }

  // int ** int: an int for a non-negative exponent, else a float (Python).
  void IntPower(const Token& op, int64_t x, int64_t y, ConfigValue* out) const {
    if (y < 0) {
      if (x == 0) ZeroDivision(op, "0.0 cannot be raised to a negative power");
      out->value = std::pow(static_cast<double>(x), static_cast<double>(y));
      return;
    }
    int64_t result = 1;
    int64_t base = x;
    int64_t e = y;
    while (e > 0) {
      if (e & 1) {
        if (__builtin_mul_overflow(result, base, &result)) Overflow(op);
      }
      e >>= 1;
      if (e > 0 && __builtin_mul_overflow(base, base, &base)) Overflow(op);
    }
    out->value = result;
  }

  double FloatOp(const Token& op, double x, double y) const {
    const std::string& o = op.text;
    if (o == "+") return x + y;
    if (o == "-") return x - y;
    if (o == "*") return x * y;
    if (o == "/") {
      if (y == 0) ZeroDivision(op, "division by zero");
      return x / y;
    }
    if (o == "//" || o == "%") {
      if (y == 0) ZeroDivision(op, o == "%" ? "float modulo" : "float floor division by zero");
      // CPython's float_divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      if (o == "%") return mod;
      double floordiv = 0;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return floordiv;
    }
    if (o == "**") {
      if (y == 0) return 1.0;
      if (x == 1.0) return 1.0;
      if (std::isnan(x) || std::isnan(y)) return std::nan("");
      if (x == 0 && y < 0) ZeroDivision(op, "0.0 cannot be raised to a negative power");
      if (x < 0 && std::isfinite(x) && std::isfinite(y) && y != std::floor(y)) {
        Fail(op, "a negative number to a fractional power: Python's result is a complex number");
      }
      const double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        Fail(op, "float overflow in '**' (Python raises OverflowError)");
      }
      return r;
    }
    Fail(op, "internal: no float operator '" + o + "'");
  }

  std::vector<Token> toks_;
  std::vector<std::string> strings_;
  size_t pos_ = 0;
  std::string path_;
  Mode mode_;
  Budget* budget_;
  int depth_ = 0;
  DictBuilder names_;
  std::string base_where_;
};

FileValues EvaluatePython(std::string_view text, const std::string& path, Mode mode, int first_line, Budget* budget) {
  CheckText(text, path, first_line);
  Lexed lexed = Lexer(text, path, first_line, mode == Mode::kFile).Run();
  return Evaluator(std::move(lexed), path, mode, budget).Run();
}

// ---------------------------------------------------------------------------------------------
// JSON (what cfg.dump('x.json') writes: json.dump of the dict; `_base_` works there too in mmcv).

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
    DictBuilder dict;
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

FileValues EvaluateJson(std::string_view original, const std::string& path, Budget* budget) {
  CheckText(original, path, 1);
  // mmcv's _pre_substitute_base_vars works on the text: a bare {{_base_.x}} becomes a string. The
  // newlines it spanned are kept after it, so that lines stay where they were.
  std::string text;
  size_t p = 0;
  while (p < original.size()) {
    const size_t at = original.find("{{", p);
    if (at == std::string_view::npos) break;
    size_t end = 0;
    std::string variable;
    if (MatchBraces(original, at, true, &end, &variable)) {
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

// ---------------------------------------------------------------------------------------------
// mmcv's _file2dict over the files.

struct ReadContext {
  Budget budget;
  std::vector<std::string> stack_canonical;  // the files being read, outermost first
  std::vector<std::string> stack_display;
  std::vector<std::string> files;
};

std::string Canonical(const std::string& path) {
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, error);
  if (error) return std::filesystem::absolute(path).lexically_normal().string();
  return canonical.string();
}

// Where a value was written, for messages about it: "FILE:LINE".
const std::string& WhereOf(const ConfigValue& v, const std::string& fallback) {
  return v.where.empty() ? fallback : v.where;
}

// Walks the child's values: a whole placeholder string becomes a copy of the bases' value at its
// path (mmcv's _substitute_base_vars); a placeholder anywhere else is an error. `base` is null
// for a file without _base_ (mmcv leaves its random placeholder string in the config).
void SubstituteBaseVars(ConfigValue* v, const ConfigValue* base, const std::string& file, Budget* budget) {
  if (std::string* s = std::get_if<std::string>(&v->value)) {
    if (!HasMarker(*s)) return;
    const std::string& where = WhereOf(*v, file);
    const std::optional<std::string> variable = PlaceholderVariable(*s);
    if (!variable) {
      throw ScenarioError(where + ": " + PlaceholderText(*s) +
                          " inside a string: mmcv substitutes a base's variable only as a whole value");
    }
    if (base == nullptr) {
      throw ScenarioError(where + ": {{_base_." + *variable +
                          "}} in a config without _base_ (mmcv leaves its placeholder string there)");
    }
    const ConfigValue* found = base;
    std::string walked;
    size_t from = 0;
    while (true) {
      const size_t dot = variable->find('.', from);
      const std::string step = variable->substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      const ConfigDict* dict = found->AsDict();
      if (dict == nullptr) {
        throw ScenarioError(where + ": {{_base_." + *variable + "}}: '" + walked + "' in the bases is " +
                            ConfigValue::KindName(found->kind()) + ", not a dict (mmcv fails here)");
      }
      found = dict->Get(step);
      if (found == nullptr) {
        throw ScenarioError(where + ": {{_base_." + *variable + "}}: the bases define no '" + step + "'" +
                            (walked.empty() ? std::string() : " in '" + walked + "'") + " (mmcv raises KeyError)");
      }
      walked += (walked.empty() ? "" : ".") + step;
      if (dot == std::string::npos) break;
      from = dot + 1;
    }
    size_t nodes = 0;
    size_t bytes = 0;
    Measure(*found, &nodes, &bytes);
    budget->Charge(nodes, bytes, where);
    *v = *found;
    return;
  }
  if (auto* list = std::get_if<ConfigList>(&v->value)) {
    for (ConfigValue& item : list->items) SubstituteBaseVars(&item, base, file, budget);
  } else if (auto* tuple = std::get_if<ConfigTuple>(&v->value)) {
    for (ConfigValue& item : tuple->items) SubstituteBaseVars(&item, base, file, budget);
  } else if (auto* dict = std::get_if<ConfigDict>(&v->value)) {
    for (auto& entry : dict->entries) SubstituteBaseVars(&entry.value, base, file, budget);
  }
}

// mmcv's Config._merge_a_into_b(a, b, allow_list_keys=False): `a` (the child) into `b`.
ConfigDict MergeAIntoB(ConfigDict a, ConfigDict b_dict) {
  DictBuilder b(std::move(b_dict));
  for (auto& [key, v] : a.entries) {
    ConfigDict* child = std::get_if<ConfigDict>(&v.value);
    ConfigValue* existing = b.Get(key);
    if (child != nullptr && existing != nullptr) {
      // `k in b and not v.pop(DELETE_KEY, False)`: popped only when the base has the key.
      bool replace = false;
      if (const ConfigValue* flag = child->Get("_delete_")) {
        replace = flag->Truthy();
        child->Erase("_delete_");
      }
      if (!replace) {
        ConfigDict* base_dict = std::get_if<ConfigDict>(&existing->value);
        if (base_dict == nullptr) {
          throw ScenarioError(v.where + ": '" + key + "' is a dict in the child config but " +
                              ConfigValue::KindName(existing->kind()) + " in its base (" + existing->where +
                              "): mmcv cannot inherit it (TypeError); set _delete_=True in the child's dict to "
                              "replace the base's value");
        }
        ConfigDict merged = MergeAIntoB(std::move(*child), std::move(*base_dict));
        existing->value = std::move(merged);
        existing->where = v.where;
        continue;
      }
    }
    b.Set(key, std::move(v));
  }
  return b.Take();
}

std::string Extension(const std::string& path) { return std::filesystem::path(path).extension().string(); }

void CheckExtension(const std::string& path, const std::string& prefix) {
  const std::string ext = Extension(path);
  if (ext == ".yaml" || ext == ".yml") {
    throw ScenarioError(prefix + path +
                        ": a YAML config: this petrsim build reads .py and .json configs (no C++ YAML library is "
                        "installed); pass the .py, or dump it with cfg.dump('config.json')");
  }
  if (ext != ".py" && ext != ".json") {
    throw ScenarioError(prefix + path +
                        ": not an mmcv config: mmcv reads .py, .json, .yaml and .yml (petrsim .py and " +
                        ".json), found '" + ext + "'");
  }
}

ConfigDict LoadFile(const std::string& path, const std::string* text_given, ReadContext* context, int depth) {
  CheckExtension(path, "");
  context->files.push_back(path);
  const std::string content =
      text_given != nullptr ? *text_given : ReadRegularFile(path, "mmcv config file", kMaxConfigBytes);
  const std::string text = SubstitutePredefined(content, path);
  FileValues file = Extension(path) == ".py" ? EvaluatePython(text, path, Mode::kFile, 1, &context->budget)
                                             : EvaluateJson(text, path, &context->budget);
  file.dict.Erase("_deprecation_");  // mmcv pops it (and warns)

  ConfigValue child{std::move(file.dict), path};
  if (!file.has_base) {
    SubstituteBaseVars(&child, nullptr, path, &context->budget);
    return std::move(std::get<ConfigDict>(child.value));
  }

  // The paths of _base_: a string or a list of strings (mmcv wraps a non-list in a list).
  const std::string& base_where = file.base_where;
  std::vector<const ConfigValue*> paths;
  if (file.base.AsString() != nullptr) {
    paths.push_back(&file.base);
  } else if (file.base.kind() == ConfigValue::Kind::kList) {
    for (const ConfigValue& item : *file.base.AsSequence()) {
      if (item.AsString() == nullptr) {
        throw ScenarioError(base_where + ": _base_ must be a string or a list of strings, found a list holding " +
                            ConfigValue::KindName(item.kind()) + " (" + WhereOf(item, path) + ")");
      }
      paths.push_back(&item);
    }
  } else {
    throw ScenarioError(base_where + ": _base_ must be a string or a list of strings, found " +
                        ConfigValue::KindName(file.base.kind()));
  }

  std::vector<ConfigDict> bases;
  std::vector<std::string> base_paths;
  for (const ConfigValue* item : paths) {
    const std::string& relative = *item->AsString();
    const std::string& where = WhereOf(*item, base_where);
    if (HasMarker(relative)) throw ScenarioError(where + ": " + PlaceholderText(relative) + " in _base_ itself");
    const std::string joined =
        (std::filesystem::path(path).parent_path() / std::filesystem::path(relative)).lexically_normal().string();
    const std::string site = where + ": _base_ '" + relative + "'";
    CheckExtension(joined, site + ": ");
    struct stat info {};
    if (::stat(joined.c_str(), &info) != 0) throw ScenarioError(site + ": " + joined + " does not exist");
    if (!S_ISREG(info.st_mode)) {
      throw ScenarioError(site + ": " + joined + " is " + FileKindName(info.st_mode) + ", not a config file");
    }
    const std::string canonical = Canonical(joined);
    const auto on_stack = std::find(context->stack_canonical.begin(), context->stack_canonical.end(), canonical);
    if (on_stack != context->stack_canonical.end()) {
      std::string chain;
      for (auto it = on_stack; it != context->stack_canonical.end(); ++it) {
        chain += context->stack_display[static_cast<size_t>(it - context->stack_canonical.begin())] + " -> ";
      }
      throw ScenarioError(site + ": _base_ cycle: " + chain + joined +
                          " (mmcv recurses until Python's recursion limit)");
    }
    if (depth + 1 > kMaxBaseDepth) {
      throw ScenarioError(site + ": _base_ chain deeper than " + std::to_string(kMaxBaseDepth) +
                          " files (petrsim's limit)");
    }
    if (context->files.size() >= kMaxFiles) {
      throw ScenarioError(site + ": more than " + std::to_string(kMaxFiles) +
                          " files read for one config (petrsim's limit)");
    }
    context->stack_canonical.push_back(canonical);
    context->stack_display.push_back(joined);
    bases.push_back(LoadFile(joined, nullptr, context, depth + 1));
    base_paths.push_back(joined);
    context->stack_canonical.pop_back();
    context->stack_display.pop_back();
  }

  // The bases side by side: a key in two of them is mmcv's KeyError.
  DictBuilder merged;
  for (size_t i = 0; i < bases.size(); ++i) {
    std::string duplicates;
    for (const auto& [key, value] : bases[i].entries) {
      if (const ConfigValue* earlier = merged.Get(key)) {
        duplicates += std::string(duplicates.empty() ? "" : ", ") + "'" + key + "' (" + WhereOf(*earlier, "?") +
                      " and " + WhereOf(value, base_paths[i]) + ")";
      }
    }
    if (!duplicates.empty()) {
      throw ScenarioError(base_where +
                          ": Duplicate key is not allowed among bases (mmcv raises KeyError): " + duplicates);
    }
    for (auto& entry : bases[i].entries) merged.Set(std::move(entry.key), std::move(entry.value));
  }
  ConfigValue base{merged.Take(), path};

  SubstituteBaseVars(&child, &base, path, &context->budget);
  for (const auto& [key, value] : std::get<ConfigDict>(child.value).entries) {
    if (Depth(value) > kMaxValueDepth) {
      throw ScenarioError(WhereOf(value, path) + ": a value nested deeper than " + std::to_string(kMaxValueDepth) +
                          " levels (petrsim's limit)");
    }
  }
  return MergeAIntoB(std::move(std::get<ConfigDict>(child.value)), std::move(std::get<ConfigDict>(base.value)));
}

void CheckReservedKeys(const ConfigDict& dict, const std::string& path) {
  for (const char* reserved : {"filename", "text", "pretty_text"}) {
    if (const ConfigValue* v = dict.Get(reserved)) {
      throw ScenarioError(WhereOf(*v, path) + ": '" + reserved +
                          "' is reserved for config file (mmcv raises KeyError; rename it)");
    }
  }
}

Config ReadConfig(const std::string& path, const std::string* text) {
  ReadContext context;
  context.stack_canonical.push_back(Canonical(path));
  context.stack_display.push_back(path);
  Config config;
  config.path = path;
  ConfigDict dict = LoadFile(path, text, &context, 0);
  CheckReservedKeys(dict, path);
  config.root.value = std::move(dict);
  config.root.where = path;
  config.files = std::move(context.files);
  return config;
}

bool StartsWithLoggerTimestamp(std::string_view line) {
  // "2022-11-08 10:02:13,000 - "
  static const char kShape[] = "dddd-dd-dd dd:dd:dd,ddd - ";
  const size_t n = sizeof(kShape) - 1;
  if (line.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(line[i])) != 0;
    if (kShape[i] == 'd' ? !digit : line[i] != kShape[i]) return false;
  }
  return true;
}

}  // namespace

Config ReadMmcvConfig(const std::string& path) { return ReadConfig(path, nullptr); }

Config ReadMmcvConfigText(std::string_view text, const std::string& path) {
  const std::string copy(text);
  return ReadConfig(path, &copy);
}

Config ReadConfigBlockOfLogText(std::string_view text, const std::string& log_path) {
  // The lines, with their numbers; the block is between the `Config:` record and the next record.
  size_t p = 0;
  int line = 0;
  size_t block_begin = std::string_view::npos;
  int block_line = 0;
  size_t block_end = text.size();
  while (p < text.size()) {
    ++line;
    size_t end = text.find('\n', p);
    if (end == std::string_view::npos) end = text.size();
    std::string_view content = text.substr(p, end - p);
    const size_t next = end < text.size() ? end + 1 : end;
    if (block_begin == std::string_view::npos) {
      while (!content.empty() && (content.back() == '\r' || content.back() == ' ' || content.back() == '\t')) {
        content.remove_suffix(1);
      }
      constexpr std::string_view kConfigRecord = " - Config:";
      if (StartsWithLoggerTimestamp(content) && content.size() >= kConfigRecord.size() &&
          content.substr(content.size() - kConfigRecord.size()) == kConfigRecord) {
        block_begin = next;
        block_line = line + 1;
      }
    } else if (StartsWithLoggerTimestamp(content)) {
      block_end = p;
      break;
    }
    p = next;
  }
  if (block_begin == std::string_view::npos) {
    throw ScenarioError(log_path +
                        ": no Config block: petrsim looks for the record mmdet's train.py logs before the config, a "
                        "line like '2022-11-08 10:02:13,000 - mmdet - INFO - Config:'");
  }
  const std::string_view block = text.substr(block_begin, block_end - block_begin);
  Budget budget;
  FileValues file = EvaluatePython(block, log_path, Mode::kLogBlock, block_line, &budget);
  CheckReservedKeys(file.dict, log_path);
  Config config;
  config.path = log_path;
  config.files = {log_path};
  config.root.value = std::move(file.dict);
  config.root.where = log_path;
  return config;
}

Config ReadConfigBlockOfLog(const std::string& log_path) {
  const std::string text = ReadRegularFile(log_path, "training log", kMaxConfigLogBytes);
  return ReadConfigBlockOfLogText(text, log_path);
}

}  // namespace petrsim
