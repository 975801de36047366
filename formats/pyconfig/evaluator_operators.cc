// The config evaluator's operators (evaluator_internal.h), with Python's semantics: orderings,
// equality and comparison chains; unary, binary, bitwise and numeric arithmetic.
#include "formats/pyconfig/evaluator_internal.h"

#include <cmath>
#include <limits>
#include <unordered_set>

#include "formats/pyconfig/limits.h"

namespace petrsim::pyconfig::evaluator_internal {

// -1, 0, 1 for a Python ordering of two known values, or nullopt when Python has none.
std::optional<int> Evaluator::Order(const ConfigValue& a, const ConfigValue& b) const {
  if (IsNumeric(a) && IsNumeric(b)) {
    if (IsIntLike(a) && IsIntLike(b)) {
      const int64_t x = IntOf(a);
      const int64_t y = IntOf(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const double x = FloatOf(a);
    const double y = FloatOf(b);
    if (std::isnan(x) || std::isnan(y)) return 2;  // unordered: every comparison false but !=
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.AsString() && b.AsString()) {
    const int c = a.AsString()->compare(*b.AsString());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.kind() == b.kind() && a.AsSequence() != nullptr) {
    const auto& x = *a.AsSequence();
    const auto& y = *b.AsSequence();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Order(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return std::nullopt;
}

bool Evaluator::Equal(const ConfigValue& a, const ConfigValue& b) const {
  if (IsNumeric(a) && IsNumeric(b)) {
    if (IsIntLike(a) && IsIntLike(b)) return IntOf(a) == IntOf(b);
    return FloatOf(a) == FloatOf(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kNone:
      return true;
    case Kind::kString:
      return *a.AsString() == *b.AsString();
    case Kind::kList:
    case Kind::kTuple: {
      const auto& x = *a.AsSequence();
      const auto& y = *b.AsSequence();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const auto& x = a.AsDict()->entries;
      const ConfigDict& y = *b.AsDict();
      if (x.size() != y.entries.size()) return false;
      for (const auto& entry : x) {
        const ConfigValue* other = y.Get(entry.key);
        if (other == nullptr || !Equal(entry.value, *other)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

ConfigValue Evaluator::CompareChain(const Expr& e) {
  ConfigValue left = Eval(*e.items[0]);
  ConfigValue result;
  for (size_t i = 0; i < e.ops.size(); ++i) {
    ConfigValue right = Eval(*e.items[i + 1]);
    if (HasUnknown(left)) return *FindUnknown(left);
    if (HasUnknown(right)) return *FindUnknown(right);
    const std::string& op = e.ops[i];
    std::optional<bool> r;
    if (op == "==" || op == "!=") {
      const bool eq = Equal(left, right);
      r = op == "==" ? eq : !eq;
    } else if (op == "is" || op == "is not") {
      const bool singleton = left.is_none() || right.is_none() || (left.AsBool() && right.AsBool());
      if (!singleton) return Unknown(e, "an identity comparison ('" + op + "') of values that are not None");
      const bool same = left.kind() == right.kind() && Equal(left, right);
      r = op == "is" ? same : !same;
    } else if (op == "in" || op == "not in") {
      bool found = false;
      if (const std::string* s = right.AsString()) {
        if (!left.AsString()) {
          Fail(e.op_line, e.op_col, "'in <string>' requires string as left operand (Python raises TypeError)");
        }
        found = s->find(*left.AsString()) != std::string::npos;
      } else if (const auto* items = right.AsSequence()) {
        for (const ConfigValue& item : *items) found = found || Equal(left, item);
      } else if (const ConfigDict* dict = right.AsDict()) {
        if (left.AsString() || IsIntLike(left)) found = dict->Get(DictKey(left, e)) != nullptr;
      } else {
        Fail(e.op_line, e.op_col,
             std::string("argument of type '") + PyType(right) + "' is not iterable (Python raises TypeError)");
      }
      r = op == "in" ? found : !found;
    } else {
      const std::optional<int> order = Order(left, right);
      if (!order) {
        Fail(e.op_line, e.op_col,
             "'" + op + "' not supported between instances of '" + PyType(left) + "' and '" + PyType(right) +
                 "' (Python raises TypeError)");
      }
      const int o = *order;
      if (o == 2) {
        r = false;
      } else {
        r = op == "<" ? o < 0 : op == "<=" ? o <= 0 : op == ">" ? o > 0 : o >= 0;
      }
    }
    if (!*r) return Make(false, e);
    left = std::move(right);
  }
  return Make(true, e);
}

void Evaluator::ZeroDivision(const Expr& op, const char* what) const {
  FailOp(op, std::string(what) + " (Python raises ZeroDivisionError)");
}

void Evaluator::Overflow(const Expr& op, const std::string& o) const {
  FailOp(op, "integer overflow in '" + o + "' (petrsim reads 64-bit integers; Python's grow)");
}

void Evaluator::TypeError(const Expr& op, const std::string& o, const ConfigValue& a, const ConfigValue& b) const {
  FailOp(op, "unsupported operand types for '" + o + "': '" + PyType(a) + "' and '" + PyType(b) +
                 "' (Python raises TypeError)");
}

void Evaluator::CheckPlaceholderOperand(const Expr& op, const std::string& o, const ConfigValue& v) const {
  const std::string* s = v.AsString();
  if (s != nullptr && HasPlaceholder(*s)) {
    FailOp(op, PlaceholderText(*s) + " is an operand of '" + o +
                   "': mmcv substitutes a base's variable only as a whole value (here it would still be its "
                   "placeholder string)");
  }
}

ConfigValue Evaluator::Unary(const Expr& e, ConfigValue v) {
  if (v.is_unknown()) return v;
  const std::string& o = e.text;
  if (o == "not") {
    if (HasUnknown(v) && v.AsSequence() == nullptr && v.AsDict() == nullptr) return *FindUnknown(v);
    return Make(!v.Truthy(), e);
  }
  CheckPlaceholderOperand(e, o, v);
  if (!IsNumeric(v) || (o == "~" && !IsIntLike(v))) {
    FailOp(e, "bad operand type for unary " + o + ": '" + PyType(v) + "' (Python raises TypeError)");
  }
  budget_->Charge(1, 0, At(e));
  ConfigValue out;
  out.where = Where(e.line);
  if (const double* d = v.AsFloat()) {
    out.value = o == "-" ? -*d : *d;
  } else {
    const int64_t i = IntOf(v);
    if (o == "-" && i == std::numeric_limits<int64_t>::min()) Overflow(e, o);
    out.value = o == "-" ? -i : o == "~" ? ~i : i;
  }
  return out;
}

ConfigValue Evaluator::Binary(const Expr& e, const std::string& o, ConfigValue a, ConfigValue b) {
  if (a.is_unknown()) return a;
  if (b.is_unknown()) return b;
  CheckPlaceholderOperand(e, o, a);
  CheckPlaceholderOperand(e, o, b);
  ConfigValue out;
  out.where = Where(e.line);
  if (IsNumeric(a) && IsNumeric(b)) {
    static const std::unordered_set<std::string> kBitwise = {"<<", ">>", "&", "|", "^"};
    if (kBitwise.count(o) > 0) {
      Bitwise(e, o, a, b, &out);
    } else if (o == "@") {
      TypeError(e, o, a, b);
    } else if (IsIntLike(a) && IsIntLike(b) && o == "**") {
      IntPower(e, o, IntOf(a), IntOf(b), &out);
    } else if (IsIntLike(a) && IsIntLike(b) && o != "/") {
      out.value = IntOp(e, o, IntOf(a), IntOf(b));
    } else {
      out.value = FloatOp(e, o, FloatOf(a), FloatOf(b));
    }
    budget_->Charge(1, 0, At(e));
    return out;
  }
  if (o == "+") {
    if (a.kind() == b.kind() && a.kind() == Kind::kString) {
      std::string& s = std::get<std::string>(a.value);
      budget_->Charge(1, s.size() + b.AsString()->size(), At(e));
      s += *b.AsString();
      out.value = std::move(s);
      return out;
    }
    if (a.kind() == b.kind() && (a.kind() == Kind::kList || a.kind() == Kind::kTuple)) {
      auto& left = *MutableSequence(&a);
      for (ConfigValue& item : *MutableSequence(&b)) left.push_back(std::move(item));
      out.value = std::move(a.value);
      budget_->Charge(1, 0, At(e));
      return out;
    }
    TypeError(e, o, a, b);
  }
  if (o == "*") {
    const bool a_seq = a.kind() == Kind::kString || a.AsSequence() != nullptr;
    const bool b_seq = b.kind() == Kind::kString || b.AsSequence() != nullptr;
    if (a_seq && IsIntLike(b)) return Repeat(e, std::move(a), IntOf(b), out.where);
    if (b_seq && IsIntLike(a)) return Repeat(e, std::move(b), IntOf(a), out.where);
    TypeError(e, o, a, b);
  }
  if (o == "%" && a.kind() == Kind::kString) return Unknown(e.op_line, e.op_col, "string formatting with '%'");
  if (o == "|" && a.AsDict() && b.AsDict()) {
    ConfigDictBuilder merged;
    for (auto& entry : std::get<ConfigDict>(a.value).entries) merged.Set(entry.key, std::move(entry.value));
    for (auto& entry : std::get<ConfigDict>(b.value).entries) merged.Set(entry.key, std::move(entry.value));
    budget_->Charge(1, 0, At(e));
    out.value = merged.Take();
    return out;
  }
  TypeError(e, o, a, b);
}

// <<, >>, &, |, ^ on ints and bools (two bools give a bool, as in Python, except for shifts).
void Evaluator::Bitwise(const Expr& e, const std::string& o, const ConfigValue& a, const ConfigValue& b,
                        ConfigValue* out) {
  if (!IsIntLike(a) || !IsIntLike(b)) TypeError(e, o, a, b);
  const int64_t x = IntOf(a);
  const int64_t y = IntOf(b);
  int64_t r = 0;
  if (o == "&") r = x & y;
  if (o == "|") r = x | y;
  if (o == "^") r = x ^ y;
  if (o == "<<" || o == ">>") {
    if (y < 0) FailOp(e, "negative shift count (Python raises ValueError)");
    if (o == ">>") {
      r = y >= 63 ? (x < 0 ? -1 : 0) : x >> y;
    } else {
      if (x != 0 && (y >= 63 || (x > 0 ? x > (std::numeric_limits<int64_t>::max() >> y)
                                       : x < (std::numeric_limits<int64_t>::min() >> y)))) {
        Overflow(e, o);
      }
      r = static_cast<int64_t>(static_cast<uint64_t>(x) << y);
    }
  }
  if (a.AsBool() && b.AsBool() && o != "<<" && o != ">>") {
    out->value = r != 0;
  } else {
    out->value = r;
  }
}

ConfigValue Evaluator::Repeat(const Expr& e, ConfigValue seq, int64_t times, const std::string& where) {
  if (times < 0) times = 0;
  size_t nodes = 0;
  size_t bytes = 0;
  Measure(seq, &nodes, &bytes);
  const size_t each_nodes = nodes - 1;  // the container itself is not repeated
  const size_t each_bytes = bytes;
  const auto n = static_cast<uint64_t>(times);
  const std::string at = Location(path_, e.op_line, e.op_col);
  // Checked before multiplying (n can be near 2**63); Charge reports the limit.
  if (each_nodes > 0 && n > budget_->nodes_left() / each_nodes) budget_->Charge(kMaxNodes + 1, 0, at);
  if (each_bytes > 0 && n > budget_->bytes_left() / each_bytes) budget_->Charge(0, kMaxStringBytes + 1, at);
  budget_->Charge(each_nodes * n, each_bytes * n, at);
  ConfigValue out;
  out.where = where;
  if (std::string* s = std::get_if<std::string>(&seq.value)) {
    std::string text;
    text.reserve(s->size() * n);
    for (uint64_t i = 0; i < n; ++i) text += *s;
    out.value = std::move(text);
    return out;
  }
  auto& items = *MutableSequence(&seq);
  std::vector<ConfigValue> repeated;
  repeated.reserve(items.size() * n);
  for (uint64_t i = 0; i < n; ++i) repeated.insert(repeated.end(), items.begin(), items.end());
  items = std::move(repeated);
  out.value = std::move(seq.value);
  return out;
}

int64_t Evaluator::IntOp(const Expr& e, const std::string& o, int64_t x, int64_t y) const {
  int64_t r = 0;
  if (o == "+") {
    if (__builtin_add_overflow(x, y, &r)) Overflow(e, o);
    return r;
  }
  if (o == "-") {
    if (__builtin_sub_overflow(x, y, &r)) Overflow(e, o);
    return r;
  }
  if (o == "*") {
    if (__builtin_mul_overflow(x, y, &r)) Overflow(e, o);
    return r;
  }
  if (o == "//") {
    if (y == 0) ZeroDivision(e, "integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) Overflow(e, o);
    int64_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) --q;
    return q;
  }
  if (o == "%") {
    if (y == 0) ZeroDivision(e, "integer division or modulo by zero");
    if (y == -1) return 0;
    r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  }
  FailOp(e, "internal: no integer operator '" + o + "'");
}

void Evaluator::IntPower(const Expr& e, const std::string& o, int64_t x, int64_t y, ConfigValue* out) const {
  if (y < 0) {
    if (x == 0) ZeroDivision(e, "0.0 cannot be raised to a negative power");
    out->value = std::pow(static_cast<double>(x), static_cast<double>(y));
    return;
  }
  int64_t result = 1;
  int64_t base = x;
  int64_t p = y;
  while (p > 0) {
    if (p & 1) {
      if (__builtin_mul_overflow(result, base, &result)) Overflow(e, o);
    }
    p >>= 1;
    if (p > 0 && __builtin_mul_overflow(base, base, &base)) Overflow(e, o);
  }
  out->value = result;
}

double Evaluator::FloatOp(const Expr& e, const std::string& o, double x, double y) const {
  if (o == "+") return x + y;
  if (o == "-") return x - y;
  if (o == "*") return x * y;
  if (o == "/") {
    if (y == 0) ZeroDivision(e, "division by zero");
    return x / y;
  }
  if (o == "//" || o == "%") {
    if (y == 0) ZeroDivision(e, o == "%" ? "float modulo" : "float floor division by zero");
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
    if (x == 0 && y < 0) ZeroDivision(e, "0.0 cannot be raised to a negative power");
    if (x < 0 && std::isfinite(x) && std::isfinite(y) && y != std::floor(y)) {
      FailOp(e, "a negative number to a fractional power: Python's result is a complex number");
    }
    const double r = std::pow(x, y);
    if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
      FailOp(e, "float overflow in '**' (Python raises OverflowError)");
    }
    return r;
  }
  TypeError(e, o, ConfigValue{x, ""}, ConfigValue{y, ""});
}

}  // namespace petrsim::pyconfig::evaluator_internal
