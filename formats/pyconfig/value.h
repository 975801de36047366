// The values a Python config evaluates to, without running it: None, bool, int, float, str, list,
// tuple, dict, and a value petrsim cannot evaluate (ConfigUnknown: a call of a function petrsim
// does not know, a name from an import, ...), which says where it came from and why.
// Values are plain data with value semantics; nothing here refers to a Python object.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace petrsim {

struct ConfigValue;
struct ConfigEntry;

struct ConfigList {
  std::vector<ConfigValue> items;
};

struct ConfigTuple {
  std::vector<ConfigValue> items;
};

// A dict in insertion order (Python's), keys unique.
struct ConfigDict {
  // ConfigEntry, not std::pair: a vector may hold a type completed later, a pair may not (clang
  // refuses std::pair<std::string, ConfigValue> while ConfigValue is incomplete).
  std::vector<ConfigEntry> entries;

  const ConfigValue* Get(std::string_view key) const;
  ConfigValue* Get(std::string_view key);
  // Replaces the value of an existing key in place (its position kept, as Python's d[k] = v) or
  // appends a new key.
  void Set(std::string key, ConfigValue value);
  bool Erase(std::string_view key);
};

// A value petrsim does not evaluate. `reason` is "FILE:LINE: <construct>", e.g.
// "cfg.py:3: a call of 'np.array'" or "cfg.py:2: a name from an import ('numpy')". Any operation
// with an unknown operand yields the (first) unknown operand, so the reason always names the
// construct the value started from. An unknown is neither true nor false.
struct ConfigUnknown {
  std::string reason;
  // A module (`import x`) or a function (def, lambda): mmcv 1.x leaves such names out of the
  // config's dict (mmcv/utils/config.py on the 1.x branch, lines 212-217); other unknowns (a
  // from-import's name, a class, a call's result) stay in it.
  bool module_or_function = false;
};

struct ConfigValue {
  // The order of `value`'s alternatives; kUnknown was added last, so the others keep their index.
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kUnknown };

  std::variant<std::monostate, bool, int64_t, double, std::string, ConfigList, ConfigTuple, ConfigDict, ConfigUnknown>
      value;
  // Where the value was written, "FILE:LINE": a literal's own line; a value read through a name is
  // the named value (its line); a result of an operator or of a call is where that expression
  // starts; a merged dict is the child's. The root of a Config: the file's path.
  std::string where;

  Kind kind() const { return static_cast<Kind>(value.index()); }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_unknown() const { return kind() == Kind::kUnknown; }
  const bool* AsBool() const { return std::get_if<bool>(&value); }
  const int64_t* AsInt() const { return std::get_if<int64_t>(&value); }  // not a bool
  const double* AsFloat() const { return std::get_if<double>(&value); }
  std::optional<double> AsNumber() const;  // an int or a float (not a bool)
  const std::string* AsString() const { return std::get_if<std::string>(&value); }
  const std::vector<ConfigValue>* AsSequence() const;  // a list or a tuple
  const ConfigDict* AsDict() const { return std::get_if<ConfigDict>(&value); }
  const ConfigUnknown* AsUnknown() const { return std::get_if<ConfigUnknown>(&value); }
  // Python's truth value (None, False, 0, 0.0, '' and empty containers are false); an unknown is
  // false here: ask Truth() where that matters.
  bool Truthy() const;
  // Python's truth value, or nullopt for an unknown.
  std::optional<bool> Truth() const;
  // A dotted path below this value: dict keys, and decimal indexes into lists and tuples
  // ("data.train.pipeline.2.type"); nullptr when any step is missing. "" is this value.
  const ConfigValue* Find(std::string_view dotted_path) const;
  // Python's repr: None, True, 3, 0.0001, 1e-05, 'text', [1, 2], (1,), {'a': 1}; an unknown is
  // <unknown: cfg.py:3: a call of 'np.array'>.
  std::string Repr() const;

  // "None", "a bool", "an int", "a float", "a string", "a list", "a tuple", "a dict", "a value
  // petrsim cannot evaluate".
  static const char* KindName(Kind kind);
};

struct ConfigEntry {
  ConfigEntry(std::string k, ConfigValue v) : key(std::move(k)), value(std::move(v)) {}
  std::string key;
  ConfigValue value;
};

// A ConfigDict being built, with a hash index of its keys (a config may hold many keys): Set is
// Python's d[k] = v (an existing key keeps its place), Erase is del d[k].
class ConfigDictBuilder {
 public:
  ConfigDictBuilder() = default;
  explicit ConfigDictBuilder(ConfigDict dict);
  ConfigValue* Get(const std::string& key);
  void Set(std::string key, ConfigValue value);
  bool Erase(const std::string& key);
  ConfigDict Take();

 private:
  ConfigDict dict_;
  std::unordered_map<std::string, size_t> index_;
};

// The first unknown inside `value` (itself, or depth-first through list/tuple items and dict
// values in order), or nullptr when the value is fully known. With `path`, its dotted path below
// `value` ("train.ann_file", "" for `value` itself), in ConfigValue::Find's form. A user's error
// reads: "data.train.ann_file depends on cfg.py:7: a call of 'os.path.join'".
const ConfigValue* FindUnknown(const ConfigValue& value, std::string* path = nullptr);

// The message for a field the caller needs that is (or holds) an unknown: "FIELD depends on
// REASON" ("data.train.ann_file depends on cfg.py:7: a call of 'os.path.join'"), naming the inner
// path where the unknown is inside the field; "" when the field is fully known.
std::string DescribeUnknown(const ConfigValue& value, std::string_view field);

// Python's repr of a float and of a str (shared by Repr, str() and format()).
std::string PythonFloatRepr(double x);
std::string PythonStringRepr(const std::string& s);

}  // namespace petrsim
