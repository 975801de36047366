// mmcv 1.x's Config._file2dict over a config and its `_base_` files; see config.h.
#include "formats/mmcv/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "base/assert.h"
#include "base/error.h"
#include "base/file_io.h"
#include "formats/mmcv/config_internal.h"
#include "formats/pyconfig/lexer.h"
#include "formats/pyconfig/limits.h"
#include "formats/pyconfig/parser.h"

namespace petrsim {
namespace mmcv_internal {

FileValues EvaluatePython(std::string_view text, const std::string& path, bool log_block, int first_line,
                          pyconfig::Budget* budget) {
  pyconfig::CheckText(text, path, first_line);
  pyconfig::LexOptions lex;
  lex.path = path;
  lex.first_line = first_line;
  lex.base_refs = !log_block;
  const pyconfig::Module module = pyconfig::Parse(text, lex);
  pyconfig::EvaluateOptions options;
  options.log_block = log_block;
  pyconfig::ModuleValues values = pyconfig::EvaluateModule(module, options, budget);
  FileValues out;
  for (auto& [name, value] : values.names.entries) {
    if (name == "_base_") {
      out.has_base = true;
      out.base = std::move(value);
      out.base_where = values.base_where;
      continue;
    }
    if (name.compare(0, 2, "__") == 0) continue;
    // mmcv/utils/config.py (1.x) lines 212-217: modules and functions are not config values.
    if (const ConfigUnknown* unknown = value.AsUnknown(); unknown != nullptr && unknown->module_or_function) continue;
    out.dict.entries.emplace_back(name, std::move(value));
  }
  return out;
}

void CheckReservedKeys(const ConfigDict& dict, const std::string& path) {
  for (const char* reserved : {"filename", "text", "pretty_text"}) {
    if (const ConfigValue* v = dict.Get(reserved)) {
      throw ScenarioError((v->where.empty() ? path : v->where) + ": '" + reserved +
                          "' is reserved for config file (mmcv raises KeyError; rename it)");
    }
  }
}

}  // namespace mmcv_internal

namespace {

using mmcv_internal::FileValues;
using pyconfig::Budget;
using pyconfig::Depth;
using pyconfig::HasPlaceholder;
using pyconfig::kMaxBaseDepth;
using pyconfig::kMaxConfigBytes;
using pyconfig::kMaxFiles;
using pyconfig::kMaxValueDepth;
using pyconfig::Measure;
using pyconfig::PlaceholderText;

// The variable of a string that is exactly one placeholder, or nullopt.
std::optional<std::string> PlaceholderVariable(const std::string& s) {
  const std::string& marker = pyconfig::PlaceholderMarker();
  if (s.size() <= marker.size() + 2 || s.compare(0, marker.size(), marker) != 0 ||
      s.compare(s.size() - 2, 2, "}}") != 0) {
    return std::nullopt;
  }
  std::string variable = s.substr(marker.size(), s.size() - marker.size() - 2);
  if (HasPlaceholder(variable)) return std::nullopt;
  return variable;
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
    if (pyconfig::MatchBraces(text, at, false, &end, &name)) {
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
    if (!HasPlaceholder(*s)) return;
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
  ConfigDictBuilder b(std::move(b_dict));
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

// The paths of _base_: a string or a list of strings (mmcv wraps a non-list in a list).
std::vector<const ConfigValue*> BasePaths(const FileValues& file, const std::string& path) {
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
  return paths;
}

ConfigDict LoadFile(const std::string& path, const std::string* text_given, ReadContext* context, int depth);

// One _base_ entry `item` of the file `path`, read relative to it (into `joined`) after the
// checks: a config file that exists, no cycle, and within petrsim's limits.
ConfigDict LoadBase(const ConfigValue& item, const std::string& base_where, const std::string& path,
                    ReadContext* context, int depth, std::string* joined_out) {
  const std::string& relative = *item.AsString();
  const std::string& where = WhereOf(item, base_where);
  if (HasPlaceholder(relative)) throw ScenarioError(where + ": " + PlaceholderText(relative) + " in _base_ itself");
  const std::string joined =
      (std::filesystem::path(path).parent_path() / std::filesystem::path(relative)).lexically_normal().string();
  const std::string site = where + ": _base_ '" + relative + "'";
  CheckExtension(joined, site + ": ");
  struct stat info {};
  if (::stat(joined.c_str(), &info) != 0) {
    // Only a missing file "does not exist": a symlink loop, a denied directory say their own cause.
    const int error = errno;
    throw ScenarioError(
        site + ": " + joined +
        (error == ENOENT ? std::string(" does not exist") : ": cannot be read: " + std::string(std::strerror(error))));
  }
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
    throw ScenarioError(site + ": _base_ cycle: " + chain + joined + " (mmcv recurses until Python's recursion limit)");
  }
  if (depth + 1 > kMaxBaseDepth) {
    throw ScenarioError(site + ": _base_ chain deeper than " + std::to_string(kMaxBaseDepth) +
                        " files (petrsim's limit)");
  }
  if (context->files.size() >= kMaxFiles) {
    throw ScenarioError(site + ": more than " + std::to_string(kMaxFiles) +
                        " files read for one config (petrsim's limit)");
  }
  const size_t stack_depth = context->stack_canonical.size();
  context->stack_canonical.push_back(canonical);
  context->stack_display.push_back(joined);
  ConfigDict base = LoadFile(joined, nullptr, context, depth + 1);
  context->stack_canonical.pop_back();
  context->stack_display.pop_back();
  // Each file pops what it pushed: the chain of files being read is the same as before.
  PETRSIM_ASSERT(context->stack_canonical.size() == stack_depth);
  PETRSIM_ASSERT(context->stack_display.size() == stack_depth);
  *joined_out = joined;
  return base;
}

// The bases side by side: a key in two of them is mmcv's KeyError.
ConfigDict MergeBases(std::vector<ConfigDict>& bases, const std::vector<std::string>& base_paths,
                      const std::string& base_where) {
  PETRSIM_ASSERT(bases.size() == base_paths.size());
  ConfigDictBuilder merged;
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
  return merged.Take();
}

ConfigDict LoadFile(const std::string& path, const std::string* text_given, ReadContext* context, int depth) {
  PETRSIM_ASSERT(depth <= kMaxBaseDepth);  // LoadBase refuses a deeper chain before reading it
  CheckExtension(path, "");
  context->files.push_back(path);
  const std::string content =
      text_given != nullptr ? *text_given : ReadRegularFile(path, "mmcv config file", kMaxConfigBytes);
  const std::string text = SubstitutePredefined(content, path);
  FileValues file = Extension(path) == ".py" ? mmcv_internal::EvaluatePython(text, path, false, 1, &context->budget)
                                             : mmcv_internal::EvaluateJson(text, path, &context->budget);
  file.dict.Erase("_deprecation_");  // mmcv pops it (and warns)

  ConfigValue child{std::move(file.dict), path};
  if (!file.has_base) {
    SubstituteBaseVars(&child, nullptr, path, &context->budget);
    return std::move(std::get<ConfigDict>(child.value));
  }

  const std::vector<const ConfigValue*> paths = BasePaths(file, path);
  std::vector<ConfigDict> bases;
  std::vector<std::string> base_paths;
  for (const ConfigValue* item : paths) {
    std::string joined;
    bases.push_back(LoadBase(*item, file.base_where, path, context, depth, &joined));
    base_paths.push_back(joined);
  }
  ConfigValue base{MergeBases(bases, base_paths, file.base_where), path};

  SubstituteBaseVars(&child, &base, path, &context->budget);
  for (const auto& [key, value] : std::get<ConfigDict>(child.value).entries) {
    if (Depth(value) > kMaxValueDepth) {
      throw ScenarioError(WhereOf(value, path) + ": a value nested deeper than " + std::to_string(kMaxValueDepth) +
                          " levels (petrsim's limit)");
    }
  }
  return MergeAIntoB(std::move(std::get<ConfigDict>(child.value)), std::move(std::get<ConfigDict>(base.value)));
}

Config ReadConfig(const std::string& path, const std::string* text) {
  ReadContext context;
  context.stack_canonical.push_back(Canonical(path));
  context.stack_display.push_back(path);
  Config config;
  config.path = path;
  ConfigDict dict = LoadFile(path, text, &context, 0);
  mmcv_internal::CheckReservedKeys(dict, path);
  config.root.value = std::move(dict);
  config.root.where = path;
  config.files = std::move(context.files);
  return config;
}

}  // namespace

Config ReadMmcvConfig(const std::string& path) { return ReadConfig(path, nullptr); }

Config ReadMmcvConfigText(std::string_view text, const std::string& path) {
  const std::string copy(text);
  return ReadConfig(path, &copy);
}

}  // namespace petrsim
