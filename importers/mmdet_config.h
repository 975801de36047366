// Reading an mmcv 1.x / mmdet3d training config WITHOUT running it: a config is Python code, and a
// user may run petrsim on one they were sent. The reader never executes, imports or calls
// anything; it understands the small part of Python that configs are written in and refuses the
// rest with the file, the line and the construct.
//
// Data flow (ReadMmcvConfig), as mmcv 1.x's Config.fromfile (mmcv/utils/config.py, Config._file2dict,
// read on the 1.x branch, unchanged since v1.6/1.7):
//   1. the file: .py or .json (mmcv also takes .yaml/.yml; this build has no C++ YAML library, so a
//      YAML config is an error that says to dump it as .json or pass the .py); at most 16 MiB of
//      UTF-8 text;
//   2. the predefined variables `{{ fileDirname }}`, `{{ fileBasename }}`,
//      `{{ fileBasenameNoExtension }}`, `{{ fileExtname }}` are replaced in the text, everywhere,
//      by the absolute file's parts, as mmcv's _substitute_predefined_vars does;
//   3. the text is evaluated: each module-level assignment in order, in the file's own namespace
//      only (mmcv runs every file on its own: a child cannot name a base's variable; it writes
//      `{{_base_.a.b}}`, a placeholder for the whole value, which mmcv's _pre_substitute_base_vars
//      and _substitute_base_vars replace by the merged bases' value at a.b);
//   4. the file's dict: every assigned name not starting with "__" (.py), in first-assignment
//      order; `_deprecation_` dropped; `_base_` taken out;
//   5. `_base_` (a path or a list of paths, relative to the file's directory; bases may have bases):
//      each base is read the same way; a key set by two bases is an error (mmcv: "Duplicate key is
//      not allowed among bases"); the placeholders are substituted; then the file's dict is merged
//      into the bases' as mmcv's _merge_a_into_b(allow_list_keys=False) merges: a child's dict
//      value merges key by key into the base's dict, recursively; `_delete_=True` (any true value)
//      in a child's dict replaces the base's value instead (mmcv pops `_delete_` only where the
//      base has that key, so elsewhere it stays in the result, as in mmcv); a child's dict over a
//      base's non-dict is an error unless `_delete_` is set; every other value (lists included)
//      replaces the base's; keys keep the base's order, new keys come after;
//   6. `filename`, `text`, `pretty_text` as top-level keys are errors (mmcv's RESERVED_KEYS).
// Not done: `custom_imports` is a plain value (mmcv imports those modules); `--cfg-options`
// (merge_from_dict with allow_list_keys) is not read.
//
// The Python that is read (anything else is an error, below):
// - statements: `name = expr` and `a = b = expr`, separated by newlines or `;`; comments; blank
//   lines; string statements (docstrings, ignored); continuation inside brackets and with `\`;
// - literals: None, True, False; ints (1_000, 0x1F, 0o17, 0b101; 64-bit); floats (1e-4, .5, 2.);
//   strings ('', "", triple-quoted, r/u prefixes, escapes, adjacent literals concatenated);
//   lists, tuples, dicts `{k: v}` with str or int keys (an int key is stored as its decimal text),
//   `{**d}`; `dict(k=v, ..., **d)`, the one call allowed;
// - operators with Python's semantics: unary + -, + - * / // % ** (int / int is a float, // and %
//   floor toward -inf, int ** negative int is a float; ints are 64-bit here and overflow is an
//   error, Python's would grow; int / int is exact for magnitudes up to 2**53), str + str,
//   list + list, tuple + tuple, str/list/tuple * int; bools count as ints;
// - names assigned earlier in the same file (a copy of the value).
// In the `Config:` block of a training log (ReadConfigBlockOfLog) the same, plus `range(a, b[, s])`
// (mmdet's train.py sets `cfg.gpu_ids = range(world_size)`, printed as `gpu_ids = range(0, 8)`),
// read as the list of its ints, and `inf`/`nan` (how Python prints such floats); there is no
// `_base_` and no `{{...}}` there (mmcv prints the merged config).
//
// Errors are ScenarioError, each starting with "FILE:LINE:COL: " (or "FILE:LINE: " for a value's
// place, "FILE: " for the whole file):
// - an unsupported construct: "<construct> is not supported in a config petrsim reads without
//   running it (only assignments of literals, dict(), lists, tuples and arithmetic over earlier
//   names)", the construct named: "an import", "a from-import", "a call of 'range'", "a call of
//   'np.array'", "a call of method 'format'", "a list comprehension", "a dict comprehension", "a set
//   comprehension", "a generator expression", "a lambda", "an f-string", "a bytes literal",
//   "attribute access ('a.b')", "a subscript ('x[...]')", "an if statement", "a for loop", "a
//   while loop", "a function definition (def)", "a class definition", "a with statement", "a try
//   statement", "a del statement", "an assert statement", "a raise statement", "a return
//   statement", "a global declaration", "a pass statement", "a decorator", "an augmented
//   assignment ('+=')", "an annotated assignment", "a tuple-unpacking assignment", "an assignment
//   to an attribute ('a.b = ...')", "an assignment to a subscript ('x[...] = ...')", "an assignment
//   expression (':=')", "a conditional expression ('... if ... else ...')", "a comparison ('==')",
//   "a boolean operator ('and')", "a bitwise operator ('|')", "a star expression ('*')", "a set
//   literal", "an Ellipsis ('...')", "a complex number", "string formatting with '%'", "a
//   positional argument to dict()", "a reference to the builtin 'len'", "an expression statement";
// - syntax: "expected X, found Y" (Y: "the name 'x'", "the number 3", "a string", "')'", "the end
//   of the line"), "unterminated string literal", "unterminated triple-quoted string literal (it
//   starts here)", "unbalanced bracket: ...", "unexpected indentation", "unexpected character",
//   "invalid number literal", "leading zeros ...", "a NUL byte ... (a binary file?)", "not UTF-8
//   text ... (a binary file?)", "brackets nested deeper than 200", "expression nested deeper than
//   200 levels";
// - evaluation: "name 'x' is not defined (...)", "unsupported operand types for '+': 'str' and
//   'int'", "division by zero", "integer overflow", "a value nested deeper than 256 levels",
//   "more than 1000000 values", "more than 2000000 tokens";
// - `_base_`: "_base_ must be a string or a list of strings, found ...", "_base_ 'x.py': ... does
//   not exist", "_base_ cycle: a.py -> b.py -> a.py", "_base_ chain deeper than 32 files",
//   "Duplicate key is not allowed among bases: 'k' (a.py:3 and b.py:5)", "{{_base_.a.b}}: the bases
//   define no 'b' in 'a'", "{{_base_.x}} is an operand of '+' ...", "{{_base_.x}} in a config
//   without _base_", "'k' is a dict in the child config but a list in its base (...): ... set
//   _delete_=True", "'filename' is reserved for config file";
// - JSON: "FILE:LINE:COL: not valid JSON: ...", "a JSON config must be an object".
// Limits: 16 MiB per config file (256 MiB for a log), 2,000,000 tokens per file, 200 nested
// brackets, values 256 deep, 1,000,000 values and 64 MiB of strings per read, `_base_` chains 32
// deep, 256 files per read. (Real configs have a few thousand values; an adversarial 16 MiB file
// costs at most a few hundred MB while it is refused.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
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

