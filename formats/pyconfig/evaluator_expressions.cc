// The config evaluator's expressions (evaluator_internal.h): names' values by kind, displays,
// comprehensions and generators, attributes, subscripts and slices.
#include "formats/pyconfig/evaluator_internal.h"

#include <limits>
#include <unordered_map>

#include "base/assert.h"

namespace petrsim::pyconfig::evaluator_internal {

// A module or a function stays one only through a plain name (or a lambda): whatever is computed
// from it is another value, which mmcv keeps in the dict.
ConfigValue Evaluator::Eval(const Expr& e) {
  ConfigValue v = EvalExpression(e);
  if (e.kind != ExprKind::kName && e.kind != ExprKind::kLambda) {
    if (auto* unknown = std::get_if<ConfigUnknown>(&v.value)) unknown->module_or_function = false;
  }
  return v;
}

// One expression by its kind; the kinds with more than a line or two have their own functions.
ConfigValue Evaluator::EvalExpression(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConstant:
      if (std::optional<ConfigValue> constant = EvalConstant(e)) return std::move(*constant);
      break;
    case ExprKind::kName:
      return EvalName(e);
    case ExprKind::kBaseRef:
      return Make(PlaceholderMarker() + e.text + "}}", e);
    case ExprKind::kAttribute:
      return Attribute(e);
    case ExprKind::kSubscript:
      return Subscript(e);
    case ExprKind::kSlice:
      return Unknown(e, "a slice outside a subscript");
    case ExprKind::kCall:
      return Call(e);
    case ExprKind::kStarred:
      Fail(e, "can't use starred expression here (a Python SyntaxError)");
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kSet:
      return Display(e);
    case ExprKind::kSetComp:
      return Unknown(e, "a set comprehension");
    case ExprKind::kDict:
      return DictDisplay(e);
    case ExprKind::kBinOp: {
      ConfigValue a = Eval(*e.items[0]);
      ConfigValue b = Eval(*e.items[1]);
      return Binary(e, e.text, std::move(a), std::move(b));
    }
    case ExprKind::kUnaryOp:
      return Unary(e, Eval(*e.items[0]));
    case ExprKind::kBoolOp:
      return BoolOp(e);
    case ExprKind::kCompare:
      return CompareChain(e);
    case ExprKind::kIfExp: {
      ConfigValue test = Eval(*e.items[0]);
      const std::optional<bool> truth = test.Truth();
      if (!truth) return test;
      return Eval(*e.items[*truth ? 1 : 2]);
    }
    case ExprKind::kListComp:
    case ExprKind::kDictComp:
      return EvalComprehension(e);
    case ExprKind::kGeneratorExp:
      return Unknown(e, "a generator expression");
    case ExprKind::kLambda:
      return Unknown(e, "a lambda", true);
    case ExprKind::kJoinedStr:
      return JoinedStr(e);
    case ExprKind::kFormattedValue:
      return Unknown(e, "a formatted value outside an f-string");
    case ExprKind::kNamedExpr: {
      ConfigValue v = Eval(*e.items[1]);
      Bind(e.items[0]->text, v, e.line, e.col);
      return v;
    }
    case ExprKind::kYield:
    case ExprKind::kYieldFrom:
      Fail(e, std::string("a yield expression") + kUnsupportedTail);
    case ExprKind::kAwait:
      Fail(e, std::string("an await expression") + kUnsupportedTail);
  }
  return Unknown(e, "an expression");
}

// A literal; nullopt for a constant kind the switch does not name (EvalExpression's fallback).
std::optional<ConfigValue> Evaluator::EvalConstant(const Expr& e) {
  switch (e.constant.kind) {
    case Constant::Kind::kNone:
      return Make(std::monostate{}, e);
    case Constant::Kind::kBool:
      return Make(e.constant.bool_value, e);
    case Constant::Kind::kInt:
      return Make(e.constant.int_value, e);
    case Constant::Kind::kFloat:
      return Make(e.constant.float_value, e);
    case Constant::Kind::kString:
      return Make(e.constant.text, e);
    case Constant::Kind::kBytes:
      return Unknown(e, "a bytes literal");
    case Constant::Kind::kEllipsis:
      return Unknown(e, "an Ellipsis ('...')");
    case Constant::Kind::kImaginary:
      return Unknown(e, "a complex number");
  }
  return std::nullopt;
}

