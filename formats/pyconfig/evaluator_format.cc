// The config evaluator's string formatting (evaluator_internal.h): f-strings, format specs
// (Python's format(value, spec)) and str.format.
#include "formats/pyconfig/evaluator_internal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace petrsim::pyconfig::evaluator_internal {

namespace {

// A format spec, [[fill]align][sign][#][0][width][grouping][.precision][type], as read.
struct FormatSpec {
  std::string fill_text = " ";
  char align = 0;
  char sign = 0;
  bool alternate = false;
  size_t width = 0;
  char grouping = 0;
  int precision = -1;
  char type = 0;
};
// A value formatted before its padding: the sign and 0x-like prefix (before '=' padding), then
// the rest.
struct Formatted {
  std::string prefix;
  std::string body;
  bool numeric = false;
};

// The spec's fields; nullopt for one Python refuses or petrsim does not read.
std::optional<FormatSpec> ParseFormatSpec(const std::string& spec) {
  FormatSpec f;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  const std::vector<std::string> cps = CodePoints(spec);
  if (cps.size() >= 2 && cps[1].size() == 1 && is_align(cps[1][0])) {
    f.fill_text = cps[0];
    f.align = cps[1][0];
    i = cps[0].size() + 1;
  } else if (is_align(spec[0])) {
    f.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) f.sign = spec[i++];
  if (i < spec.size() && spec[i] == 'z') return std::nullopt;
  if (i < spec.size() && spec[i] == '#') {
    f.alternate = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    if (f.align == 0) {
      f.fill_text.assign(1, '0');  // (not = "0": GCC 12 warns falsely, -Wrestrict)
      f.align = '=';
    }
    ++i;
  }
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) {
    f.width = f.width * 10 + static_cast<size_t>(spec[i++] - '0');
    if (f.width > 10000) return std::nullopt;
  }
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) f.grouping = spec[i++];
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    if (i >= spec.size() || !std::isdigit(static_cast<unsigned char>(spec[i]))) return std::nullopt;
    f.precision = 0;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) {
      f.precision = f.precision * 10 + (spec[i++] - '0');
      if (f.precision > 1000) return std::nullopt;
    }
  }
  if (i < spec.size()) f.type = spec[i++];
  if (i != spec.size()) return std::nullopt;
  return f;
}

std::string Group(const std::string& digits, size_t every, char separator) {
  std::string out;
  const size_t n = digits.size();
  for (size_t k = 0; k < n; ++k) {
    if (k > 0 && (n - k) % every == 0) out += separator;
    out += digits[k];
  }
  return out;
}

// A str under a spec (precision cuts it to that many code points); left-aligned by default.
std::optional<Formatted> FormatString(const std::string& s, FormatSpec& f) {
  if (f.sign || f.alternate || f.grouping || (f.type != 0 && f.type != 's') || f.align == '=') return std::nullopt;
  Formatted out;
  out.body = s;
  if (f.precision >= 0) {
    const std::vector<std::string> chars = CodePoints(out.body);
    out.body.clear();
    for (size_t k = 0; k < chars.size() && k < static_cast<size_t>(f.precision); ++k) out.body += chars[k];
  }
  if (f.align == 0) f.align = '<';
  return out;
}

// An int (or a bool: True/False without a type) in base 2, 8, 10 or 16.
std::optional<Formatted> FormatInt(const ConfigValue& v, FormatSpec& f) {
  Formatted out;
  if (v.AsBool() && f.type == 0) {
    if (f.sign || f.alternate || f.grouping || f.precision >= 0) return std::nullopt;
    out.body = *v.AsBool() ? "True" : "False";
    if (f.align == 0) f.align = '<';
    return out;
  }
  if (f.precision >= 0) return std::nullopt;
  out.numeric = true;
  const char type = f.type;
  const int64_t x = IntOf(v);
  uint64_t magnitude = x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
  const int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
  do {
    const int d = static_cast<int>(magnitude % static_cast<uint64_t>(base));
    out.body.insert(out.body.begin(), static_cast<char>(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10));
    magnitude /= static_cast<uint64_t>(base);
  } while (magnitude > 0);
  if (f.grouping) {
    if (f.grouping == ',' && base != 10) return std::nullopt;
    out.body = Group(out.body, base == 10 ? 3 : 4, f.grouping);
  }
  out.prefix = x < 0 ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
  if (f.alternate && base != 10) out.prefix += type == 'b' ? "0b" : type == 'o' ? "0o" : type == 'X' ? "0X" : "0x";
  return out;
}

