// The config evaluator: walks the AST of a module and builds values, never running anything; see
// evaluator.h for what it reads. This file holds the budget and placeholders, the value helpers,
// and the Evaluator's core (evaluator_internal.h): Run, names and scopes, statements, assignment
// targets; the other evaluator_*.cc files hold the rest by concept.
#include "formats/pyconfig/evaluator.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

#include "base/assert.h"
#include "base/error.h"
#include "formats/pyconfig/evaluator_internal.h"
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

namespace evaluator_internal {

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

std::string PyStr(const ConfigValue& v) {
  if (const std::string* s = v.AsString()) return *s;
  return v.Repr();
}

ModuleValues Evaluator::Run() {
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

const ConfigValue* Evaluator::Lookup(const std::string& name) {
  for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
    for (auto& [n, v] : frame->names) {
      if (n == name) return &v;
    }
  }
  return names_.Get(name);
}

bool Evaluator::IsBuiltin(const std::string& name) {
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

ConfigValue Evaluator::EvalName(const Expr& e) {
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

void Evaluator::Bind(const std::string& name, ConfigValue value, int line, int col) {
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

// One statement; the compound and binding kinds have their own functions below.
Flow Evaluator::Exec(const Stmt& s) {
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

void Evaluator::ExecAssign(const Stmt& s) {
  ConfigValue value = Eval(*s.value);
  CheckDepth(value, *s.value);
  for (size_t i = 0; i < s.targets.size(); ++i) {
    Assign(*s.targets[i], i + 1 == s.targets.size() ? std::move(value) : Copy(value, *s.targets[i]));
  }
}

void Evaluator::ExecAugAssign(const Stmt& s) {
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

void Evaluator::ExecImport(const Stmt& s) {
  for (const Alias& a : s.names) {
    const std::string bound = a.asname.empty() ? a.name.substr(0, a.name.find('.')) : a.asname;
    const std::string module = a.asname.empty() ? bound : a.name;
    Bind(bound, Unknown(a.line, a.col, "a name from an import ('" + module + "')", true), a.line, a.col);
  }
}

void Evaluator::ExecImportFrom(const Stmt& s) {
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
Flow Evaluator::ExecLoopJump(const Stmt& s) const {
  if (loops_ == 0) {
    Fail(s.line, s.col,
         std::string("'") + (s.kind == StmtKind::kBreak ? "break" : "continue") +
             "' outside loop (a Python SyntaxError)");
  }
  return s.kind == StmtKind::kBreak ? Flow::kBreak : Flow::kContinue;
}

Flow Evaluator::ExecIf(const Stmt& s) {
  const ConfigValue test = Eval(*s.test);
  const std::optional<bool> truth = test.Truth();
  if (!truth) {
    UnknownAssigned(s, Where(s.line) + ": an if statement whose test depends on " + test.AsUnknown()->reason);
    return Flow::kNormal;
  }
  return ExecBlock(*truth ? s.body : s.orelse);
}

Flow Evaluator::ExecBlock(const std::vector<StmtPtr>& body) {
  for (const StmtPtr& s : body) {
    const Flow flow = Exec(*s);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

void Evaluator::CheckDepth(const ConfigValue& value, const Expr& at) const {
  if (Depth(value) > kMaxValueDepth) {
    Fail(at, "a value nested deeper than " + std::to_string(kMaxValueDepth) + " levels (petrsim's limit)");
  }
}

Flow Evaluator::For(const Stmt& s) {
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

Flow Evaluator::While(const Stmt& s) {
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
void Evaluator::UnknownAssigned(const Stmt& s, const std::string& reason) {
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

void Evaluator::CollectTarget(const Expr& e, const Stmt* at,
                              std::vector<std::pair<std::string, const Stmt*>>* out) const {
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

void Evaluator::CollectAssigned(const Stmt& s, std::vector<std::pair<std::string, const Stmt*>>* out, bool top) const {
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
void Evaluator::ExecExpression(const Stmt& s) {
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

std::string Evaluator::RootName(const Expr& e) {
  if (e.kind == ExprKind::kName) return e.text;
  if (e.kind == ExprKind::kSubscript || e.kind == ExprKind::kAttribute) return RootName(*e.items[0]);
  return "";
}

void Evaluator::SetRoot(const std::string& root, ConfigValue v) {
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
ConfigValue* Evaluator::Resolve(const Expr& e) {
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

size_t Evaluator::Index(int64_t i, size_t size, const Expr& at) const {
  const int64_t n = static_cast<int64_t>(size);
  if (i < 0) i += n;
  if (i < 0 || i >= n) Fail(at, "index out of range (Python raises IndexError)");
  return static_cast<size_t>(i);
}

// Binds `value` to an assignment target; each target kind has its own function below.
void Evaluator::Assign(const Expr& target, ConfigValue value) {
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
void Evaluator::AssignUnpack(const Expr& target, ConfigValue value) {
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
void Evaluator::AssignSubscript(const Expr& target, ConfigValue value) {
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
void Evaluator::AssignAttribute(const Expr& target) {
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

void Evaluator::Delete(const Expr& target) {
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

}  // namespace evaluator_internal

ModuleValues EvaluateModule(const Module& module, const EvaluateOptions& options, Budget* budget) {
  return evaluator_internal::Evaluator(module, options, budget).Run();
}

}  // namespace petrsim::pyconfig
