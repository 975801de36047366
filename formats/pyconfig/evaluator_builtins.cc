// The config evaluator's calls (evaluator_internal.h): arguments, dispatch, and the builtins a
// config may call (len, int, float, round, range, ...) with their parsers.
#include "formats/pyconfig/evaluator_internal.h"

#include <algorithm>
#include <cfenv>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "formats/pyconfig/limits.h"

namespace petrsim::pyconfig::evaluator_internal {

// The arguments of a call; a lone generator argument is read as the list of its items. An
// unknown `*x` or `**x` makes the call's result unknown (returned).
std::optional<ConfigValue> Evaluator::EvalArgs(const Expr& call, Args* out) {
  for (size_t i = 1; i < call.items.size(); ++i) {
    const Expr& arg = *call.items[i];
    if (arg.kind == ExprKind::kStarred) {
      ConfigValue v = Eval(*arg.items[0]);
      if (v.is_unknown()) return v;
      for (ConfigValue& item : Iterate(std::move(v), arg)) out->positional.push_back(std::move(item));
    } else if (arg.kind == ExprKind::kGeneratorExp) {
      std::vector<ConfigValue> items;
      if (auto unknown = Comprehend(arg, &items, nullptr)) return unknown;
      out->positional.push_back(Make(ConfigList{std::move(items)}, arg));
    } else {
      out->positional.push_back(Eval(arg));
    }
  }
  for (const Keyword& k : call.keywords) {
    if (k.name.empty()) {
      ConfigValue v = Eval(*k.value);
      if (v.is_unknown()) return v;
      ConfigDictBuilder check;
      for (const auto& [name, value] : out->keywords) check.Set(name, value);
      Splice(k.line, k.col, std::move(v), &check, true);
      ConfigDict merged = check.Take();
      out->keywords.clear();
      for (auto& entry : merged.entries) out->keywords.emplace_back(entry.key, std::move(entry.value));
      continue;
    }
    for (const auto& [name, value] : out->keywords) {
      if (name == k.name) {
        Fail(k.line, k.col,
             "dict() got multiple values for keyword argument '" + k.name + "' (Python raises TypeError)");
      }
    }
    out->keywords.emplace_back(k.name, Eval(*k.value));
  }
  return std::nullopt;
}

const ConfigValue* Evaluator::KeywordArg(const Args& args, const std::string& name) const {
  for (const auto& [key, value] : args.keywords) {
    if (key == name) return &value;
  }
  return nullptr;
}

ConfigValue Evaluator::Call(const Expr& e) {
  const Expr& func = *e.items[0];
  if (func.kind == ExprKind::kName && Lookup(func.text) == nullptr && IsBuiltin(func.text)) {
    return Builtin(e, func.text);
  }
  if (func.kind == ExprKind::kAttribute) {
    ConfigValue object = Eval(*func.items[0]);
    if (!object.is_unknown()) return Method(e, func.text, std::move(object));
    Args args;
    EvalArgs(e, &args);  // Python's errors in the arguments are still found
    return Unknown(e, "a call of '" + Dotted(func) + "'");
  }
  if (func.kind == ExprKind::kName) {
    EvalName(func);  // an undefined name is Python's NameError
    Args args;
    EvalArgs(e, &args);
    return Unknown(e, "a call of '" + func.text + "'");
  }
  ConfigValue f = Eval(func);
  if (f.is_unknown()) return f;
  return Unknown(e, "a call of the result of an expression");
}

void Evaluator::ArgCount(const Expr& e, const std::string& name, const std::string& expected) const {
  Fail(e, name + "() takes " + expected + " (Python raises TypeError)");
}

// The first unknown among the arguments, which makes a builtin's result unknown.
const ConfigValue* Evaluator::UnknownArg(const Args& args) {
  for (const ConfigValue& v : args.positional) {
    if (const ConfigValue* u = FindUnknown(v)) return u;
  }
  for (const auto& [key, v] : args.keywords) {
    if (const ConfigValue* u = FindUnknown(v)) return u;
  }
  return nullptr;
}

ConfigValue Evaluator::Builtin(const Expr& e, const std::string& name) {
  Args args;
  if (auto unknown = EvalArgs(e, &args)) return std::move(*unknown);
  auto& pos = args.positional;
  const size_t n = pos.size();
  if (name == "dict") {
    ConfigDictBuilder dict;
    if (n > 1) ArgCount(e, name, "at most 1 positional argument");
    if (n == 1) {
      if (pos[0].is_unknown()) return pos[0];
      if (const ConfigDict* d = pos[0].AsDict()) {
        for (const auto& entry : d->entries) dict.Set(entry.key, entry.value);
      } else {
        for (ConfigValue& pair : Iterate(std::move(pos[0]), *e.items[1])) {
          if (pair.is_unknown()) return pair;
          std::vector<ConfigValue> kv = Iterate(std::move(pair), *e.items[1]);
          if (kv.size() != 2) {
            Fail(*e.items[1], "dictionary update sequence element has length " + std::to_string(kv.size()) +
                                  "; 2 is required (Python raises ValueError)");
          }
          if (kv[0].is_unknown()) return kv[0];
          dict.Set(DictKey(kv[0], *e.items[1]), std::move(kv[1]));
        }
      }
    }
    for (auto& [key, value] : args.keywords) dict.Set(key, std::move(value));
    return Make(dict.Take(), e);
  }
  // A structural builtin keeps unknown items as they are; the others need known values.
  static const std::unordered_set<std::string> kStructural = {"len",       "list",     "tuple", "zip",
                                                              "enumerate", "reversed", "bool"};
  for (const ConfigValue& v : pos) {
    if (v.is_unknown()) return v;
  }
  if (kStructural.count(name) == 0) {
    if (const ConfigValue* u = UnknownArg(args)) return *u;
  }
  if (!args.keywords.empty() && name != "sorted" && name != "sum" && name != "enumerate" && name != "min" &&
      name != "max" && name != "round" && name != "int") {
    return Unknown(e, "a call of '" + name + "' with keyword arguments");
  }
  if (name == "len") {
    if (n != 1) ArgCount(e, name, "exactly one argument");
    if (const std::string* s = pos[0].AsString()) return Make(static_cast<int64_t>(CodePointCount(*s)), e);
    if (const auto* items = pos[0].AsSequence()) return Make(static_cast<int64_t>(items->size()), e);
    if (const ConfigDict* d = pos[0].AsDict()) return Make(static_cast<int64_t>(d->entries.size()), e);
    Fail(e, std::string("object of type '") + PyType(pos[0]) + "' has no len() (Python raises TypeError)");
  }
  if (name == "list" || name == "tuple") {
    if (n > 1) ArgCount(e, name, "at most 1 argument");
    std::vector<ConfigValue> items;
    if (n == 1) items = Iterate(std::move(pos[0]), e);
    if (name == "list") return Make(ConfigList{std::move(items)}, e);
    return Make(ConfigTuple{std::move(items)}, e);
  }
  if (name == "int") return Int(e, args);
  if (name == "float") {
    if (n > 1) ArgCount(e, name, "at most 1 argument");
    if (n == 0) return Make(0.0, e);
    if (IsNumeric(pos[0])) return Make(FloatOf(pos[0]), e);
    if (const std::string* s = pos[0].AsString()) {
      std::optional<double> d = ParseFloat(*s);
      if (!d) Fail(e, "could not convert string to float: " + pos[0].Repr() + " (Python raises ValueError)");
      return Make(*d, e);
    }
    Fail(e, std::string("float() argument must be a string or a real number, not '") + PyType(pos[0]) + "'");
  }
  if (name == "round") return Round(e, args);
  if (name == "abs") {
    if (n != 1) ArgCount(e, name, "exactly one argument");
    if (const double* d = pos[0].AsFloat()) return Make(std::fabs(*d), e);
    if (IsIntLike(pos[0])) {
      const int64_t i = IntOf(pos[0]);
      if (i == std::numeric_limits<int64_t>::min()) Fail(e, "integer overflow in abs()");
      return Make(i < 0 ? -i : i, e);
    }
    Fail(e, std::string("bad operand type for abs(): '") + PyType(pos[0]) + "' (Python raises TypeError)");
  }
  if (name == "min" || name == "max") {
    std::vector<ConfigValue> items;
    if (n == 1) {
      items = Iterate(std::move(pos[0]), e);
    } else if (n == 0) {
      ArgCount(e, name, "at least 1 argument");
    } else {
      items = std::move(pos);
    }
    if (KeywordArg(args, "key") != nullptr) return Unknown(e, "a call of '" + name + "' with a key function");
    if (items.empty()) {
      if (const ConfigValue* d = KeywordArg(args, "default")) return *d;
      Fail(e, name + "() arg is an empty sequence (Python raises ValueError)");
    }
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
      const std::optional<int> o = Order(items[i], items[best]);
      if (!o) {
        Fail(e, "'<' not supported between instances of '" + std::string(PyType(items[i])) + "' and '" +
                    PyType(items[best]) + "' (Python raises TypeError)");
      }
      if (name == "min" ? *o == -1 : *o == 1) best = i;
    }
    return std::move(items[best]);
  }
  if (name == "sum") {
    if (n < 1 || n > 2) ArgCount(e, name, "1 or 2 arguments");
    ConfigValue total = n == 2 ? std::move(pos[1]) : Make(int64_t{0}, e);
    if (const ConfigValue* start = KeywordArg(args, "start")) total = *start;
    Expr op;
    op.line = op.op_line = e.line;
    op.col = op.op_col = e.col;
    if (total.AsString()) Fail(e, "sum() can't sum strings [use ''.join(seq) instead] (Python raises TypeError)");
    for (ConfigValue& item : Iterate(std::move(pos[0]), e)) total = Binary(op, "+", std::move(total), std::move(item));
    total.where = Where(e.line);
    return total;
  }
  if (name == "range") return Range(e, pos);
  if (name == "zip") {
    std::vector<std::vector<ConfigValue>> columns;
    size_t shortest = std::numeric_limits<size_t>::max();
    for (ConfigValue& v : pos) {
      columns.push_back(Iterate(std::move(v), e));
      shortest = std::min(shortest, columns.back().size());
    }
    std::vector<ConfigValue> rows;
    for (size_t r = 0; !columns.empty() && r < shortest; ++r) {
      ConfigTuple row;
      for (auto& column : columns) row.items.push_back(std::move(column[r]));
      rows.push_back(Make(std::move(row), e));
    }
    return Make(ConfigList{std::move(rows)}, e);
  }
  if (name == "enumerate") {
    if (n < 1 || n > 2) ArgCount(e, name, "1 or 2 arguments");
    int64_t start = 0;
    const ConfigValue* s = n == 2 ? &pos[1] : KeywordArg(args, "start");
    if (s != nullptr) {
      if (!IsIntLike(*s)) Fail(e, "enumerate() start must be an integer (Python raises TypeError)");
      start = IntOf(*s);
    }
    std::vector<ConfigValue> rows;
    for (ConfigValue& item : Iterate(std::move(pos[0]), e)) {
      ConfigTuple row;
      row.items.push_back(Make(start++, e));
      row.items.push_back(std::move(item));
      rows.push_back(Make(std::move(row), e));
    }
    return Make(ConfigList{std::move(rows)}, e);
  }
  if (name == "sorted" || name == "reversed") {
    if (n != 1) ArgCount(e, name, "exactly one argument");
    if (KeywordArg(args, "key") != nullptr) return Unknown(e, "a call of 'sorted' with a key function");
    std::vector<ConfigValue> items = Iterate(std::move(pos[0]), e);
    if (name == "reversed") {
      std::reverse(items.begin(), items.end());
      return Make(ConfigList{std::move(items)}, e);
    }
    bool reverse = false;
    if (const ConfigValue* r = KeywordArg(args, "reverse")) reverse = r->Truthy();
    for (size_t i = 1; i < items.size(); ++i) {
      if (!Order(items[i], items[0])) {
        Fail(e, "'<' not supported between instances of '" + std::string(PyType(items[i])) + "' and '" +
                    PyType(items[0]) + "' (Python raises TypeError)");
      }
    }
    // Python's sort is stable; reverse=True keeps equal items in their order too.
    std::stable_sort(items.begin(), items.end(), [&](const ConfigValue& a, const ConfigValue& b) {
      const int o = Order(a, b).value_or(0);
      return reverse ? o == 1 : o == -1;
    });
    return Make(ConfigList{std::move(items)}, e);
  }
  if (name == "str") {
    if (n == 0) return Make(std::string(), e);
    if (n != 1) return Unknown(e, "a call of 'str' with an encoding");
    return Make(PyStr(pos[0]), e);
  }
  if (name == "repr") {
    if (n != 1) ArgCount(e, name, "exactly one argument");
    return Make(pos[0].Repr(), e);
  }
  if (name == "bool") {
    if (n == 0) return Make(false, e);
    return Make(pos[0].Truthy(), e);
  }
  if (name == "any" || name == "all") {
    if (n != 1) ArgCount(e, name, "exactly one argument");
    bool result = name == "all";
    for (const ConfigValue& item : Iterate(std::move(pos[0]), e)) {
      if (name == "any" ? item.Truthy() : !item.Truthy()) {
        result = name == "any";
        break;
      }
    }
    return Make(result, e);
  }
  return Unknown(e, "a call of '" + name + "'");
}