// A float (or an int under a float type) in the e, f, g or % notations, or as repr() without a
// type.
std::optional<Formatted> FormatFloat(const ConfigValue& v, const FormatSpec& f) {
  Formatted out;
  out.numeric = true;
  const char type = f.type;
  double x = FloatOf(v);
  std::string& body = out.body;
  if (type == 0 && f.precision < 0) {
    if (v.AsFloat()) {
      body = PythonFloatRepr(std::fabs(x));
    } else {
      body = std::to_string(IntOf(v) < 0 ? -IntOf(v) : IntOf(v));
    }
    if (f.grouping) return std::nullopt;
  } else if (!std::isfinite(x)) {
    body = std::isnan(x) ? "nan" : "inf";
    if (type == 'E' || type == 'F' || type == 'G') {
      for (char& c : body) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    if (type == '%') body += "%";
  } else {
    if (type == 0 && IsIntLike(v)) return std::nullopt;  // int with a precision: an error in Python
    const int p = f.precision < 0 ? 6 : f.precision;
    const double ax = std::fabs(x) * (type == '%' ? 100.0 : 1.0);
    char conversion = type == '%' ? 'f' : type == 0 ? 'g' : type;
    std::string format = std::string("%") + (f.alternate ? "#" : "") + "." + std::to_string(p) + conversion;
    char buffer[1200];
    std::snprintf(buffer, sizeof(buffer), format.c_str(), ax);
    body = buffer;
    if (type == 0 && body.find_first_of(".eE") == std::string::npos) body += ".0";
    if (type == 0 && p == 0) return std::nullopt;
    if (type == '%') body += "%";
    if (f.grouping) {
      const size_t end = body.find_first_of(".eE%");
      const std::string int_part = body.substr(0, end);
      body = Group(int_part, 3, f.grouping) + (end == std::string::npos ? "" : body.substr(end));
    }
  }
  // (a std::string built, then moved in: assigning the char* here makes GCC 12 warn falsely, -Wrestrict)
  out.prefix = std::string(std::signbit(x) && !std::isnan(x) ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "");
  return out;
}

// The formatted value padded with the fill to the spec's width (numbers right-aligned by default).
std::optional<std::string> Pad(const Formatted& formatted, FormatSpec& f) {
  const std::string& prefix = formatted.prefix;
  const std::string& body = formatted.body;
  if (formatted.numeric && f.align == 0) f.align = '>';
  const size_t length = CodePointCount(prefix) + CodePointCount(body);
  if (f.width <= length) return prefix + body;
  const size_t pad = f.width - length;
  auto repeat = [&](size_t n) {
    std::string out;
    for (size_t k = 0; k < n; ++k) out += f.fill_text;
    return out;
  };
  switch (f.align) {
    case '<':
      return prefix + body + repeat(pad);
    case '^':
      return repeat(pad / 2) + prefix + body + repeat(pad - pad / 2);
    case '=':
      if (!formatted.numeric) return std::nullopt;
      if (f.grouping && f.fill_text == "0") return std::nullopt;  // Python groups the zero padding too
      return prefix + repeat(pad) + body;
    default:
      return repeat(pad) + prefix + body;
  }
}

// Python's format(value, spec) for the common specs; nullopt for what is not read here.
std::optional<std::string> Format(const ConfigValue& v, const std::string& spec) {
  if (spec.empty()) {
    if (v.AsDict() || v.AsSequence() || v.is_none() || v.AsBool() || v.AsString() || v.AsInt() || v.AsFloat()) {
      return PyStr(v);
    }
    return std::nullopt;
  }
  std::optional<FormatSpec> parsed = ParseFormatSpec(spec);
  if (!parsed) return std::nullopt;
  FormatSpec& f = *parsed;
  std::optional<Formatted> out;
  if (v.AsString()) {
    out = FormatString(*v.AsString(), f);
  } else if (IsIntLike(v) && (f.type == 0 || std::strchr("dbox X", f.type) != nullptr) && f.type != ' ') {
    out = FormatInt(v, f);
  } else if (IsNumeric(v) && (f.type == 0 || std::strchr("eEfFgG%", f.type) != nullptr)) {
    out = FormatFloat(v, f);
  }
  if (!out) return std::nullopt;
  return Pad(*out, f);
}

// Where a str.format field opening at `open` closes: its matching '}', counting nested braces
// (a spec's own fields), or the end when unclosed.
size_t FormatFieldClose(const std::string& format, size_t open) {
  size_t j = open + 1;
  int depth = 0;
  for (; j < format.size(); ++j) {
    if (format[j] == '{') ++depth;
    if (format[j] == '}') {
      if (depth == 0) break;
      --depth;
    }
  }
  return j;
}

// A field's text split into its name, `!` conversion and `:` spec; false for a shape Python would
// reject (a missing conversion character, text after it), which is left unmodelled.
bool SplitFormatField(const std::string& field, std::string* name, char* conversion, std::string* spec) {
  size_t k = 0;
  while (k < field.size() && field[k] != '!' && field[k] != ':') ++k;
  *name = field.substr(0, k);
  if (k < field.size() && field[k] == '!') {
    if (k + 1 >= field.size()) return false;
    *conversion = field[k + 1];
    k += 2;
  }
  if (k < field.size() && field[k] == ':') *spec = field.substr(k + 1);
  if (k < field.size() && field[k] != ':') return false;
  return true;
}

}  // namespace

