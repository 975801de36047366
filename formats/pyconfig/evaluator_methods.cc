// The config evaluator's methods of known values (evaluator_internal.h): str, list and dict
// methods, and the calls that change a named list or dict.
#include "formats/pyconfig/evaluator_internal.h"

#include <algorithm>

#include "base/assert.h"

namespace petrsim::pyconfig::evaluator_internal {

ConfigValue Evaluator::Method(const Expr& e, const std::string& name, ConfigValue object) {
  Args args;
  if (auto unknown = EvalArgs(e, &args)) return std::move(*unknown);
  auto& pos = args.positional;
  const size_t n = pos.size();
  if (const std::string* s = object.AsString()) {
    if (name == "format") {
      std::optional<std::string> out = StrFormat(*s, pos, args.keywords, e);
      if (!out) {
        if (const ConfigValue* u = UnknownArg(args)) return *u;
        return Unknown(e, "a call of method 'format' with a field petrsim does not read");
      }
      return Make(std::move(*out), e);
    }
    if (const ConfigValue* u = UnknownArg(args)) return *u;
    if (!args.keywords.empty() && name != "split" && name != "rsplit") {
      return Unknown(e, "a call of method '" + name + "' with keyword arguments");
    }
    auto str_arg = [&](size_t i) -> const std::string& {
      if (i >= n || !pos[i].AsString()) {
        Fail(e, "str." + name + "() needs a string argument (Python raises TypeError)");
      }
      return *pos[i].AsString();
    };
    if (name == "join") {
      if (n != 1) ArgCount(e, "str.join", "exactly one argument");
      std::string out;
      bool first = true;
      for (const ConfigValue& item : Iterate(std::move(pos[0]), e)) {
        if (!item.AsString()) {
          Fail(e, std::string("sequence item: expected str instance, ") + PyType(item) +
                      " found (Python raises TypeError)");
        }
        if (!first) out += *s;
        first = false;
        out += *item.AsString();
      }
      return Make(std::move(out), e);
    }
    if (name == "upper" || name == "lower") {
      std::string out = *s;
      for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x80) {
          c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                : std::tolower(static_cast<unsigned char>(c)));
        }
      }
      if (std::any_of(s->begin(), s->end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
        return Unknown(e, "a call of method '" + name + "' on non-ASCII text");
      }
      return Make(std::move(out), e);
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      if (n > 1) ArgCount(e, "str." + name, "at most 1 argument");
      const bool whitespace = n == 0 || pos[0].is_none();
      const std::string chars = whitespace ? std::string(" \t\n\r\f\v") : str_arg(0);
      if (std::any_of(chars.begin(), chars.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }) ||
          std::any_of(s->begin(), s->end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
        return Unknown(e, "a call of method '" + name + "' on non-ASCII text");
      }
      size_t b = name == "rstrip" ? 0 : s->find_first_not_of(chars);
      if (b == std::string::npos) return Make(std::string(), e);
      size_t end = name == "lstrip" ? s->size() : s->find_last_not_of(chars) + 1;
      return Make(s->substr(b, end - b), e);
    }
    if (name == "startswith" || name == "endswith") {
      if (n != 1) return Unknown(e, "a call of method '" + name + "' with start/end");
      std::vector<std::string> options;
      if (const auto* items = pos[0].AsSequence(); items != nullptr && pos[0].kind() == Kind::kTuple) {
        for (const ConfigValue& item : *items) {
          if (!item.AsString()) Fail(e, "a tuple for " + name + " must only contain str");
          options.push_back(*item.AsString());
        }
      } else {
        options.push_back(str_arg(0));
      }
      bool result = false;
      for (const std::string& o : options) {
        result = result ||
                 (name == "startswith" ? s->compare(0, o.size(), o) == 0 && s->size() >= o.size()
                                       : s->size() >= o.size() && s->compare(s->size() - o.size(), o.size(), o) == 0);
      }
      return Make(result, e);
    }
    if (name == "replace") {
      if (n < 2 || n > 3) ArgCount(e, "str.replace", "2 or 3 arguments");
      const std::string& from = str_arg(0);
      const std::string& to = str_arg(1);
      int64_t count = n == 3 && IsIntLike(pos[2]) ? IntOf(pos[2]) : -1;
      if (from.empty()) return Unknown(e, "a call of method 'replace' with an empty pattern");
      std::string out;
      size_t p = 0;
      while (count != 0) {
        const size_t at = s->find(from, p);
        if (at == std::string::npos) break;
        out.append(*s, p, at - p);
        out += to;
        p = at + from.size();
        budget_->Charge(0, to.size(), At(e));
        if (count > 0) --count;
      }
      out.append(*s, p);
      return Make(std::move(out), e);
    }
    if (name == "split" || name == "rsplit") {
      const ConfigValue* sep_value = n >= 1 ? &pos[0] : KeywordArg(args, "sep");
      const ConfigValue* max_value = n >= 2 ? &pos[1] : KeywordArg(args, "maxsplit");
      int64_t maxsplit = max_value != nullptr && IsIntLike(*max_value) ? IntOf(*max_value) : -1;
      std::vector<std::string> parts;
      if (sep_value == nullptr || sep_value->is_none()) {
        if (name == "rsplit" && maxsplit >= 0) return Unknown(e, "a call of method 'rsplit' with maxsplit");
        const std::string ws = " \t\n\r\f\v";
        size_t p = s->find_first_not_of(ws);
        while (p != std::string::npos) {
          if (maxsplit == 0) {
            const size_t end = s->find_last_not_of(ws);
            parts.push_back(s->substr(p, end + 1 - p));
            break;
          }
          size_t end = s->find_first_of(ws, p);
          parts.push_back(s->substr(p, end == std::string::npos ? std::string::npos : end - p));
          if (maxsplit > 0) --maxsplit;
          p = end == std::string::npos ? end : s->find_first_not_of(ws, end);
        }
      } else {
        if (!sep_value->AsString()) Fail(e, "must be str or None (Python raises TypeError)");
        const std::string& sep = *sep_value->AsString();
        if (sep.empty()) Fail(e, "empty separator (Python raises ValueError)");
        if (name == "rsplit" && maxsplit >= 0) {
          size_t end = s->size();
          std::vector<std::string> reversed;
          while (maxsplit != 0) {
            const size_t at = end >= sep.size() ? s->rfind(sep, end - sep.size()) : std::string::npos;
            if (at == std::string::npos) break;
            reversed.push_back(s->substr(at + sep.size(), end - at - sep.size()));
            end = at;
            --maxsplit;
          }
          reversed.push_back(s->substr(0, end));
          parts.assign(reversed.rbegin(), reversed.rend());
        } else {
          size_t p = 0;
          while (true) {
            const size_t at = maxsplit == 0 ? std::string::npos : s->find(sep, p);
            if (at == std::string::npos) {
              parts.push_back(s->substr(p));
              break;
            }
            parts.push_back(s->substr(p, at - p));
            p = at + sep.size();
            if (maxsplit > 0) --maxsplit;
          }
        }
      }
      ConfigList list;
      for (std::string& part : parts) list.items.push_back(Make(std::move(part), e));
      return Make(std::move(list), e);
    }
    if (name == "count" || name == "find" || name == "index") {
      if (n != 1) return Unknown(e, "a call of method '" + name + "' with start/end");
      const std::string& sub = str_arg(0);
      if (name == "count") {
        if (sub.empty()) return Make(static_cast<int64_t>(CodePointCount(*s) + 1), e);
        int64_t count = 0;
        for (size_t p = s->find(sub); p != std::string::npos; p = s->find(sub, p + sub.size())) ++count;
        return Make(count, e);
      }
      const size_t at = s->find(sub);
      if (at == std::string::npos) {
        if (name == "index") Fail(e, "substring not found (Python raises ValueError)");
        return Make(int64_t{-1}, e);
      }
      return Make(static_cast<int64_t>(CodePointCount(s->substr(0, at))), e);
    }
    return Unknown(e, "a call of method '" + name + "'");
  }
  if (const ConfigValue* u = UnknownArg(args); u != nullptr && name != "get") return *u;
  if (object.AsSequence() != nullptr) {
    auto& items = *MutableSequence(&object);
    if (name == "index" || name == "count") {
      if (n != 1) return Unknown(e, "a call of method '" + name + "' with start/end");
      if (FindUnknown(object) != nullptr) return *FindUnknown(object);
      int64_t count = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (Equal(items[i], pos[0])) {
          if (name == "index") return Make(static_cast<int64_t>(i), e);
          ++count;
        }
      }
      if (name == "index") Fail(e, pos[0].Repr() + " is not in " + PyType(object) + " (Python raises ValueError)");
      return Make(count, e);
    }
    if (name == "copy" && object.kind() == Kind::kList && n == 0) return object;
    return Unknown(e, "a call of method '" + name + "'");
  }
  if (ConfigDict* dict = std::get_if<ConfigDict>(&object.value)) {
    if (name == "get") {
      if (n < 1 || n > 2) ArgCount(e, "dict.get", "1 or 2 arguments");
      if (pos[0].is_unknown()) return pos[0];
      if (!pos[0].AsString() && !IsIntLike(pos[0])) return Make(std::monostate{}, e);
      if (const ConfigValue* found = dict->Get(DictKey(pos[0], e))) return *found;
      if (n == 2) return std::move(pos[1]);
      return Make(std::monostate{}, e);
    }
    if (n != 0) return Unknown(e, "a call of method '" + name + "'");
    if (name == "copy") return object;
    if (name == "keys" || name == "values" || name == "items") {
      ConfigList list;
      for (auto& entry : dict->entries) {
        if (name == "keys") {
          list.items.push_back(Make(entry.key, e));
        } else if (name == "values") {
          list.items.push_back(std::move(entry.value));
        } else {
          ConfigTuple pair;
          pair.items.push_back(Make(entry.key, e));
          pair.items.push_back(std::move(entry.value));
          list.items.push_back(Make(std::move(pair), e));
        }
      }
      return Make(std::move(list), e);
    }
  }
  return Unknown(e, "a call of method '" + name + "'");
}