ConfigValue Evaluator::Int(const Expr& e, Args& args) {
  auto& pos = args.positional;
  if (pos.empty()) return Make(int64_t{0}, e);
  const ConfigValue* base_value = pos.size() > 1 ? &pos[1] : KeywordArg(args, "base");
  if (const std::string* s = pos[0].AsString()) {
    int base = 10;
    if (base_value != nullptr) {
      if (!IsIntLike(*base_value)) Fail(e, "int() base must be an integer (Python raises TypeError)");
      base = static_cast<int>(IntOf(*base_value));
      if (base != 0 && (base < 2 || base > 36)) Fail(e, "int() base must be >= 2 and <= 36, or 0");
    }
    std::optional<int64_t> v = ParseInt(*s, base);
    if (!v) {
      Fail(e, "invalid literal for int() with base " + std::to_string(base) + ": " + pos[0].Repr() +
                  " (Python raises ValueError)");
    }
    return Make(*v, e);
  }
  if (base_value != nullptr) Fail(e, "int() can't convert non-string with explicit base (Python raises TypeError)");
  if (IsIntLike(pos[0])) return Make(IntOf(pos[0]), e);
  if (const double* d = pos[0].AsFloat()) {
    if (std::isnan(*d)) Fail(e, "cannot convert float NaN to integer (Python raises ValueError)");
    if (std::isinf(*d)) Fail(e, "cannot convert float infinity to integer (Python raises OverflowError)");
    const double t = std::trunc(*d);
    if (t >= 9.2233720368547758e18 || t < -9.2233720368547758e18) {
      Fail(e, "integer overflow in int() (petrsim reads 64-bit integers; Python's grow)");
    }
    return Make(static_cast<int64_t>(t), e);
  }
  Fail(e, std::string("int() argument must be a string or a real number, not '") + PyType(pos[0]) +
              "' (Python raises TypeError)");
}

