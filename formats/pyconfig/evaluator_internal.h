// Internals of the config evaluator (evaluator.h), shared by its files and by nothing else: the
// Evaluator class, whose members evaluator*.cc define by concept, and the value helpers they use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "formats/pyconfig/ast.h"
#include "formats/pyconfig/evaluator.h"
#include "formats/pyconfig/lexer.h"
#include "formats/pyconfig/value.h"

namespace petrsim::pyconfig::evaluator_internal {

using Kind = ConfigValue::Kind;

inline constexpr char kUnsupportedTail[] = " is not supported in a config petrsim reads without running it";

const char* PyType(const ConfigValue& v);
bool IsNumeric(const ConfigValue& v);
bool IsIntLike(const ConfigValue& v);
int64_t IntOf(const ConfigValue& v);
double FloatOf(const ConfigValue& v);
std::vector<ConfigValue>* MutableSequence(ConfigValue* v);
// The code points of UTF-8 text (the text was checked to be UTF-8).
std::vector<std::string> CodePoints(const std::string& s);
size_t CodePointCount(const std::string& s);
// Python's str() of a value (None for an unknown's caller to handle).
std::string PyStr(const ConfigValue& v);

// The result of a statement for loops.
enum class Flow { kNormal, kBreak, kContinue };

// Evaluates one module's statements (evaluator.h). Its members are defined by concept:
// evaluator.cc (Run, names and scopes, statements and assignment targets), evaluator_expressions.cc
// (expressions, displays, comprehensions, subscripts), evaluator_operators.cc (comparisons and
// arithmetic), evaluator_format.cc (f-strings and format specs, str.format), evaluator_builtins.cc
// (calls and the builtins) and evaluator_methods.cc (str/list/dict methods, those that change a value).
class Evaluator {
 public:
  Evaluator(const Module& module, const EvaluateOptions& options, Budget* budget)
      : module_(module), path_(module.path), options_(options), budget_(budget) {}

  ModuleValues Run();

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

  const ConfigValue* Lookup(const std::string& name);
  static bool IsBuiltin(const std::string& name);
  ConfigValue EvalName(const Expr& e);
  void Bind(const std::string& name, ConfigValue value, int line, int col);

  // ---- statements
  Flow Exec(const Stmt& s);
  void ExecAssign(const Stmt& s);
  void ExecAugAssign(const Stmt& s);
  void ExecImport(const Stmt& s);
  void ExecImportFrom(const Stmt& s);
  Flow ExecLoopJump(const Stmt& s) const;
  Flow ExecIf(const Stmt& s);
  Flow ExecBlock(const std::vector<StmtPtr>& body);
  void CheckDepth(const ConfigValue& value, const Expr& at) const;
  Flow For(const Stmt& s);
  Flow While(const Stmt& s);
  void UnknownAssigned(const Stmt& s, const std::string& reason);
  void CollectTarget(const Expr& e, const Stmt* at, std::vector<std::pair<std::string, const Stmt*>>* out) const;
  void CollectAssigned(const Stmt& s, std::vector<std::pair<std::string, const Stmt*>>* out, bool top) const;
  void ExecExpression(const Stmt& s);
  static std::string RootName(const Expr& e);
  void SetRoot(const std::string& root, ConfigValue v);
  ConfigValue* Resolve(const Expr& e);
  size_t Index(int64_t i, size_t size, const Expr& at) const;
  void Assign(const Expr& target, ConfigValue value);
  void AssignUnpack(const Expr& target, ConfigValue value);
  void AssignSubscript(const Expr& target, ConfigValue value);
  void AssignAttribute(const Expr& target);
  void Delete(const Expr& target);

  // ---- expressions
  ConfigValue Eval(const Expr& e);
  ConfigValue EvalExpression(const Expr& e);
  std::optional<ConfigValue> EvalConstant(const Expr& e);
  ConfigValue Display(const Expr& e);
  ConfigValue BoolOp(const Expr& e);
  ConfigValue EvalComprehension(const Expr& e);
  std::optional<ConfigValue> Items(const std::vector<ExprPtr>& exprs, std::vector<ConfigValue>* out);
  std::string DictKey(const ConfigValue& key, const Expr& at);
  ConfigValue DictDisplay(const Expr& e);
  void Splice(int line, int col, ConfigValue from, ConfigDictBuilder* into, bool call);
  std::vector<ConfigValue> Iterate(ConfigValue v, const Expr& at);
  std::optional<ConfigValue> Comprehend(const Expr& e, std::vector<ConfigValue>* out, ConfigDictBuilder* dict);
  std::optional<ConfigValue> Generate(const Expr& e, size_t level, std::vector<ConfigValue>* out,
                                      ConfigDictBuilder* dict);
  ConfigValue Attribute(const Expr& e);
  static std::string Dotted(const Expr& e);
  ConfigValue Subscript(const Expr& e);
  ConfigValue Slice(const Expr& e, ConfigValue object, std::optional<int64_t> start, std::optional<int64_t> stop,
                    std::optional<int64_t> step_given);