// A list, tuple or set display (a set is evaluated for Python's errors inside, then unknown).
ConfigValue Evaluator::Display(const Expr& e) {
  std::vector<ConfigValue> items;
  if (auto unknown = Items(e.items, &items)) return std::move(*unknown);
  if (e.kind == ExprKind::kList) return Make(ConfigList{std::move(items)}, e);
  if (e.kind == ExprKind::kTuple) return Make(ConfigTuple{std::move(items)}, e);
  return Unknown(e, "a set literal ('{a, b}')");
}

// `a and b`, `a or b`: the first value that decides, or an unknown test.
ConfigValue Evaluator::BoolOp(const Expr& e) {
  ConfigValue v = Eval(*e.items[0]);
  for (size_t i = 1; i < e.items.size(); ++i) {
    const std::optional<bool> truth = v.Truth();
    if (!truth) return v;
    if (e.text == "and" ? !*truth : *truth) return v;
    v = Eval(*e.items[i]);
  }
  return v;
}

// A list or dict comprehension.
ConfigValue Evaluator::EvalComprehension(const Expr& e) {
  if (e.kind == ExprKind::kListComp) {
    std::vector<ConfigValue> items;
    if (auto unknown = Comprehend(e, &items, nullptr)) return std::move(*unknown);
    return Make(ConfigList{std::move(items)}, e);
  }
  ConfigDictBuilder dict;
  std::vector<ConfigValue> unused;
  if (auto unknown = Comprehend(e, &unused, &dict)) return std::move(*unknown);
  return Make(dict.Take(), e);
}

// Items of a display, with *x spliced; an unknown item that is spliced makes the whole unknown.
std::optional<ConfigValue> Evaluator::Items(const std::vector<ExprPtr>& exprs, std::vector<ConfigValue>* out) {
  for (const ExprPtr& item : exprs) {
    if (item->kind == ExprKind::kStarred) {
      ConfigValue v = Eval(*item->items[0]);
      if (v.is_unknown()) return v;
      std::vector<ConfigValue> spliced = Iterate(std::move(v), *item);
      for (ConfigValue& s : spliced) out->push_back(std::move(s));
    } else {
      out->push_back(Eval(*item));
    }
  }
  return std::nullopt;
}

// A dict key: a str, or an int stored as its text.
std::string Evaluator::DictKey(const ConfigValue& key, const Expr& at) {
  if (const std::string* s = key.AsString()) {
    if (HasPlaceholder(*s)) {
      Fail(at, PlaceholderText(*s) + " as a dict key: mmcv substitutes a base's variable only where it is a value");
    }
    return *s;
  }
  if (const int64_t* i = key.AsInt()) return std::to_string(*i);
  if (const bool* b = key.AsBool()) return *b ? "1" : "0";
  Fail(at,
       std::string("a dict key that is ") + ConfigValue::KindName(key.kind()) + " (petrsim reads str and int keys)");
}

ConfigValue Evaluator::DictDisplay(const Expr& e) {
  ConfigDictBuilder dict;
  std::unordered_map<std::string, bool> is_int;
  for (size_t i = 0; i < e.values.size(); ++i) {
    if (!e.items[i]) {
      ConfigValue from = Eval(*e.values[i]);
      if (from.is_unknown()) return from;
      Splice(e.unpack_at[i].first, e.unpack_at[i].second, std::move(from), &dict, false);
      continue;
    }
    ConfigValue key = Eval(*e.items[i]);
    if (key.is_unknown()) return key;
    ConfigValue value = Eval(*e.values[i]);
    const std::string text = DictKey(key, *e.items[i]);
    const bool integer = key.AsInt() != nullptr;
    const auto [it, inserted] = is_int.emplace(text, integer);
    if (!inserted && it->second != integer) {
      Fail(*e.items[i], "the keys " + text + " and '" + text + "' in one dict (petrsim stores an int key as its text)");
    }
    dict.Set(text, std::move(value));
  }
  return Make(dict.Take(), e);
}