// Python's int(str, base): whitespace around, a sign, underscores between digits, base 0 reads
// the prefix.
std::optional<int64_t> Evaluator::ParseInt(const std::string& text, int base) {
  size_t b = text.find_first_not_of(" \t\n\r\f\v");
  size_t e = text.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return std::nullopt;
  std::string s = text.substr(b, e - b + 1);
  bool negative = false;
  size_t i = 0;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    i = 1;
  }
  auto prefix = [&](char p) {
    return i + 1 < s.size() && s[i] == '0' && std::tolower(static_cast<unsigned char>(s[i + 1])) == p;
  };
  if (base == 0) {
    base = prefix('x') ? 16 : prefix('o') ? 8 : prefix('b') ? 2 : 10;
    if (base != 10) {
      i += 2;
    } else if (s.size() - i > 1 && s[i] == '0' && s.find_first_not_of("0_", i) != std::string::npos) {
      return std::nullopt;
    }
  } else if ((base == 16 && prefix('x')) || (base == 8 && prefix('o')) || (base == 2 && prefix('b'))) {
    i += 2;
  }
  if (i < s.size() && s[i] == '_' && i >= 2 && !std::isdigit(static_cast<unsigned char>(s[i - 1]))) ++i;
  if (i >= s.size()) return std::nullopt;
  uint64_t value = 0;
  bool last_underscore = true;
  for (; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (last_underscore) return std::nullopt;
      last_underscore = true;
      continue;
    }
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (value > (uint64_t{1} << 63) / static_cast<uint64_t>(base)) return std::nullopt;
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    last_underscore = false;
  }
  if (last_underscore) return std::nullopt;
  if (value > (uint64_t{1} << 63) || (!negative && value == (uint64_t{1} << 63))) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
}

