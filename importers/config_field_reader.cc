// Typed reads of config values; see config_field_reader.h.
#include "importers/config_field_reader.h"

#include <fmt/format.h>

#include "base/error.h"

namespace petrsim {

void ConfigFieldReader::Fail(const ConfigValue* value, const std::string& path, const std::string& what) const {
  const std::string where = value != nullptr && !value->where.empty() ? value->where : config_.path;
  throw ScenarioError(fmt::format("{}: {}: {}", where, path, what));
}

void ConfigFieldReader::RequireKnown(const ConfigValue* value, const std::string& path) const {
  if (value == nullptr) return;
  const ConfigValue* unknown = FindUnknown(*value);
  if (unknown == nullptr) return;
  // The unknown's reason is "FILE:LINE: construct": the place and what petrsim does not evaluate.
  Fail(unknown, path,
       fmt::format("the scenario needs this value, and it depends on {}, which petrsim does not evaluate (it never "
                   "runs the config): write the value as a literal, or set the scenario field with --set",
                   unknown->AsUnknown()->reason));
}

const ConfigDict* ConfigFieldReader::Dict(const ConfigValue* value, const std::string& path) const {
  if (value == nullptr) return nullptr;
  RequireKnown(value->AsDict() ? nullptr : value, path);
  const ConfigDict* dict = value->AsDict();
  if (dict == nullptr) Fail(value, path, fmt::format("expected a dict, found {}", value->Repr()));
  return dict;
}

std::optional<int64_t> ConfigFieldReader::Int(const ConfigValue* value, const std::string& path, int64_t min,
                                              int64_t max) const {
  if (value == nullptr || value->is_none()) return std::nullopt;
  RequireKnown(value, path);
  const int64_t* v = value->AsInt();
  if (v == nullptr || *v < min || *v > max) {
    Fail(value, path, fmt::format("expected an int in [{}, {}], found {}", min, max, value->Repr()));
  }
  return *v;
}

std::optional<bool> ConfigFieldReader::Bool(const ConfigValue* value, const std::string& path) const {
  if (value == nullptr) return std::nullopt;
  RequireKnown(value, path);
  if (const bool* b = value->AsBool()) return *b;
  if (const int64_t* i = value->AsInt(); i != nullptr && (*i == 0 || *i == 1)) return *i == 1;
  Fail(value, path, fmt::format("expected True or False, found {}", value->Repr()));
}

std::optional<std::string> ConfigFieldReader::String(const ConfigValue* value, const std::string& path) const {
  if (value == nullptr || value->is_none()) return std::nullopt;
  RequireKnown(value, path);
  const std::string* s = value->AsString();
  if (s == nullptr) Fail(value, path, fmt::format("expected a string, found {}", value->Repr()));
  return *s;
}

std::vector<std::string> ConfigFieldReader::Strings(const ConfigValue* value, const std::string& path) const {
  std::vector<std::string> out;
  if (value == nullptr) return out;
  RequireKnown(value, path);
  if (const std::string* s = value->AsString()) return {*s};
  const auto* items = value->AsSequence();
  if (items == nullptr) {
    Fail(value, path, fmt::format("expected a string or a list of strings, found {}", value->Repr()));
  }
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string* s = (*items)[i].AsString();
    if (s == nullptr) {
      Fail(&(*items)[i], fmt::format("{}[{}]", path, i),
           fmt::format("expected a string, found {}", (*items)[i].Repr()));
    }
    out.push_back(*s);
  }
  return out;
}

std::vector<double> ConfigFieldReader::Numbers(const ConfigValue* value, const std::string& path) const {
  std::vector<double> out;
  RequireKnown(value, path);
  const auto* items = value == nullptr ? nullptr : value->AsSequence();
  if (items == nullptr) {
    Fail(value, path, fmt::format("expected a list of numbers, found {}", value ? value->Repr() : "nothing"));
  }
  for (size_t i = 0; i < items->size(); ++i) {
    const auto n = (*items)[i].AsNumber();
    if (!n) {
      Fail(&(*items)[i], fmt::format("{}[{}]", path, i),
           fmt::format("expected a number, found {}", (*items)[i].Repr()));
    }
    out.push_back(*n);
  }
  return out;
}

const ConfigValue* Get(const ConfigDict* dict, std::string_view key) {
  return dict == nullptr ? nullptr : dict->Get(key);
}

std::string From(const ConfigValue* value, const std::string& key) {
  return value != nullptr ? fmt::format("{} ({})", value->where, key) : "";
}

std::string ShortWhere(const std::string& where) {
  const size_t slash = where.find_last_of('/');
  return slash == std::string::npos ? where : where.substr(slash + 1);
}

}  // namespace petrsim