void Evaluator::Splice(int line, int col, ConfigValue from, ConfigDictBuilder* into, bool call) {
  ConfigDict* dict = std::get_if<ConfigDict>(&from.value);
  if (dict == nullptr) {
    const std::string* s = from.AsString();
    if (s != nullptr && HasPlaceholder(*s)) {
      Fail(line, col,
           "**" + PlaceholderText(*s) +
               ": mmcv substitutes a base's variable only as a whole value (here it would still be its "
               "placeholder string)");
    }
    Fail(line, col, std::string("'**' needs a dict, found ") + ConfigValue::KindName(from.kind()));
  }
  for (auto& [key, value] : dict->entries) {
    if (call && into->Get(key) != nullptr) {
      Fail(line, col, "dict() got multiple values for keyword argument '" + key + "' (Python raises TypeError)");
    }
    into->Set(key, std::move(value));
  }
}

// The items of an iterable value: a list's or tuple's items, a str's characters, a dict's keys.
std::vector<ConfigValue> Evaluator::Iterate(ConfigValue v, const Expr& at) {
  if (auto* items = MutableSequence(&v)) return std::move(*items);
  if (const std::string* s = v.AsString()) {
    std::vector<ConfigValue> out;
    for (std::string& c : CodePoints(*s)) out.push_back(Make(std::move(c), at));
    return out;
  }
  if (const ConfigDict* dict = v.AsDict()) {
    std::vector<ConfigValue> out;
    for (const auto& entry : dict->entries) out.push_back(Make(entry.key, at));
    return out;
  }
  Fail(at, std::string("'") + PyType(v) + "' object is not iterable (Python raises TypeError)");
}

// A comprehension: its items (or, with `dict`, its entries); an unknown iterable or condition
// makes the whole unknown.
std::optional<ConfigValue> Evaluator::Comprehend(const Expr& e, std::vector<ConfigValue>* out,
                                                 ConfigDictBuilder* dict) {
  const size_t depth = frames_.size();
  frames_.emplace_back();
  std::optional<ConfigValue> unknown = Generate(e, 0, out, dict);
  // Generate binds in the frame only while it assigns a target, and nested comprehensions pop
  // their own frames.
  PETRSIM_ASSERT(!frame_binds_);
  PETRSIM_ASSERT(frames_.size() == depth + 1);
  frames_.pop_back();
  return unknown;
}

std::optional<ConfigValue> Evaluator::Generate(const Expr& e, size_t level, std::vector<ConfigValue>* out,
                                               ConfigDictBuilder* dict) {
  if (level == e.generators.size()) {
    if (dict != nullptr) {
      ConfigValue key = Eval(*e.items[0]);
      if (key.is_unknown()) return key;
      ConfigValue value = Eval(*e.items[1]);
      dict->Set(DictKey(key, *e.items[0]), std::move(value));
    } else {
      out->push_back(Eval(*e.items[0]));
    }
    return std::nullopt;
  }
  const Comprehension& c = e.generators[level];
  if (c.is_async) return Unknown(e, "an async comprehension");
  ConfigValue iterable = Eval(*c.iter);
  if (iterable.is_unknown()) return iterable;
  std::vector<ConfigValue> items = Iterate(std::move(iterable), *c.iter);
  for (ConfigValue& item : items) {
    budget_->Charge(1, 0, At(e));
    frame_binds_ = true;
    Assign(*c.target, std::move(item));
    frame_binds_ = false;
    bool keep = true;
    for (const ExprPtr& cond : c.ifs) {
      ConfigValue test = Eval(*cond);
      const std::optional<bool> truth = test.Truth();
      if (!truth) return test;
      if (!*truth) {
        keep = false;
        break;
      }
    }
    if (!keep) continue;
    if (auto unknown = Generate(e, level + 1, out, dict)) return unknown;
  }
  return std::nullopt;
}

ConfigValue Evaluator::Attribute(const Expr& e) {
  const Expr& object = *e.items[0];
  if (object.kind == ExprKind::kName && object.text == "_base_" &&
      (Lookup("_base_") == nullptr || !Lookup("_base_")->AsDict())) {
    Fail(object, "attribute access ('" + Dotted(e) + "')" + kUnsupportedTail +
                     "; mmcv 1.x reads a base file's variable as {{" + Dotted(e) + "}}");
  }
  ConfigValue v = Eval(object);
  if (v.is_unknown()) return v;
  return Unknown(e, "attribute access ('" + Dotted(e) + "')");
}

// A name or attribute chain's text ("np.array"), or "..." for another expression.
std::string Evaluator::Dotted(const Expr& e) {
  if (e.kind == ExprKind::kName) return e.text;
  if (e.kind == ExprKind::kAttribute) return Dotted(*e.items[0]) + "." + e.text;
  return "(...)";
}

