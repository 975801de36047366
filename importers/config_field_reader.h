// Typed reads of a config's values for the scenario importer: every error names where the value was
// written (file:line), its key path, what was expected and what was found. A value the config
// reader could not evaluate (an import, a call it does not model, ...) is an error only here, where
// a scenario field needs it, and then the error names the field and the construct behind it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/mmcv/config.h"

namespace petrsim {

class ConfigFieldReader {
 public:
  explicit ConfigFieldReader(const Config& config) : config_(config) {}

  // Throws ScenarioError "WHERE: PATH: WHAT", WHERE the value's file:line (the config's path when
  // there is no value).
  [[noreturn]] void Fail(const ConfigValue* value, const std::string& path, const std::string& what) const;
  // Throws when `value` (or anything inside it) is a value the reader could not evaluate: the
  // scenario field `path` depends on it.
  void RequireKnown(const ConfigValue* value, const std::string& path) const;

  // nullptr for an absent value; an error for anything but a dict.
  const ConfigDict* Dict(const ConfigValue* value, const std::string& path) const;
  // nullopt for an absent value or None.
  std::optional<int64_t> Int(const ConfigValue* value, const std::string& path, int64_t min, int64_t max) const;
  // nullopt for an absent value; None is an error (`expected True or False`).
  std::optional<bool> Bool(const ConfigValue* value, const std::string& path) const;
  // nullopt for an absent value or None.
  std::optional<std::string> String(const ConfigValue* value, const std::string& path) const;
  // A string or a list/tuple of strings; empty for an absent value.
  std::vector<std::string> Strings(const ConfigValue* value, const std::string& path) const;
  // A list/tuple of numbers; an absent value is an error.
  std::vector<double> Numbers(const ConfigValue* value, const std::string& path) const;

  const Config& config() const { return config_; }

 private:
  const Config& config_;
};

// The value at `key` of a possibly absent dict.
const ConfigValue* Get(const ConfigDict* dict, std::string_view key);
// "cfg.py:21 (key)" of a value, "" for none: a provenance line's origin.
std::string From(const ConfigValue* value, const std::string& key);
// "FILE:LINE" without the file's directories: the summary table's "from" column.
std::string ShortWhere(const std::string& where);

}  // namespace petrsim