std::optional<double> Evaluator::ParseFloat(const std::string& text) {
  size_t b = text.find_first_not_of(" \t\n\r\f\v");
  size_t e = text.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return std::nullopt;
  std::string s = text.substr(b, e - b + 1);
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string unsigned_part = lower;
  double sign = 1;
  if (!unsigned_part.empty() && (unsigned_part[0] == '+' || unsigned_part[0] == '-')) {
    sign = unsigned_part[0] == '-' ? -1 : 1;
    unsigned_part.erase(0, 1);
  }
  if (unsigned_part == "inf" || unsigned_part == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (unsigned_part == "nan") return std::copysign(std::numeric_limits<double>::quiet_NaN(), sign);
  // Digits, one '.', an exponent; single underscores between digits.
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
        return std::nullopt;
      }
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(s[i])) && std::strchr("+-.eE", s[i]) == nullptr) return std::nullopt;
    clean += s[i];
  }
  if (clean.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  const char* begin = clean.c_str();
  if (*begin == '+') ++begin;
  double value = 0;
  const auto result = std::from_chars(begin, clean.c_str() + clean.size(), value);
  if (result.ptr != clean.c_str() + clean.size()) return std::nullopt;
  if (result.ec == std::errc::result_out_of_range) value = std::strtod(clean.c_str(), nullptr);
  return value;
}