ConfigValue Evaluator::Subscript(const Expr& e) {
  ConfigValue object = Eval(*e.items[0]);
  if (object.is_unknown()) return object;
  const Expr& index = *e.items[1];
  if (index.kind == ExprKind::kSlice) {
    std::optional<int64_t> bounds[3];
    for (int k = 0; k < 3; ++k) {
      if (!index.items[static_cast<size_t>(k)]) continue;
      ConfigValue b = Eval(*index.items[static_cast<size_t>(k)]);
      if (b.is_unknown()) return b;
      if (b.is_none()) continue;
      if (!IsIntLike(b)) {
        Fail(*index.items[static_cast<size_t>(k)],
             std::string("slice indices must be integers or None, found ") + PyType(b) + " (Python raises TypeError)");
      }
      bounds[k] = IntOf(b);
    }
    return Slice(e, std::move(object), bounds[0], bounds[1], bounds[2]);
  }
  ConfigValue key = Eval(index);
  if (key.is_unknown()) return key;
  if (const ConfigDict* dict = object.AsDict()) {
    if (!key.AsString() && !IsIntLike(key)) {
      Fail(index, std::string("a dict key that is ") + ConfigValue::KindName(key.kind()) +
                      " (petrsim reads str and int keys)");
    }
    const ConfigValue* found = dict->Get(DictKey(key, index));
    if (found == nullptr) Fail(index, "KeyError: " + key.Repr() + " (the dict has no such key)");
    return Copy(*found, e);
  }
  if (const auto* items = object.AsSequence()) {
    if (!IsIntLike(key)) {
      Fail(index, std::string(PyType(object)) + " indices must be integers or slices, not " + PyType(key) +
                      " (Python raises TypeError)");
    }
    ConfigValue out = std::move((*MutableSequence(&object))[Index(IntOf(key), items->size(), index)]);
    return out;
  }
  if (const std::string* s = object.AsString()) {
    if (!IsIntLike(key)) Fail(index, std::string("string indices must be integers, not ") + PyType(key));
    std::vector<std::string> chars = CodePoints(*s);
    return Make(std::move(chars[Index(IntOf(key), chars.size(), index)]), e);
  }
  Fail(e, std::string("'") + PyType(object) + "' object is not subscriptable (Python raises TypeError)");
}

// Python's slice.indices and the items it picks.
ConfigValue Evaluator::Slice(const Expr& e, ConfigValue object, std::optional<int64_t> start,
                             std::optional<int64_t> stop, std::optional<int64_t> step_given) {
  const int64_t step = step_given.value_or(1);
  if (step == 0) Fail(e, "slice step cannot be zero (Python raises ValueError)");
  std::vector<std::string> chars;
  const std::string* s = object.AsString();
  if (s != nullptr) {
    chars = CodePoints(*s);
  } else if (object.AsSequence() == nullptr) {
    Fail(e, std::string("'") + PyType(object) + "' object is not subscriptable (Python raises TypeError)");
  }
  const int64_t n = static_cast<int64_t>(s != nullptr ? chars.size() : object.AsSequence()->size());
  auto adjust = [&](std::optional<int64_t> v, int64_t lower, int64_t upper, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t lo = step < 0 ? -1 : 0;
  const int64_t hi = step < 0 ? n - 1 : n;
  const int64_t first = adjust(start, lo, hi, step < 0 ? hi : lo);
  const int64_t last = adjust(stop, lo, hi, step < 0 ? lo : hi);
  std::vector<size_t> picked;
  for (int64_t i = first; step > 0 ? i < last : i > last; i += step) {
    picked.push_back(static_cast<size_t>(i));
    if (step > 0 ? i > std::numeric_limits<int64_t>::max() - step : i < std::numeric_limits<int64_t>::min() - step) {
      break;
    }
  }
  if (s != nullptr) {
    std::string out;
    for (const size_t i : picked) out += chars[i];
    return Make(std::move(out), e);
  }
  auto& items = *MutableSequence(&object);
  std::vector<ConfigValue> out;
  out.reserve(picked.size());
  for (const size_t i : picked) out.push_back(items[i]);
  budget_->Charge(picked.size(), 0, At(e));
  if (object.kind() == Kind::kList) return Make(ConfigList{std::move(out)}, e);
  return Make(ConfigTuple{std::move(out)}, e);
}

}  // namespace petrsim::pyconfig::evaluator_internal