  // ---- comparisons
  std::optional<int> Order(const ConfigValue& a, const ConfigValue& b) const;
  bool Equal(const ConfigValue& a, const ConfigValue& b) const;

  // Whether a (possibly nested) value holds an unknown.
  static bool HasUnknown(const ConfigValue& v) { return FindUnknown(v) != nullptr; }

  ConfigValue CompareChain(const Expr& e);

  // ---- arithmetic, with Python's semantics
  [[noreturn]] void ZeroDivision(const Expr& op, const char* what) const;
  [[noreturn]] void Overflow(const Expr& op, const std::string& o) const;
  [[noreturn]] void TypeError(const Expr& op, const std::string& o, const ConfigValue& a, const ConfigValue& b) const;
  void CheckPlaceholderOperand(const Expr& op, const std::string& o, const ConfigValue& v) const;
  ConfigValue Unary(const Expr& e, ConfigValue v);
  ConfigValue Binary(const Expr& e, const std::string& o, ConfigValue a, ConfigValue b);
  void Bitwise(const Expr& e, const std::string& o, const ConfigValue& a, const ConfigValue& b, ConfigValue* out);
  ConfigValue Repeat(const Expr& e, ConfigValue seq, int64_t times, const std::string& where);
  int64_t IntOp(const Expr& e, const std::string& o, int64_t x, int64_t y) const;
  void IntPower(const Expr& e, const std::string& o, int64_t x, int64_t y, ConfigValue* out) const;
  double FloatOp(const Expr& e, const std::string& o, double x, double y) const;

  // ---- f-strings and formatting
  ConfigValue JoinedStr(const Expr& e);

  std::optional<std::string> StrFormat(const std::string& format, const std::vector<ConfigValue>& args,
                                       const std::vector<std::pair<std::string, ConfigValue>>& kwargs, const Expr& at,
                                       int nesting = 0);
  // Which arguments a str.format call's automatic and manual fields have used, shared with the
  // fields nested in a spec.
  struct FormatNumbering {
    size_t auto_index = 0;
    bool used_auto = false;
    bool used_manual = false;
  };
  std::optional<std::string> FormatField(const std::string& field, const std::vector<ConfigValue>& args,
                                         const std::vector<std::pair<std::string, ConfigValue>>& kwargs, const Expr& at,
                                         int nesting, FormatNumbering* numbering);
  const ConfigValue* FormatArgument(const std::string& name, const std::vector<ConfigValue>& args,
                                    const std::vector<std::pair<std::string, ConfigValue>>& kwargs, const Expr& at,
                                    FormatNumbering* numbering);
  std::optional<std::string> FormatNestedSpec(const std::string& spec, const std::vector<ConfigValue>& args,
                                              const std::vector<std::pair<std::string, ConfigValue>>& kwargs,
                                              const Expr& at, int nesting, FormatNumbering* numbering);
  std::optional<ConfigValue> FormatConversion(const ConfigValue& value, char conversion, const Expr& at);

  // ---- calls
  struct Args {
    std::vector<ConfigValue> positional;
    std::vector<std::pair<std::string, ConfigValue>> keywords;
  };

  std::optional<ConfigValue> EvalArgs(const Expr& call, Args* out);
  const ConfigValue* KeywordArg(const Args& args, const std::string& name) const;
  ConfigValue Call(const Expr& e);
  [[noreturn]] void ArgCount(const Expr& e, const std::string& name, const std::string& expected) const;
  static const ConfigValue* UnknownArg(const Args& args);
  ConfigValue Builtin(const Expr& e, const std::string& name);
  ConfigValue Int(const Expr& e, Args& args);
  static std::optional<int64_t> ParseInt(const std::string& text, int base);
  static std::optional<double> ParseFloat(const std::string& text);
  ConfigValue Round(const Expr& e, Args& args);
  ConfigValue Range(const Expr& e, const std::vector<ConfigValue>& pos);

  // ---- methods of known values
  ConfigValue Method(const Expr& e, const std::string& name, ConfigValue object);
  void MutatingCall(const Expr& e, const std::string& name, ConfigValue* target);
  bool MutateList(const Expr& e, const std::string& name, Args& args, ConfigValue* target);
  bool MutateDict(const Expr& e, const std::string& name, Args& args, ConfigValue* target);

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

}  // namespace petrsim::pyconfig::evaluator_internal
