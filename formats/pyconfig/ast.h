// An abstract syntax tree of Python 3.11 (expressions and statements), shaped like CPython's own
// `ast` module so that the two can be compared (ast_dump_main.cc, ast_oracle_test.py). The parser
// (parser.h) builds it from tokens; the config evaluator (evaluator.h) walks it without running
// anything; a later reader of a dataset class's source walks the same tree.
// One node type per family (Expr, Stmt) with a kind and the fields each kind uses, documented at
// the kind: simpler to walk and to dump than a class per node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace petrsim::pyconfig {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;

// A call's or a class's keyword argument: `name=value`, or `**value` (name empty).
struct Keyword {
  std::string name;
  ExprPtr value;
  int line = 0;
  int col = 0;
};

// One `for target in iter if cond ...` of a comprehension.
struct Comprehension {
  ExprPtr target;
  ExprPtr iter;
  std::vector<ExprPtr> ifs;
  bool is_async = false;
};

// One parameter of a def or a lambda.
struct Arg {
  std::string name;
  ExprPtr annotation;  // null when none (always null in a lambda)
  int line = 0;
  int col = 0;
};

// A def's or a lambda's parameters, as CPython's ast.arguments.
struct Arguments {
  std::vector<Arg> posonlyargs;
  std::vector<Arg> args;
  std::unique_ptr<Arg> vararg;  // *args
  std::vector<Arg> kwonlyargs;
  std::vector<ExprPtr> kw_defaults;  // one per kwonlyarg, null where none
  std::unique_ptr<Arg> kwarg;        // **kwargs
  std::vector<ExprPtr> defaults;     // for the last len(defaults) of posonlyargs + args
};

enum class ExprKind : uint8_t {
  kConstant,        // constant: None, True/False, int, float, str, bytes, Ellipsis, imaginary
  kName,            // text: the identifier
  kBaseRef,         // text: the variable of an mmcv `{{_base_.text}}` placeholder
  kAttribute,       // items[0].text
  kSubscript,       // items[0][items[1]]
  kSlice,           // items[0]:items[1]:items[2], each may be null
  kCall,            // items[0](items[1:]..., keywords)
  kStarred,         // *items[0]
  kList,            // [items...]
  kTuple,           // (items...)
  kSet,             // {items...}
  kDict,            // {items[i]: values[i]}; items[i] null for `**values[i]`
  kBinOp,           // items[0] text items[1]; text: + - * / // % ** @ << >> & | ^
  kUnaryOp,         // text items[0]; text: + - ~ not
  kBoolOp,          // items joined by text: and, or
  kCompare,         // items[0] ops[0] items[1] ops[1] items[2] ...
  kIfExp,           // items[1] if items[0] else items[2] (CPython's order: test, body, orelse)
  kListComp,        // [items[0] generators]
  kSetComp,         // {items[0] generators}
  kGeneratorExp,    // (items[0] generators)
  kDictComp,        // {items[0]: items[1] generators}
  kLambda,          // lambda args: items[0]
  kJoinedStr,       // an f-string: items are kConstant strings and kFormattedValue
  kFormattedValue,  // {items[0]!conversion:items[1]}; items[1] null or a kJoinedStr
  kNamedExpr,       // items[0] := items[1]
  kYield,           // yield items[0] (items[0] may be null)
  kYieldFrom,       // yield from items[0]
  kAwait,           // await items[0]
};

struct Constant {
  enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kBytes, kEllipsis, kImaginary };
  Kind kind = Kind::kNone;
  bool bool_value = false;
  int64_t int_value = 0;
  double float_value = 0;
  std::string text;  // a str's or bytes' value; an imaginary literal's source text
};

struct Expr {
  ExprKind kind = ExprKind::kConstant;
  int line = 0;
  int col = 0;  // 1-based
  std::string text;
  Constant constant;
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> values;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in "not in" is "is not"
  std::vector<Keyword> keywords;
  std::vector<Comprehension> generators;
  std::unique_ptr<Arguments> args;
  int conversion = -1;  // kFormattedValue: -1, 's', 'r', 'a'
  // kBinOp, kUnaryOp, kBoolOp, kCompare: where the (first) operator is, for messages.
  int op_line = 0;
  int op_col = 0;
  // kDict: where each `**` is (0, 0 for a `key: value` entry), for messages.
  std::vector<std::pair<int, int>> unpack_at;
  // Where the outermost parentheses around this expression open (0 when none): CPython's position
  // of a node built over it, e.g. the BinOp of `(a + b) * c`.
  int paren_line = 0;
  int paren_col = 0;
  int depth = 1;  // of the tree below, bounded by the parser (kMaxExpressionDepth)
};

struct Alias {       // `name as asname` of an import
  std::string name;  // dotted for `import a.b`
  std::string asname;
  int line = 0;
  int col = 0;
};

struct ExceptHandler {
  ExprPtr type;  // null for a bare except
  std::string name;
  std::vector<StmtPtr> body;
  int line = 0;
  int col = 0;
};

struct WithItem {
  ExprPtr context;
  ExprPtr target;  // null when no `as`
};

enum class StmtKind : uint8_t {
  kExpr,         // value
  kAssign,       // targets[0] = targets[1] = ... = value
  kAugAssign,    // targets[0] op= value; op: + - * ...
  kAnnAssign,    // targets[0]: annotation [= value]; simple: the target is a plain name
  kIf,           // if test: body else: orelse (elif: an If in orelse)
  kFor,          // for targets[0] in value: body else: orelse
  kWhile,        // while test: body else: orelse
  kFunctionDef,  // decorators; def name(args) -> returns: body
  kClassDef,     // decorators; class name(bases, keywords): body
  kReturn,       // return value (may be null)
  kPass,
  kBreak,
  kContinue,
  kImport,      // import names
  kImportFrom,  // from (level dots) module import names
  kTry,         // try: body handlers else: orelse finally: finalbody
  kWith,        // with items: body
  kRaise,       // raise value from cause (each may be null)
  kAssert,      // assert test, value
  kDelete,      // del targets
  kGlobal,      // global identifiers
  kNonlocal,    // nonlocal identifiers
};

struct Stmt {
  StmtKind kind = StmtKind::kPass;
  int line = 0;
  int col = 0;
  bool is_async = false;  // async def / for / with
  bool simple = false;    // kAnnAssign of a plain name
  std::string op;         // kAugAssign
  std::string name;       // def / class
  std::string module;     // kImportFrom
  int level = 0;          // kImportFrom: leading dots
  ExprPtr test;           // if / while / assert
  ExprPtr value;          // assignment value, expression, for's iter, return, raise's exception, assert's msg
  ExprPtr annotation;     // kAnnAssign
  ExprPtr cause;          // raise ... from cause
  ExprPtr returns;        // def -> returns
  std::vector<ExprPtr> targets;
  std::vector<StmtPtr> body;
  std::vector<StmtPtr> orelse;
  std::vector<StmtPtr> finalbody;
  std::vector<ExceptHandler> handlers;
  std::vector<Alias> names;
  std::vector<std::string> identifiers;
  std::vector<ExprPtr> decorators;
  std::vector<ExprPtr> bases;
  std::vector<Keyword> keywords;
  std::vector<WithItem> items;
  std::unique_ptr<Arguments> args;
};

// A file: its statements, and the path that names it in messages.
struct Module {
  std::string path;
  std::vector<StmtPtr> body;
};

}  // namespace petrsim::pyconfig
