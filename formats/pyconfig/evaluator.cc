// The config evaluator: walks the AST of a module and builds values, never running anything; see
// evaluator.h for what it reads.
#include "formats/pyconfig/evaluator.h"

#include <algorithm>
#include <cfenv>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "base/assert.h"
#include "base/error.h"
#include "formats/pyconfig/lexer.h"
#include "formats/pyconfig/limits.h"

namespace petrsim::pyconfig {

void Budget::Charge(size_t nodes, size_t bytes, const std::string& where) {
  nodes_ += nodes;
  bytes_ += bytes;
  if (nodes_ > kMaxNodes) {
    throw ScenarioError(where + ": the config builds more than " + std::to_string(kMaxNodes) +
                        " values (petrsim's limit for a config)");
  }
  if (bytes_ > kMaxStringBytes) {
    throw ScenarioError(where + ": the config builds more than " + std::to_string(kMaxStringBytes >> 20) +
                        " MiB of strings (petrsim's limit for a config)");
  }
}
size_t Budget::nodes_left() const { return kMaxNodes - std::min(nodes_, kMaxNodes); }
size_t Budget::bytes_left() const { return kMaxStringBytes - std::min(bytes_, kMaxStringBytes); }

void Measure(const ConfigValue& v, size_t* nodes, size_t* bytes) {
  ++*nodes;
  if (const std::string* s = v.AsString()) *bytes += s->size();
  if (const auto* items = v.AsSequence()) {
    for (const ConfigValue& item : *items) Measure(item, nodes, bytes);
  } else if (const ConfigDict* dict = v.AsDict()) {
    for (const auto& [key, value] : dict->entries) {
      *bytes += key.size();
      Measure(value, nodes, bytes);
    }
  }
}

int Depth(const ConfigValue& v) {
  int deepest = -1;
  if (const auto* items = v.AsSequence()) {
    for (const ConfigValue& item : *items) deepest = std::max(deepest, Depth(item));
  } else if (const ConfigDict* dict = v.AsDict()) {
    for (const auto& entry : dict->entries) deepest = std::max(deepest, Depth(entry.value));
  } else {
    return 0;
  }
  return deepest + 1;
}

const std::string& PlaceholderMarker() {
  static const std::string marker("\0{{_base_.", 10);
  return marker;
}
bool HasPlaceholder(const std::string& s) { return s.find(PlaceholderMarker()) != std::string::npos; }
std::string PlaceholderText(const std::string& s) {
  const size_t at = s.find(PlaceholderMarker());
  if (at == std::string::npos) return s;
  const size_t end = s.find("}}", at);
  return s.substr(at + 1, end == std::string::npos ? std::string::npos : end + 2 - at - 1);
}

namespace {

using Kind = ConfigValue::Kind;

const char kUnsupportedTail[] = " is not supported in a config petrsim reads without running it";

const char* PyType(const ConfigValue& v) {
  switch (v.kind()) {
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kUnknown:
      return "unknown";
  }
  return "object";
}

bool IsNumeric(const ConfigValue& v) {
  return v.kind() == Kind::kBool || v.kind() == Kind::kInt || v.kind() == Kind::kFloat;
}
bool IsIntLike(const ConfigValue& v) { return v.kind() == Kind::kBool || v.kind() == Kind::kInt; }
int64_t IntOf(const ConfigValue& v) {
  if (const bool* b = v.AsBool()) return *b ? 1 : 0;
  return *v.AsInt();
}
double FloatOf(const ConfigValue& v) {
  if (const double* d = v.AsFloat()) return *d;
  return static_cast<double>(IntOf(v));
}
std::vector<ConfigValue>* MutableSequence(ConfigValue* v) {
  if (auto* list = std::get_if<ConfigList>(&v->value)) return &list->items;
  if (auto* tuple = std::get_if<ConfigTuple>(&v->value)) return &tuple->items;
  return nullptr;
}

// The code points of UTF-8 text (the text was checked to be UTF-8).
std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}
size_t CodePointCount(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Python's str() of a value (None for an unknown's caller to handle).
std::string PyStr(const ConfigValue& v) {
  if (const std::string* s = v.AsString()) return *s;
  return v.Repr();
}

// The result of a statement for loops.
enum class Flow { kNormal, kBreak, kContinue };

class Evaluator {
 public:
  Evaluator(const Module& module, const EvaluateOptions& options, Budget* budget)
      : module_(module), path_(module.path), options_(options), budget_(budget) {}

  ModuleValues Run() {
    for (const StmtPtr& s : module_.body) {
      const Flow flow = Exec(*s);
      (void)flow;  // break/continue outside a loop are refused where they are
    }
    // Every loop and comprehension that began has ended (an error throws past them instead).
    PETRSIM_ASSERT(loops_ == 0);
    PETRSIM_ASSERT(frames_.empty());
    ModuleValues out;
    out.names = names_.Take();
    out.base_where = base_where_;
    return out;
  }

 private:
  // ---- messages
  std::string At(int line, int col) const { return Location(path_, line, col); }
  std::string At(const Expr& e) const { return At(e.line, e.col); }
  std::string Where(int line) const { return path_ + ":" + std::to_string(line); }
  [[noreturn]] void Fail(int line, int col, const std::string& message) const {
    throw ScenarioError(At(line, col) + ": " + message);
  }
  [[noreturn]] void Fail(const Expr& e, const std::string& message) const { Fail(e.line, e.col, message); }
  [[noreturn]] void FailOp(const Expr& e, const std::string& message) const { Fail(e.op_line, e.op_col, message); }