ConfigValue Evaluator::JoinedStr(const Expr& e) {
  std::string out;
  for (const ExprPtr& part : e.items) {
    if (part->kind == ExprKind::kConstant) {
      out += part->constant.text;
      continue;
    }
    ConfigValue v = Eval(*part->items[0]);
    if (HasUnknown(v)) return *FindUnknown(v);
    std::string spec;
    if (part->items[1]) {
      ConfigValue s = JoinedStr(*part->items[1]);
      if (s.is_unknown()) return s;
      spec = *s.AsString();
    }
    if (part->conversion == 'r' || part->conversion == 'a') {
      const std::string r = v.Repr();
      if (part->conversion == 'a' &&
          std::any_of(r.begin(), r.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
        return Unknown(*part, "ascii() of a non-ASCII value");
      }
      v = ConfigValue{r, v.where};
    } else if (part->conversion == 's') {
      v = ConfigValue{PyStr(v), v.where};
    }
    std::optional<std::string> formatted = Format(v, spec);
    if (!formatted) return Unknown(*part, "a format spec petrsim does not read ('" + spec + "')");
    out += *formatted;
  }
  return Make(std::move(out), e);
}

// str.format: `{}`, `{0}`, `{name}`, `{{`, `}}`, conversions and specs (one nested level).
std::optional<std::string> Evaluator::StrFormat(const std::string& format, const std::vector<ConfigValue>& args,
                                                const std::vector<std::pair<std::string, ConfigValue>>& kwargs,
                                                const Expr& at, int nesting) {
  std::string out;
  FormatNumbering numbering;
  for (size_t i = 0; i < format.size();) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      Fail(at, "Single '}' encountered in format string (Python raises ValueError)");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    const size_t j = FormatFieldClose(format, i);
    if (j >= format.size()) Fail(at, "Single '{' encountered in format string (Python raises ValueError)");
    const std::string field = format.substr(i + 1, j - i - 1);
    i = j + 1;
    std::optional<std::string> formatted = FormatField(field, args, kwargs, at, nesting, &numbering);
    if (!formatted) return std::nullopt;
    out += *formatted;
  }
  return out;
}