// A method that changes the named value `target` (known).
void Evaluator::MutatingCall(const Expr& e, const std::string& name, ConfigValue* target) {
  Args args;
  if (auto unknown = EvalArgs(e, &args)) {
    *target = std::move(*unknown);
    return;
  }
  if (target->kind() == Kind::kList && args.keywords.empty() && MutateList(e, name, args, target)) return;
  if (target->AsDict() && MutateDict(e, name, args, target)) return;
  *target = Unknown(e, "a call of method '" + name + "'");
}

// list.append, extend, insert, pop, remove, clear, reverse; false for another call.
bool Evaluator::MutateList(const Expr& e, const std::string& name, Args& args, ConfigValue* target) {
  auto& pos = args.positional;
  const size_t n = pos.size();
  auto& items = std::get<ConfigList>(target->value).items;
  if (name == "append" && n == 1) {
    items.push_back(std::move(pos[0]));
    return true;
  }
  if (name == "extend" && n == 1) {
    if (pos[0].is_unknown()) {
      *target = std::move(pos[0]);
      return true;
    }
    for (ConfigValue& item : Iterate(std::move(pos[0]), e)) items.push_back(std::move(item));
    return true;
  }
  if (name == "insert" && n == 2 && IsIntLike(pos[0])) {
    int64_t i = IntOf(pos[0]);
    const auto size = static_cast<int64_t>(items.size());
    if (i < 0) i = std::max<int64_t>(0, i + size);
    i = std::min(i, size);
    items.insert(items.begin() + i, std::move(pos[1]));
    return true;
  }
  if (name == "pop" && n <= 1 && (n == 0 || IsIntLike(pos[0]))) {
    if (items.empty()) Fail(e, "pop from empty list (Python raises IndexError)");
    const size_t i = n == 0 ? items.size() - 1 : Index(IntOf(pos[0]), items.size(), e);
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  }
  if (name == "remove" && n == 1) {
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (Equal(*it, pos[0])) {
        items.erase(it);
        return true;
      }
    }
    Fail(e, "list.remove(x): x not in list (Python raises ValueError)");
  }
  if (name == "clear" && n == 0) {
    items.clear();
    return true;
  }
  if (name == "reverse" && n == 0) {
    std::reverse(items.begin(), items.end());
    return true;
  }
  return false;
}