struct ConfigValue {
  // The order of `value`'s alternatives.
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict };

  std::variant<std::monostate, bool, int64_t, double, std::string, ConfigList, ConfigTuple, ConfigDict> value;
  // Where the value was written, "FILE:LINE": a literal's own line; a value read through a name is
  // the named value (its line); a result of an operator or of dict(...) is where that expression
  // starts; a merged dict is the child's. The root of a Config: the file's path.
  std::string where;

  Kind kind() const { return static_cast<Kind>(value.index()); }
  bool is_none() const { return kind() == Kind::kNone; }
  const bool* AsBool() const { return std::get_if<bool>(&value); }
  const int64_t* AsInt() const { return std::get_if<int64_t>(&value); }  // not a bool
  const double* AsFloat() const { return std::get_if<double>(&value); }
  std::optional<double> AsNumber() const;  // an int or a float (not a bool)
  const std::string* AsString() const { return std::get_if<std::string>(&value); }
  const std::vector<ConfigValue>* AsSequence() const;  // a list or a tuple
  const ConfigDict* AsDict() const { return std::get_if<ConfigDict>(&value); }
  // Python's truth value (None, False, 0, 0.0, '' and empty containers are false).
  bool Truthy() const;
  // A dotted path below this value: dict keys, and decimal indexes into lists and tuples
  // ("data.train.pipeline.2.type"); nullptr when any step is missing. "" is this value.
  const ConfigValue* Find(std::string_view dotted_path) const;
  // Python's repr: None, True, 3, 0.0001, 1e-05, 'text', [1, 2], (1,), {'a': 1}.
  std::string Repr() const;

  // "None", "a bool", "an int", "a float", "a string", "a list", "a tuple", "a dict".
  static const char* KindName(Kind kind);
};

struct ConfigEntry {
  ConfigEntry(std::string k, ConfigValue v) : key(std::move(k)), value(std::move(v)) {}
  std::string key;
  ConfigValue value;
};

struct Config {
  ConfigValue root;                // a ConfigDict: the merged config, as mmcv's cfg._cfg_dict
  std::string path;                // the file given (a config or a log)
  std::vector<std::string> files;  // every file read: the given one, then its bases depth-first

  const ConfigDict& dict() const { return std::get<ConfigDict>(root.value); }
  const ConfigValue* Find(std::string_view dotted_path) const { return root.Find(dotted_path); }
};

// A .py or .json config and its `_base_` chain.
Config ReadMmcvConfig(const std::string& path);
// The same, for a config's text given in memory; `path` names it in messages and anchors its
// `_base_` paths and predefined variables; its extension picks the language.
Config ReadMmcvConfigText(std::string_view text, const std::string& path);

// The `Config:` block mmdet's tools/train.py logs (`logger.info(f'Config:\n{cfg.pretty_text}')`):
// from the line after the first "<YYYY-MM-DD HH:MM:SS,mmm> - <logger> - <LEVEL> - Config:" to the
// next line that starts with such a timestamp prefix (or the end). Values' `where` and errors
// name the log's own lines.
Config ReadConfigBlockOfLog(const std::string& log_path);
// The largest training log either reads (a log that big is refused with its size).
constexpr uint64_t kMaxConfigLogBytes = uint64_t{256} << 20;
Config ReadConfigBlockOfLogText(std::string_view text, const std::string& log_path);

}  // namespace petrsim