  // ---- values
  template <typename T>
  ConfigValue Make(T&& x, int line) {
    ConfigValue v;
    v.value = std::forward<T>(x);
    v.where = Where(line);
    const std::string* s = v.AsString();
    budget_->Charge(1, s != nullptr ? s->size() : 0, Where(line));
    return v;
  }
  template <typename T>
  ConfigValue Make(T&& x, const Expr& e) {
    return Make(std::forward<T>(x), e.line);
  }
  ConfigValue Copy(const ConfigValue& v, const Expr& at) {
    size_t nodes = 0;
    size_t bytes = 0;
    Measure(v, &nodes, &bytes);
    budget_->Charge(nodes, bytes, At(at));
    return v;
  }
  // A value petrsim does not evaluate; in a log's Config block an error.
  ConfigValue Unknown(int line, int col, const std::string& construct, bool module_or_function = false) {
    if (options_.log_block) Fail(line, col, construct + kUnsupportedTail + " (a Config block holds only values)");
    ConfigValue v;
    v.value = ConfigUnknown{Where(line) + ": " + construct, module_or_function};
    v.where = Where(line);
    budget_->Charge(1, 0, v.where);
    return v;
  }
  ConfigValue Unknown(const Expr& e, const std::string& construct, bool module_or_function = false) {
    return Unknown(e.line, e.col, construct, module_or_function);
  }

  // ---- names and scopes
  // A comprehension's own names, innermost last.
  struct Frame {
    std::vector<std::pair<std::string, ConfigValue>> names;
  };

  const ConfigValue* Lookup(const std::string& name) {
    for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
      for (auto& [n, v] : frame->names) {
        if (n == name) return &v;
      }
    }
    return names_.Get(name);
  }

  static bool IsBuiltin(const std::string& name) {
    static const std::unordered_set<std::string> builtins = {
        "abs",        "all",        "any",        "bin",         "bool",         "bytearray",
        "bytes",      "callable",   "chr",        "compile",     "complex",      "delattr",
        "dict",       "dir",        "divmod",     "enumerate",   "eval",         "exec",
        "filter",     "float",      "format",     "frozenset",   "getattr",      "globals",
        "hasattr",    "hash",       "hex",        "id",          "input",        "int",
        "isinstance", "issubclass", "iter",       "len",         "list",         "locals",
        "map",        "max",        "min",        "next",        "object",       "oct",
        "open",       "ord",        "pow",        "print",       "range",        "repr",
        "reversed",   "round",      "set",        "setattr",     "slice",        "sorted",
        "str",        "sum",        "super",      "tuple",       "type",         "vars",
        "zip",        "__import__", "__file__",   "__name__",    "Exception",    "NotImplemented",
        "ValueError", "TypeError",  "KeyError",   "ImportError", "RuntimeError", "__builtins__",
        "__doc__",    "__spec__",   "__loader__", "__package__", "staticmethod", "classmethod",
        "property"};
    return builtins.count(name) > 0;
  }

  ConfigValue EvalName(const Expr& e) {
    if (const ConfigValue* v = Lookup(e.text)) return Copy(*v, e);
    if (options_.log_block && (e.text == "inf" || e.text == "nan")) {
      return Make(e.text == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN(),
                  e);
    }
    if (IsBuiltin(e.text)) return Unknown(e, "a reference to the builtin '" + e.text + "'");
    if (star_import_) return Unknown(e, "the name '" + e.text + "' (perhaps from a star import)");
    if (options_.log_block) Fail(e, "name '" + e.text + "' is not defined (a Config block holds only values)");
    Fail(e, "name '" + e.text +
                "' is not defined (a config reads only names assigned above it in the same file; mmcv runs each file "
                "on its own, so a base file's variable is written {{_base_." +
                e.text + "}})");
  }

  void Bind(const std::string& name, ConfigValue value, int line, int col) {
    if (!frames_.empty() && frame_binds_) {
      auto& names = frames_.back().names;
      for (auto& [n, v] : names) {
        if (n == name) {
          v = std::move(value);
          return;
        }
      }
      names.emplace_back(name, std::move(value));
      return;
    }
    if (name == "_base_") {
      if (options_.log_block) {
        Fail(line, col,
             "_base_ in a Config block: mmcv prints the merged config, without _base_ (is this a config file?)");
      }
      base_where_ = At(line, col);
    }
    names_.Set(name, std::move(value));
  }