// dict.update, pop, setdefault, clear; false for another call.
bool Evaluator::MutateDict(const Expr& e, const std::string& name, Args& args, ConfigValue* target) {
  auto& pos = args.positional;
  const size_t n = pos.size();
  auto* dict = std::get_if<ConfigDict>(&target->value);
  PETRSIM_ASSERT(dict != nullptr);
  if (name == "update" && n <= 1) {
    if (n == 1) {
      if (pos[0].is_unknown()) {
        *target = std::move(pos[0]);
        return true;
      }
      if (!pos[0].AsDict()) {
        *target = Unknown(e, "a call of method 'update' with pairs");
        return true;
      }
      for (auto& entry : std::get<ConfigDict>(pos[0].value).entries) dict->Set(entry.key, std::move(entry.value));
    }
    for (auto& [key, value] : args.keywords) dict->Set(key, std::move(value));
    return true;
  }
  if ((name == "pop" || name == "setdefault") && (n == 1 || n == 2) && args.keywords.empty() &&
      (pos[0].AsString() || IsIntLike(pos[0]))) {
    const std::string key = DictKey(pos[0], e);
    if (name == "pop") {
      if (!dict->Erase(key) && n == 1) Fail(e, "KeyError: " + pos[0].Repr() + " (the dict has no such key)");
    } else if (dict->Get(key) == nullptr) {
      dict->Set(key, n == 2 ? std::move(pos[1]) : Make(std::monostate{}, e));
    }
    return true;
  }
  if (name == "clear" && n == 0) {
    dict->entries.clear();
    return true;
  }
  return false;
}

}  // namespace petrsim::pyconfig::evaluator_internal
