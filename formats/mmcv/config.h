// Reading an mmcv 1.x / mmdet3d training config WITHOUT running it: a config is Python code, and a
// user may run petrsim on one they were sent. The reader never executes, imports or calls
// anything: formats/pyconfig parses the file into an AST and evaluates its module-level config
// statements (formats/pyconfig/evaluator.h says which Python it reads); what it does not evaluate
// becomes a ConfigUnknown value naming "FILE:LINE: <construct>", an error only where a caller
// needs that value (FindUnknown / DescribeUnknown in formats/pyconfig/value.h).
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
// The Python that is read: see formats/pyconfig/evaluator.h. In the `Config:` block of a training
// log (ReadConfigBlockOfLog) the same, except that anything petrsim would not evaluate is an error
// there (mmcv prints only values), plus `inf`/`nan` (how Python prints such floats); `range(a, b)`
// (mmdet's train.py sets `cfg.gpu_ids = range(world_size)`, printed as `gpu_ids = range(0, 8)`) is
// the list of its ints; there is no `_base_` and no `{{...}}` there (mmcv prints the merged config).
// Module names: mmcv 1.x keeps every module-level name not starting with "__" in the config's
// dict except modules and functions (mmcv/utils/config.py on the 1.x branch, Config._file2dict,
// lines 212-217: `not isinstance(value, types.ModuleType) and not isinstance(value,
// types.FunctionType)`). So a name bound by `import x` or `def`/`lambda` is left out; a name from
// `from a import b` (which may be anything), a class and other unknowns stay, as unknown values.
//
// Errors are ScenarioError, each starting with "FILE:LINE:COL: " (or "FILE:LINE: " for a value's
// place, "FILE: " for the whole file):
// - in a log's Config block, a construct that would be unknown: "<construct> is not supported in a
//   config petrsim reads without running it (a Config block holds only values)";
// - what Python itself refuses: "name 'x' is not defined (...)", "... (Python raises TypeError)",
//   "... (Python raises IndexError)", "KeyError: 'k' ...", a yield expression, 'return' outside a
//   function, a `raise` or a failing `assert` reached at module level;
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
#include <string>
#include <string_view>
#include <vector>

#include "formats/pyconfig/value.h"

namespace petrsim {

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