// Python's round: half to even, on the exact binary value.
ConfigValue Evaluator::Round(const Expr& e, Args& args) {
  auto& pos = args.positional;
  if (pos.empty() || pos.size() > 2) ArgCount(e, "round", "1 or 2 arguments");
  const ConfigValue* digits_value = pos.size() == 2 ? &pos[1] : KeywordArg(args, "ndigits");
  if (digits_value != nullptr && digits_value->is_none()) digits_value = nullptr;
  if (digits_value != nullptr && !IsIntLike(*digits_value)) {
    Fail(e, std::string("'") + PyType(*digits_value) + "' object cannot be interpreted as an integer");
  }
  const ConfigValue& x = pos[0];
  if (IsIntLike(x)) {
    const int64_t i = IntOf(x);
    if (digits_value == nullptr || IntOf(*digits_value) >= 0) return Make(i, e);
    const int64_t nd = -IntOf(*digits_value);
    if (nd > 18) return Make(int64_t{0}, e);
    int64_t scale = 1;
    for (int64_t k = 0; k < nd; ++k) scale *= 10;
    int64_t q = i / scale;
    int64_t r = i % scale;
    if (r < 0) {
      r += scale;
      --q;
    }
    if (2 * r > scale || (2 * r == scale && (q % 2 != 0))) ++q;
    int64_t out = 0;
    if (__builtin_mul_overflow(q, scale, &out)) Fail(e, "integer overflow in round()");
    return Make(out, e);
  }
  const double* d = x.AsFloat();
  if (d == nullptr) Fail(e, std::string("type ") + PyType(x) + " doesn't define __round__ method");
  if (digits_value == nullptr) {
    if (std::isnan(*d)) Fail(e, "cannot convert float NaN to integer (Python raises ValueError)");
    if (std::isinf(*d)) Fail(e, "cannot convert float infinity to integer (Python raises OverflowError)");
    const int saved = std::fegetround();
    std::fesetround(FE_TONEAREST);
    const double r = std::nearbyint(*d);
    std::fesetround(saved);
    if (r >= 9.2233720368547758e18 || r < -9.2233720368547758e18) Fail(e, "integer overflow in round()");
    return Make(static_cast<int64_t>(r), e);
  }
  const int64_t nd = IntOf(*digits_value);
  if (!std::isfinite(*d)) return Make(*d, e);
  if (nd < 0 || nd > 300) return Unknown(e, "round() to " + std::to_string(nd) + " digits");
  // printf's %.Nf rounds the exact binary value half to even, as CPython's round (via dtoa).
  std::vector<char> buffer(static_cast<size_t>(nd) + 400);
  std::snprintf(buffer.data(), buffer.size(), "%.*f", static_cast<int>(nd), *d);
  return Make(std::strtod(buffer.data(), nullptr), e);
}

ConfigValue Evaluator::Range(const Expr& e, const std::vector<ConfigValue>& pos) {
  if (pos.empty() || pos.size() > 3)
    Fail(e, pos.empty() ? "range() needs at least 1 argument" : "range() takes at most 3 arguments");
  std::vector<int64_t> args;
  for (size_t i = 0; i < pos.size(); ++i) {
    if (!IsIntLike(pos[i])) {
      Fail(*e.items[i + 1], std::string("range() needs ints, found ") + ConfigValue::KindName(pos[i].kind()));
    }
    args.push_back(IntOf(pos[i]));
  }
  const int64_t start = args.size() == 1 ? 0 : args[0];
  const int64_t stop = args.size() == 1 ? args[0] : args[1];
  const int64_t step = args.size() == 3 ? args[2] : 1;
  if (step == 0) Fail(e, "range() arg 3 must not be zero");
  __int128 count = 0;
  if (step > 0 && stop > start) count = (static_cast<__int128>(stop) - start + step - 1) / step;
  if (step < 0 && stop < start) count = (static_cast<__int128>(start) - stop - step - 1) / -step;
  if (count > kMaxRangeLength) {
    Fail(e, "range() of more than " + std::to_string(kMaxRangeLength) + " ints (petrsim's limit)");
  }
  budget_->Charge(static_cast<size_t>(count), 0, At(e));
  ConfigList list;
  list.items.reserve(static_cast<size_t>(count));
  const std::string where = Where(e.line);
  for (__int128 i = 0; i < count; ++i) {
    ConfigValue v;
    v.value = static_cast<int64_t>(start + i * step);
    v.where = where;
    list.items.push_back(std::move(v));
  }
  return Make(std::move(list), e);
}

}  // namespace petrsim::pyconfig::evaluator_internal