  // ---- statements
  // One statement; the compound and binding kinds have their own functions below.
  Flow Exec(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::kExpr:
        ExecExpression(s);
        return Flow::kNormal;
      case StmtKind::kAssign:
        ExecAssign(s);
        return Flow::kNormal;
      case StmtKind::kAnnAssign:
        if (s.value) {
          ConfigValue value = Eval(*s.value);
          CheckDepth(value, *s.value);
          Assign(*s.targets[0], std::move(value));
        }
        return Flow::kNormal;
      case StmtKind::kAugAssign:
        ExecAugAssign(s);
        return Flow::kNormal;
      case StmtKind::kImport:
        ExecImport(s);
        return Flow::kNormal;
      case StmtKind::kImportFrom:
        ExecImportFrom(s);
        return Flow::kNormal;
      case StmtKind::kIf:
        return ExecIf(s);
      case StmtKind::kFor:
        return For(s);
      case StmtKind::kWhile:
        return While(s);
      case StmtKind::kFunctionDef:
        Bind(s.name, Unknown(s.line, s.col, "a function definition ('" + s.name + "')", true), s.line, s.col);
        return Flow::kNormal;
      case StmtKind::kClassDef:
        Bind(s.name, Unknown(s.line, s.col, "a class definition ('" + s.name + "')"), s.line, s.col);
        return Flow::kNormal;
      case StmtKind::kWith:
        UnknownAssigned(s, std::string(Where(s.line)) + ": a with statement");
        return Flow::kNormal;
      case StmtKind::kTry:
        UnknownAssigned(s, std::string(Where(s.line)) + ": a try statement");
        return Flow::kNormal;
      case StmtKind::kPass:
      case StmtKind::kGlobal:
        return Flow::kNormal;
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        return ExecLoopJump(s);
      case StmtKind::kReturn:
        Fail(s.line, s.col, "'return' outside function (a Python SyntaxError)");
      case StmtKind::kNonlocal:
        Fail(s.line, s.col, "nonlocal declaration not allowed at module level (a Python SyntaxError)");
      case StmtKind::kRaise:
        if (options_.log_block) Unknown(s.line, s.col, "a raise statement");
        Fail(s.line, s.col, "the config raises an exception here (mmcv would fail to read it)");
      case StmtKind::kAssert: {
        const ConfigValue test = Eval(*s.test);
        if (test.Truth() == std::optional<bool>(false)) {
          Fail(s.line, s.col, "the config's assertion fails (Python raises AssertionError)");
        }
        return Flow::kNormal;
      }
      case StmtKind::kDelete:
        for (const ExprPtr& target : s.targets) Delete(*target);
        return Flow::kNormal;
    }
    return Flow::kNormal;
  }

  void ExecAssign(const Stmt& s) {
    ConfigValue value = Eval(*s.value);
    CheckDepth(value, *s.value);
    for (size_t i = 0; i < s.targets.size(); ++i) {
      Assign(*s.targets[i], i + 1 == s.targets.size() ? std::move(value) : Copy(value, *s.targets[i]));
    }
  }

  void ExecAugAssign(const Stmt& s) {
    const Expr& target = *s.targets[0];
    ConfigValue right = Eval(*s.value);
    ConfigValue current = Eval(target);
    Expr op_at;  // an operator node for messages: the statement's operator
    op_at.line = s.line;
    op_at.col = s.col;
    op_at.op_line = target.line;
    op_at.op_col = target.col;
    op_at.text = s.op;
    ConfigValue value = Binary(op_at, s.op, std::move(current), std::move(right));
    CheckDepth(value, *s.value);
    Assign(target, std::move(value));
  }

  void ExecImport(const Stmt& s) {
    for (const Alias& a : s.names) {
      const std::string bound = a.asname.empty() ? a.name.substr(0, a.name.find('.')) : a.asname;
      const std::string module = a.asname.empty() ? bound : a.name;
      Bind(bound, Unknown(a.line, a.col, "a name from an import ('" + module + "')", true), a.line, a.col);
    }
  }

  void ExecImportFrom(const Stmt& s) {
    for (const Alias& a : s.names) {
      if (a.name == "*") {
        if (options_.log_block) Unknown(a.line, a.col, "a star import");
        star_import_ = true;
        continue;
      }
      const std::string module = std::string(static_cast<size_t>(s.level), '.') + s.module;
      Bind(a.asname.empty() ? a.name : a.asname,
           Unknown(a.line, a.col, "a name from an import ('" + module + "." + a.name + "')"), a.line, a.col);
    }
  }

  // break or continue, refused outside a loop.
  Flow ExecLoopJump(const Stmt& s) const {
    if (loops_ == 0) {
      Fail(s.line, s.col,
           std::string("'") + (s.kind == StmtKind::kBreak ? "break" : "continue") +
               "' outside loop (a Python SyntaxError)");
    }
    return s.kind == StmtKind::kBreak ? Flow::kBreak : Flow::kContinue;
  }

  Flow ExecIf(const Stmt& s) {
    const ConfigValue test = Eval(*s.test);
    const std::optional<bool> truth = test.Truth();
    if (!truth) {
      UnknownAssigned(s, Where(s.line) + ": an if statement whose test depends on " + test.AsUnknown()->reason);
      return Flow::kNormal;
    }
    return ExecBlock(*truth ? s.body : s.orelse);
  }

  Flow ExecBlock(const std::vector<StmtPtr>& body) {
    for (const StmtPtr& s : body) {
      const Flow flow = Exec(*s);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  void CheckDepth(const ConfigValue& value, const Expr& at) const {
    if (Depth(value) > kMaxValueDepth) {
      Fail(at, "a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels (petrsim's limit)");
    }
  }

  Flow For(const Stmt& s) {
    ConfigValue iterable = Eval(*s.value);
    if (iterable.is_unknown()) {
      UnknownAssigned(s, Where(s.line) + ": a for loop over " + iterable.AsUnknown()->reason);
      return Flow::kNormal;
    }
    std::vector<ConfigValue> items = Iterate(std::move(iterable), *s.value);
    ++loops_;
    bool broke = false;
    for (ConfigValue& item : items) {
      budget_->Charge(1, 0, At(s.line, s.col));
      Assign(*s.targets[0], std::move(item));
      const Flow flow = ExecBlock(s.body);
      if (flow == Flow::kBreak) {
        broke = true;
        break;
      }
    }
    --loops_;
    PETRSIM_ASSERT(loops_ >= 0);  // each loop counts itself once, up and down
    if (!broke) return ExecBlock(s.orelse);
    return Flow::kNormal;
  }

  Flow While(const Stmt& s) {
    ++loops_;
    bool broke = false;
    while (true) {
      budget_->Charge(1, 0, At(s.line, s.col));  // bounds the loop
      const ConfigValue test = Eval(*s.test);
      const std::optional<bool> truth = test.Truth();
      if (!truth) {
        --loops_;
        UnknownAssigned(s, Where(s.line) + ": a while loop whose test depends on " + test.AsUnknown()->reason);
        return Flow::kNormal;
      }
      if (!*truth) break;
      if (ExecBlock(s.body) == Flow::kBreak) {
        broke = true;
        break;
      }
    }
    --loops_;
    PETRSIM_ASSERT(loops_ >= 0);  // each loop counts itself once, up and down
    if (!broke) return ExecBlock(s.orelse);
    return Flow::kNormal;
  }

  // Names a block petrsim does not run would assign become unknown with `reason` (already
  // "FILE:LINE: ..." or a reason of an unknown test).
  void UnknownAssigned(const Stmt& s, const std::string& reason) {
    std::vector<std::pair<std::string, const Stmt*>> names;
    CollectAssigned(s, &names, true);
    for (const auto& [name, at] : names) {
      if (options_.log_block) Unknown(at->line, at->col, "a compound statement");
      ConfigValue v;
      v.value = ConfigUnknown{reason, false};
      v.where = Where(at->line);
      Bind(name, std::move(v), at->line, at->col);
    }
  }
  void CollectTarget(const Expr& e, const Stmt* at, std::vector<std::pair<std::string, const Stmt*>>* out) const {
    switch (e.kind) {
      case ExprKind::kName:
        out->emplace_back(e.text, at);
        return;
      case ExprKind::kStarred:
      case ExprKind::kAttribute:
      case ExprKind::kSubscript:
        return CollectTarget(*e.items[0], at, out);
      case ExprKind::kTuple:
      case ExprKind::kList:
        for (const ExprPtr& item : e.items) CollectTarget(*item, at, out);
        return;
      default:
        return;
    }
  }
  void CollectAssigned(const Stmt& s, std::vector<std::pair<std::string, const Stmt*>>* out, bool top) const {
    for (const ExprPtr& t : s.targets) CollectTarget(*t, &s, out);
    if (s.kind == StmtKind::kExpr) {
      // A method call that may change a named value.
      const Expr& e = *s.value;
      if (e.kind == ExprKind::kCall && e.items[0]->kind == ExprKind::kAttribute) CollectTarget(*e.items[0], &s, out);
    }
    for (const WithItem& item : s.items) {
      if (item.target) CollectTarget(*item.target, &s, out);
    }
    for (const Alias& a : s.names) {
      if (a.name != "*") out->emplace_back(a.asname.empty() ? a.name.substr(0, a.name.find('.')) : a.asname, &s);
    }
    if ((s.kind == StmtKind::kFunctionDef || s.kind == StmtKind::kClassDef) && !s.name.empty()) {
      out->emplace_back(s.name, &s);
      return;  // their bodies bind their own names
    }
    (void)top;
    for (const StmtPtr& b : s.body) CollectAssigned(*b, out, false);
    for (const StmtPtr& b : s.orelse) CollectAssigned(*b, out, false);
    for (const StmtPtr& b : s.finalbody) CollectAssigned(*b, out, false);
    for (const ExceptHandler& h : s.handlers) {
      if (!h.name.empty()) out->emplace_back(h.name, &s);
      for (const StmtPtr& b : h.body) CollectAssigned(*b, out, false);
    }
  }

  // An expression statement: a docstring, a method call that changes a named list or dict
  // (append, extend, insert, update, pop, remove, clear, setdefault), or anything else
  // (evaluated, so that Python's errors are found, and dropped).
  void ExecExpression(const Stmt& s) {
    const Expr& e = *s.value;
    if (e.kind == ExprKind::kConstant) return;
    if (e.kind == ExprKind::kCall && e.items[0]->kind == ExprKind::kAttribute) {
      static const std::unordered_set<std::string> kMutators = {"append",  "extend", "insert",     "update", "pop",
                                                                "remove",  "clear",  "setdefault", "sort",   "reverse",
                                                                "popitem", "add",    "discard"};
      const Expr& method = *e.items[0];
      if (kMutators.count(method.text) > 0) {
        ConfigValue* target = Resolve(*method.items[0]);
        if (target == nullptr || target->is_unknown()) {
          Eval(e);
          if (const std::string root = RootName(*method.items[0]); !root.empty() && Lookup(root) != nullptr) {
            if (options_.log_block) Unknown(e, "a method call");
            ConfigValue v = Unknown(e, "a call of method '" + method.text + "' that changes '" + root + "'");
            if (target != nullptr && target->is_unknown()) return;  // already unknown
            SetRoot(root, std::move(v));
          }
          return;
        }
        MutatingCall(e, method.text, target);
        return;
      }
    }
    Eval(e);
  }

  static std::string RootName(const Expr& e) {
    if (e.kind == ExprKind::kName) return e.text;
    if (e.kind == ExprKind::kSubscript || e.kind == ExprKind::kAttribute) return RootName(*e.items[0]);
    return "";
  }
  void SetRoot(const std::string& root, ConfigValue v) {
    for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
      for (auto& [n, value] : frame->names) {
        if (n == root) {
          value = std::move(v);
          return;
        }
      }
    }
    names_.Set(root, std::move(v));
  }

  // The stored value a target expression names: a name, or a subscript of one with a known key;
  // nullptr when there is none (or a key is unknown).
  ConfigValue* Resolve(const Expr& e) {
    if (e.kind == ExprKind::kName) {
      for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
        for (auto& [n, v] : frame->names) {
          if (n == e.text) return &v;
        }
      }
      return names_.Get(e.text);
    }
    if (e.kind != ExprKind::kSubscript || e.items[1]->kind == ExprKind::kSlice) return nullptr;
    ConfigValue* container = Resolve(*e.items[0]);
    if (container == nullptr || container->is_unknown()) return container;
    const ConfigValue key = Eval(*e.items[1]);
    if (key.is_unknown()) return nullptr;
    if (auto* dict = std::get_if<ConfigDict>(&container->value)) {
      const std::string text = DictKey(key, *e.items[1]);
      ConfigValue* found = dict->Get(text);
      if (found == nullptr) Fail(*e.items[1], "KeyError: " + key.Repr() + " (the dict has no such key)");
      return found;
    }
    if (auto* items = MutableSequence(container)) {
      if (!IsIntLike(key)) Fail(*e.items[1], std::string("indexes must be integers, found ") + PyType(key));
      return &(*items)[Index(IntOf(key), items->size(), *e.items[1])];
    }
    return nullptr;
  }

  size_t Index(int64_t i, size_t size, const Expr& at) const {
    const int64_t n = static_cast<int64_t>(size);
    if (i < 0) i += n;
    if (i < 0 || i >= n) Fail(at, "index out of range (Python raises IndexError)");
    return static_cast<size_t>(i);
  }

  // Binds `value` to an assignment target; each target kind has its own function below.
  void Assign(const Expr& target, ConfigValue value) {
    switch (target.kind) {
      case ExprKind::kName:
        Bind(target.text, std::move(value), target.line, target.col);
        return;
      case ExprKind::kTuple:
      case ExprKind::kList:
        return AssignUnpack(target, std::move(value));
      case ExprKind::kSubscript:
        return AssignSubscript(target, std::move(value));
      case ExprKind::kAttribute:
        return AssignAttribute(target);
      case ExprKind::kStarred:
        Fail(target, "starred assignment target must be in a list or tuple (a Python SyntaxError)");
      default:
        Fail(target, "cannot assign to an expression");
    }
  }

  // `a, *b = value`: an unknown value makes every name unknown.
  void AssignUnpack(const Expr& target, ConfigValue value) {
    if (value.is_unknown()) {
      std::vector<std::pair<std::string, const Stmt*>> names;
      CollectTarget(target, nullptr, &names);
      for (auto& [name, at] : names) Bind(name, value, target.line, target.col);
      return;
    }
    std::vector<ConfigValue> items = Iterate(std::move(value), target);
    size_t star = target.items.size();
    for (size_t i = 0; i < target.items.size(); ++i) {
      if (target.items[i]->kind == ExprKind::kStarred) star = i;
    }
    const size_t fixed = target.items.size() - (star < target.items.size() ? 1 : 0);
    if (star == target.items.size() ? items.size() != fixed : items.size() < fixed) {
      Fail(target, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(fixed) +
                       " targets (Python raises ValueError)");
    }
    const size_t rest = items.size() - fixed;
    size_t k = 0;
    for (size_t i = 0; i < target.items.size(); ++i) {
      if (i == star) {
        ConfigList list;
        for (size_t j = 0; j < rest; ++j) list.items.push_back(std::move(items[k++]));
        Assign(*target.items[i]->items[0], Make(std::move(list), target));
      } else {
        Assign(*target.items[i], std::move(items[k++]));
      }
    }
    PETRSIM_ASSERT(k == items.size());
  }

  // `x[key] = value`: a known container's item, or the whole named value made unknown.
  void AssignSubscript(const Expr& target, ConfigValue value) {
    ConfigValue* container = Resolve(*target.items[0]);
    const std::string root = RootName(target);
    if (container == nullptr || container->is_unknown()) {
      if (container != nullptr) return;  // an unknown stays unknown
      if (!root.empty() && Lookup(root) != nullptr) {
        SetRoot(root, Unknown(target, "an assignment to a subscript of '" + root + "'"));
        return;
      }
      Eval(*target.items[0]);  // a NameError, or an unknown
      return;
    }
    if (target.items[1]->kind == ExprKind::kSlice) {
      SetRoot(root, Unknown(target, "an assignment to a slice of '" + root + "'"));
      return;
    }
    const ConfigValue key = Eval(*target.items[1]);
    if (key.is_unknown()) {
      SetRoot(root, Unknown(target, "an assignment to '" + root + "' under a key petrsim cannot evaluate"));
      return;
    }
    if (auto* dict = std::get_if<ConfigDict>(&container->value)) {
      dict->Set(DictKey(key, *target.items[1]), std::move(value));
      return;
    }
    if (container->kind() == Kind::kList) {
      auto& items = std::get<ConfigList>(container->value).items;
      if (!IsIntLike(key)) Fail(*target.items[1], std::string("list indices must be integers, found ") + PyType(key));
      items[Index(IntOf(key), items.size(), *target.items[1])] = std::move(value);
      return;
    }
    Fail(target,
         std::string("'") + PyType(*container) + "' object does not support item assignment (Python raises TypeError)");
  }

  // `x.attr = value`: the named value becomes unknown (or the assignment is refused on _base_).
  void AssignAttribute(const Expr& target) {
    const std::string root = RootName(target);
    if (!root.empty() && Lookup(root) != nullptr) {
      if (Lookup(root)->is_unknown()) return;
      // Attributes of known values (str, list, dict...) cannot be set in Python; `_base_.x = v` is
      // mmengine's syntax, not mmcv 1.x's.
      if (root == "_base_") {
        Fail(target, "an assignment to '" + Dotted(target) +
                         "': mmcv 1.x has no attributes on _base_ (a list of paths; Python raises AttributeError); "
                         "this is mmengine's config syntax (mmdet3d 1.x), not mmcv 1.x's");
      }
      SetRoot(root, Unknown(target, "an assignment to an attribute of '" + root + "'"));
      return;
    }
    Eval(*target.items[0]);
  }

  void Delete(const Expr& target) {
    if (target.kind == ExprKind::kName) {
      if (Lookup(target.text) == nullptr) Fail(target, "name '" + target.text + "' is not defined");
      if (frames_.empty()) names_.Erase(target.text);
      return;
    }
    if (target.kind == ExprKind::kTuple || target.kind == ExprKind::kList) {
      for (const ExprPtr& item : target.items) Delete(*item);
      return;
    }
    const std::string root = RootName(target);
    if (target.kind == ExprKind::kSubscript && target.items[1]->kind != ExprKind::kSlice) {
      ConfigValue* container = Resolve(*target.items[0]);
      if (container != nullptr && !container->is_unknown()) {
        const ConfigValue key = Eval(*target.items[1]);
        if (!key.is_unknown()) {
          if (auto* dict = std::get_if<ConfigDict>(&container->value)) {
            if (!dict->Erase(DictKey(key, *target.items[1]))) {
              Fail(*target.items[1], "KeyError: " + key.Repr() + " (the dict has no such key)");
            }
            return;
          }
          if (container->kind() == Kind::kList && IsIntLike(key)) {
            auto& items = std::get<ConfigList>(container->value).items;
            items.erase(items.begin() + static_cast<std::ptrdiff_t>(Index(IntOf(key), items.size(), target)));
            return;
          }
        }
      }
    }
    if (!root.empty() && Lookup(root) != nullptr && !Lookup(root)->is_unknown()) {
      SetRoot(root, Unknown(target, "a del statement on '" + root + "'"));
    }
  }

  // ---- expressions
  // A module or a function stays one only through a plain name (or a lambda): whatever is computed
  // from it is another value, which mmcv keeps in the dict.
  ConfigValue Eval(const Expr& e) {
    ConfigValue v = EvalExpression(e);
    if (e.kind != ExprKind::kName && e.kind != ExprKind::kLambda) {
      if (auto* unknown = std::get_if<ConfigUnknown>(&v.value)) unknown->module_or_function = false;
    }
    return v;
  }

  // One expression by its kind; the kinds with more than a line or two have their own functions.
  ConfigValue EvalExpression(const Expr& e) {
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
  std::optional<ConfigValue> EvalConstant(const Expr& e) {
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
  ConfigValue Display(const Expr& e) {
    std::vector<ConfigValue> items;
    if (auto unknown = Items(e.items, &items)) return std::move(*unknown);
    if (e.kind == ExprKind::kList) return Make(ConfigList{std::move(items)}, e);
    if (e.kind == ExprKind::kTuple) return Make(ConfigTuple{std::move(items)}, e);
    return Unknown(e, "a set literal ('{a, b}')");
  }

  // `a and b`, `a or b`: the first value that decides, or an unknown test.
  ConfigValue BoolOp(const Expr& e) {
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
  ConfigValue EvalComprehension(const Expr& e) {
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
  std::optional<ConfigValue> Items(const std::vector<ExprPtr>& exprs, std::vector<ConfigValue>* out) {
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
  std::string DictKey(const ConfigValue& key, const Expr& at) {
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

  ConfigValue DictDisplay(const Expr& e) {
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
        Fail(*e.items[i],
             "the keys " + text + " and '" + text + "' in one dict (petrsim stores an int key as its text)");
      }
      dict.Set(text, std::move(value));
    }
    return Make(dict.Take(), e);
  }

  void Splice(int line, int col, ConfigValue from, ConfigDictBuilder* into, bool call) {
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
  std::vector<ConfigValue> Iterate(ConfigValue v, const Expr& at) {
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
  std::optional<ConfigValue> Comprehend(const Expr& e, std::vector<ConfigValue>* out, ConfigDictBuilder* dict) {
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

  std::optional<ConfigValue> Generate(const Expr& e, size_t level, std::vector<ConfigValue>* out,
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

  ConfigValue Attribute(const Expr& e) {
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
  static std::string Dotted(const Expr& e) {
    if (e.kind == ExprKind::kName) return e.text;
    if (e.kind == ExprKind::kAttribute) return Dotted(*e.items[0]) + "." + e.text;
    return "(...)";
  }

  ConfigValue Subscript(const Expr& e) {
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
          Fail(*index.items[static_cast<size_t>(k)], std::string("slice indices must be integers or None, found ") +
                                                         PyType(b) + " (Python raises TypeError)");
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
  ConfigValue Slice(const Expr& e, ConfigValue object, std::optional<int64_t> start, std::optional<int64_t> stop,
                    std::optional<int64_t> step_given) {
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

  // ---- comparisons
  // -1, 0, 1 for a Python ordering of two known values, or nullopt when Python has none.
  std::optional<int> Order(const ConfigValue& a, const ConfigValue& b) const {
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

  bool Equal(const ConfigValue& a, const ConfigValue& b) const {
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

  // Whether a (possibly nested) value holds an unknown.
  static bool HasUnknown(const ConfigValue& v) { return FindUnknown(v) != nullptr; }

  ConfigValue CompareChain(const Expr& e) {
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

  // ---- arithmetic, with Python's semantics
  [[noreturn]] void ZeroDivision(const Expr& op, const char* what) const {
    FailOp(op, std::string(what) + " (Python raises ZeroDivisionError)");
  }
  [[noreturn]] void Overflow(const Expr& op, const std::string& o) const {
    FailOp(op, "integer overflow in '" + o + "' (petrsim reads 64-bit integers; Python's grow)");
  }
  [[noreturn]] void TypeError(const Expr& op, const std::string& o, const ConfigValue& a, const ConfigValue& b) const {
    FailOp(op, "unsupported operand types for '" + o + "': '" + PyType(a) + "' and '" + PyType(b) +
                   "' (Python raises TypeError)");
  }
  void CheckPlaceholderOperand(const Expr& op, const std::string& o, const ConfigValue& v) const {
    const std::string* s = v.AsString();
    if (s != nullptr && HasPlaceholder(*s)) {
      FailOp(op, PlaceholderText(*s) + " is an operand of '" + o +
                     "': mmcv substitutes a base's variable only as a whole value (here it would still be its "
                     "placeholder string)");
    }
  }

  ConfigValue Unary(const Expr& e, ConfigValue v) {
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

  ConfigValue Binary(const Expr& e, const std::string& o, ConfigValue a, ConfigValue b) {
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
  void Bitwise(const Expr& e, const std::string& o, const ConfigValue& a, const ConfigValue& b, ConfigValue* out) {
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

  ConfigValue Repeat(const Expr& e, ConfigValue seq, int64_t times, const std::string& where) {
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

  int64_t IntOp(const Expr& e, const std::string& o, int64_t x, int64_t y) const {
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

  void IntPower(const Expr& e, const std::string& o, int64_t x, int64_t y, ConfigValue* out) const {
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

  double FloatOp(const Expr& e, const std::string& o, double x, double y) const {
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

  // ---- f-strings and formatting
  ConfigValue JoinedStr(const Expr& e) {
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

  // Python's format(value, spec) for the common specs; nullopt for what is not read here.
  static std::optional<std::string> Format(const ConfigValue& v, const std::string& spec) {
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

  // The spec's fields; nullopt for one Python refuses or petrsim does not read.
  static std::optional<FormatSpec> ParseFormatSpec(const std::string& spec) {
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
        f.fill_text = "0";
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

  // A str under a spec (precision cuts it to that many code points); left-aligned by default.
  static std::optional<Formatted> FormatString(const std::string& s, FormatSpec& f) {
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
  static std::optional<Formatted> FormatInt(const ConfigValue& v, FormatSpec& f) {
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
  static std::optional<Formatted> FormatFloat(const ConfigValue& v, const FormatSpec& f) {
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
    out.prefix = std::signbit(x) && !std::isnan(x) ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
    return out;
  }

  // The formatted value padded with the fill to the spec's width (numbers right-aligned by default).
  static std::optional<std::string> Pad(const Formatted& formatted, FormatSpec& f) {
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

  static std::string Group(const std::string& digits, size_t every, char separator) {
    std::string out;
    const size_t n = digits.size();
    for (size_t k = 0; k < n; ++k) {
      if (k > 0 && (n - k) % every == 0) out += separator;
      out += digits[k];
    }
    return out;
  }

  // str.format: `{}`, `{0}`, `{name}`, `{{`, `}}`, conversions and specs (one nested level).
  std::optional<std::string> StrFormat(const std::string& format, const std::vector<ConfigValue>& args,
                                       const std::vector<std::pair<std::string, ConfigValue>>& kwargs, const Expr& at,
                                       int nesting = 0) {
    std::string out;
    size_t auto_index = 0;
    bool used_auto = false;
    bool used_manual = false;
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
      // The field up to its matching '}'.
      size_t j = i + 1;
      int depth = 0;
      for (; j < format.size(); ++j) {
        if (format[j] == '{') ++depth;
        if (format[j] == '}') {
          if (depth == 0) break;
          --depth;
        }
      }
      if (j >= format.size()) Fail(at, "Single '{' encountered in format string (Python raises ValueError)");
      const std::string field = format.substr(i + 1, j - i - 1);
      i = j + 1;
      size_t k = 0;
      while (k < field.size() && field[k] != '!' && field[k] != ':') ++k;
      const std::string name = field.substr(0, k);
      char conversion = 0;
      std::string spec;
      if (k < field.size() && field[k] == '!') {
        if (k + 1 >= field.size()) return std::nullopt;
        conversion = field[k + 1];
        k += 2;
      }
      if (k < field.size() && field[k] == ':') spec = field.substr(k + 1);
      if (k < field.size() && field[k] != ':') return std::nullopt;
      const ConfigValue* value = nullptr;
      if (name.empty()) {
        if (used_manual) Fail(at, "cannot switch from manual field numbering to automatic (Python raises ValueError)");
        used_auto = true;
        if (auto_index >= args.size())
          Fail(at, "Replacement index out of range for format() (Python raises IndexError)");
        value = &args[auto_index++];
      } else if (std::all_of(name.begin(), name.end(),
                             [](char d) { return std::isdigit(static_cast<unsigned char>(d)); })) {
        if (used_auto) Fail(at, "cannot switch from automatic field numbering to manual (Python raises ValueError)");
        used_manual = true;
        const size_t index = std::stoul(name.substr(0, 9));
        if (index >= args.size()) Fail(at, "Replacement index out of range for format() (Python raises IndexError)");
        value = &args[index];
      } else {
        if (name.find_first_of(".[") != std::string::npos) return std::nullopt;
        for (const auto& [key, v] : kwargs) {
          if (key == name) value = &v;
        }
        if (value == nullptr) Fail(at, "KeyError: '" + name + "' (a format field with no such argument)");
      }
      if (value->is_unknown()) return std::nullopt;
      if (spec.find('{') != std::string::npos) {
        if (nesting > 0) return std::nullopt;
        // Nested fields share the numbering: format the spec with the remaining arguments.
        std::vector<ConfigValue> rest(args.begin() + static_cast<std::ptrdiff_t>(std::min(auto_index, args.size())),
                                      args.end());
        const size_t before = rest.size();
        (void)before;
        std::optional<std::string> s = StrFormat(spec, used_manual ? args : rest, kwargs, at, nesting + 1);
        if (!s) return std::nullopt;
        if (used_auto) {
          size_t fields = 0;
          for (size_t p = 0; p < spec.size(); ++p) fields += spec[p] == '{';
          auto_index += fields;
        }
        spec = *s;
      }
      ConfigValue v = *value;
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
      if (FindUnknown(v) != nullptr) return std::nullopt;
      std::optional<std::string> formatted = Format(v, spec);
      if (!formatted) return std::nullopt;
      out += *formatted;
    }
    return out;
  }

  // ---- calls
  struct Args {
    std::vector<ConfigValue> positional;
    std::vector<std::pair<std::string, ConfigValue>> keywords;
  };

  // The arguments of a call; a lone generator argument is read as the list of its items. An
  // unknown `*x` or `**x` makes the call's result unknown (returned).
  std::optional<ConfigValue> EvalArgs(const Expr& call, Args* out) {
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

  const ConfigValue* KeywordArg(const Args& args, const std::string& name) const {
    for (const auto& [key, value] : args.keywords) {
      if (key == name) return &value;
    }
    return nullptr;
  }

  ConfigValue Call(const Expr& e) {
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

  [[noreturn]] void ArgCount(const Expr& e, const std::string& name, const std::string& expected) const {
    Fail(e, name + "() takes " + expected + " (Python raises TypeError)");
  }

  // The first unknown among the arguments, which makes a builtin's result unknown.
  static const ConfigValue* UnknownArg(const Args& args) {
    for (const ConfigValue& v : args.positional) {
      if (const ConfigValue* u = FindUnknown(v)) return u;
    }
    for (const auto& [key, v] : args.keywords) {
      if (const ConfigValue* u = FindUnknown(v)) return u;
    }
    return nullptr;
  }

  ConfigValue Builtin(const Expr& e, const std::string& name) {
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
      for (ConfigValue& item : Iterate(std::move(pos[0]), e))
        total = Binary(op, "+", std::move(total), std::move(item));
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

  ConfigValue Int(const Expr& e, Args& args) {
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
  static std::optional<int64_t> ParseInt(const std::string& text, int base) {
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

  static std::optional<double> ParseFloat(const std::string& text) {
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
  ConfigValue Round(const Expr& e, Args& args) {
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

  ConfigValue Range(const Expr& e, const std::vector<ConfigValue>& pos) {
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

  // ---- methods of known values
  ConfigValue Method(const Expr& e, const std::string& name, ConfigValue object) {
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
  void MutatingCall(const Expr& e, const std::string& name, ConfigValue* target) {
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
  bool MutateList(const Expr& e, const std::string& name, Args& args, ConfigValue* target) {
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
  bool MutateDict(const Expr& e, const std::string& name, Args& args, ConfigValue* target) {
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

  const Module& module_;
  const std::string& path_;
  EvaluateOptions options_;
  Budget* budget_;
  ConfigDictBuilder names_;
  std::vector<Frame> frames_;
  bool frame_binds_ = false;  // a comprehension's target binds in its frame
  bool star_import_ = false;
  int loops_ = 0;
  std::string base_where_;
};

}  // namespace

ModuleValues EvaluateModule(const Module& module, const EvaluateOptions& options, Budget* budget) {
  return Evaluator(module, options, budget).Run();
}

}  // namespace petrsim::pyconfig
