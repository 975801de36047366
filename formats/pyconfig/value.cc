// ConfigValue: see value.h.
#include "formats/pyconfig/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace petrsim {

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
    case Kind::kUnknown:
      return false;
  }
  return false;
}

std::optional<bool> ConfigValue::Truth() const {
  if (is_unknown()) return std::nullopt;
  return Truthy();
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
    case Kind::kUnknown:
      return "a value petrsim cannot evaluate";
  }
  return "a value";
}

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

namespace {

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
    case ConfigValue::Kind::kUnknown:
      *out += "<unknown: " + v.AsUnknown()->reason + ">";
      return;
  }
}

}  // namespace

std::string ConfigValue::Repr() const {
  std::string out;
  AppendRepr(*this, &out);
  return out;
}

const ConfigValue* FindUnknown(const ConfigValue& value, std::string* path) {
  if (value.is_unknown()) {
    if (path != nullptr) path->clear();
    return &value;
  }
  auto extend = [&](const std::string& step) {
    if (path != nullptr) *path = path->empty() ? step : step + "." + *path;
  };
  if (const auto* items = value.AsSequence()) {
    for (size_t i = 0; i < items->size(); ++i) {
      if (const ConfigValue* found = FindUnknown((*items)[i], path)) {
        extend(std::to_string(i));
        return found;
      }
    }
  } else if (const ConfigDict* dict = value.AsDict()) {
    for (const auto& [key, item] : dict->entries) {
      if (const ConfigValue* found = FindUnknown(item, path)) {
        extend(key);
        return found;
      }
    }
  }
  return nullptr;
}

std::string DescribeUnknown(const ConfigValue& value, std::string_view field) {
  std::string inner;
  const ConfigValue* unknown = FindUnknown(value, &inner);
  if (unknown == nullptr) return "";
  std::string name(field);
  if (!inner.empty()) name += (name.empty() ? "" : ".") + inner;
  return name + " depends on " + unknown->AsUnknown()->reason;
}

ConfigDictBuilder::ConfigDictBuilder(ConfigDict dict) : dict_(std::move(dict)) {
  for (size_t i = 0; i < dict_.entries.size(); ++i) index_.emplace(dict_.entries[i].key, i);
}

ConfigValue* ConfigDictBuilder::Get(const std::string& key) {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &dict_.entries[it->second].value;
}

void ConfigDictBuilder::Set(std::string key, ConfigValue value) {
  const auto it = index_.find(key);
  if (it != index_.end()) {
    dict_.entries[it->second].value = std::move(value);
    return;
  }
  index_.emplace(key, dict_.entries.size());
  dict_.entries.emplace_back(std::move(key), std::move(value));
}

bool ConfigDictBuilder::Erase(const std::string& key) {
  if (index_.erase(key) == 0) return false;
  dict_.Erase(key);
  index_.clear();
  for (size_t i = 0; i < dict_.entries.size(); ++i) index_.emplace(dict_.entries[i].key, i);
  return true;
}

ConfigDict ConfigDictBuilder::Take() {
  index_.clear();
  return std::move(dict_);
}

}  // namespace petrsim