// One str.format field's text (between its braces) formatted, or nullopt where the result is not
// known or the field uses what is not modelled (attribute or index lookups, a bad conversion).
std::optional<std::string> Evaluator::FormatField(const std::string& field, const std::vector<ConfigValue>& args,
                                                  const std::vector<std::pair<std::string, ConfigValue>>& kwargs,
                                                  const Expr& at, int nesting, FormatNumbering* numbering) {
  std::string name;
  char conversion = 0;
  std::string spec;
  if (!SplitFormatField(field, &name, &conversion, &spec)) return std::nullopt;
  const ConfigValue* value = FormatArgument(name, args, kwargs, at, numbering);
  if (value == nullptr) return std::nullopt;
  if (value->is_unknown()) return std::nullopt;
  if (spec.find('{') != std::string::npos) {
    if (nesting > 0) return std::nullopt;
    std::optional<std::string> s = FormatNestedSpec(spec, args, kwargs, at, nesting, numbering);
    if (!s) return std::nullopt;
    spec = *s;
  }
  std::optional<ConfigValue> v = FormatConversion(*value, conversion, at);
  if (!v) return std::nullopt;
  if (FindUnknown(*v) != nullptr) return std::nullopt;
  return Format(*v, spec);
}

// The argument a field's name selects: automatic (`{}`) or manual (`{0}`) numbering, which Python
// forbids mixing, or a keyword. Null for attribute and index lookups, which are not modelled.
const ConfigValue* Evaluator::FormatArgument(const std::string& name, const std::vector<ConfigValue>& args,
                                             const std::vector<std::pair<std::string, ConfigValue>>& kwargs,
                                             const Expr& at, FormatNumbering* numbering) {
  const ConfigValue* value = nullptr;
  if (name.empty()) {
    if (numbering->used_manual) {
      Fail(at, "cannot switch from manual field numbering to automatic (Python raises ValueError)");
    }
    numbering->used_auto = true;
    if (numbering->auto_index >= args.size()) {
      Fail(at, "Replacement index out of range for format() (Python raises IndexError)");
    }
    value = &args[numbering->auto_index++];
  } else if (std::all_of(name.begin(), name.end(),
                         [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
    if (numbering->used_auto) {
      Fail(at, "cannot switch from automatic field numbering to manual (Python raises ValueError)");
    }
    numbering->used_manual = true;
    const size_t index = std::stoul(name.substr(0, 9));
    if (index >= args.size()) Fail(at, "Replacement index out of range for format() (Python raises IndexError)");
    value = &args[index];
  } else {
    if (name.find_first_of(".[") != std::string::npos) return nullptr;
    for (const auto& [key, v] : kwargs) {
      if (key == name) value = &v;
    }
    if (value == nullptr) Fail(at, "KeyError: '" + name + "' (a format field with no such argument)");
  }
  return value;
}

// A spec with nested fields (`{:{}}`), formatted first; the nested fields share the numbering, so
// automatic ones take the remaining arguments and advance the outer count.
std::optional<std::string> Evaluator::FormatNestedSpec(const std::string& spec, const std::vector<ConfigValue>& args,
                                                       const std::vector<std::pair<std::string, ConfigValue>>& kwargs,
                                                       const Expr& at, int nesting, FormatNumbering* numbering) {
  std::vector<ConfigValue> rest(
      args.begin() + static_cast<std::ptrdiff_t>(std::min(numbering->auto_index, args.size())), args.end());
  std::optional<std::string> s = StrFormat(spec, numbering->used_manual ? args : rest, kwargs, at, nesting + 1);
  if (!s) return std::nullopt;
  if (numbering->used_auto) {
    size_t fields = 0;
    for (size_t p = 0; p < spec.size(); ++p) fields += spec[p] == '{';
    numbering->auto_index += fields;
  }
  return s;
}

// A field's `!r`, `!a` or `!s` applied; nullopt where `!a` would escape non-ASCII text, which is
// not modelled.
std::optional<ConfigValue> Evaluator::FormatConversion(const ConfigValue& value, char conversion, const Expr& at) {
  ConfigValue v = value;
  if (conversion == 'r' || conversion == 'a') {
    v = ConfigValue{v.Repr(), v.where};
    if (conversion == 'a' && std::any_of(v.AsString()->begin(), v.AsString()->end(),
                                         [](char d) { return static_cast<unsigned char>(d) >= 0x80; })) {
      return std::nullopt;
    }
  } else if (conversion == 's') {
    v = ConfigValue{PyStr(v), v.where};
  } else if (conversion != 0) {
    Fail(at, std::string("Unknown conversion specifier ") + conversion + " (Python raises ValueError)");
  }
  return v;
}

}  // namespace petrsim::pyconfig::evaluator_internal
