// Python source to an AST by recursive descent over the grammar of Python 3.11's reference; see
// parser.h. This file: the Parser's core (the file, messages, statements and assignment targets).
#include "formats/pyconfig/parser.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "base/error.h"
#include "formats/pyconfig/limits.h"
#include "formats/pyconfig/parser_internal.h"

namespace petrsim::pyconfig {
namespace parser_internal {

Module Parser::File() {
  Module module;
  module.path = path_;
  while (Tok().kind != TK::kEnd) {
    if (Tok().kind == TK::kNewline) {
      Advance();
      continue;
    }
    Statement(&module.body);
  }
  return module;
}

// An f-string's expression: a test list, then the end.
ExprPtr Parser::StandaloneExpression(const char* what) {
  if (Tok().kind == TK::kNewline || Tok().kind == TK::kEnd) Fail(Tok(), std::string("f-string: empty ") + what);
  ExprPtr e = TestListStarExpr();
  if (Tok().kind != TK::kNewline && Tok().kind != TK::kEnd) FailExpected(Tok(), "'}' after an f-string expression");
  return e;
}

std::string Parser::Describe(const Token& t) {
  switch (t.kind) {
    case TK::kName:
      return IsKeyword(t.text) ? "the keyword '" + t.text + "'" : "the name '" + t.text + "'";
    case TK::kInt:
    case TK::kFloat:
      return "the number " + t.text;
    case TK::kString:
    case TK::kFString:
      return "a string";
    case TK::kBaseRef:
      return t.text;
    case TK::kOp:
      return "'" + t.text + "'";
    case TK::kNewline:
      return "the end of the line";
    case TK::kIndent:
      return "an indentation";
    case TK::kDedent:
      return "the end of an indented block";
    case TK::kEnd:
      return "the end of the file";
  }
  return "a token";
}

void Parser::FailExpected(const Token& t, const std::string& expected) const {
  if (t.kind == TK::kIndent) Fail(t, "unexpected indentation (a Python IndentationError)");
  Fail(t, "expected " + expected + ", found " + Describe(t));
}

void Parser::Expect(std::string_view op, const std::string& expected) {
  if (!AtOp(op)) FailExpected(Tok(), expected);
  Advance();
}

std::string Parser::ExpectName(const std::string& expected) {
  if (Tok().kind != TK::kName || IsKeyword(Tok().text)) FailExpected(Tok(), expected);
  std::string name = Tok().text;
  Advance();
  return name;
}

// Sets the depth of a node built over `children` and checks it (operator chains grow without
// recursion of the parser).
void Parser::Deepen(Expr* e, const Token& at) const {
  int deepest = 0;
  for (const ExprPtr& c : e->items) {
    if (c) deepest = std::max(deepest, c->depth);
  }
  e->depth = deepest + 1;
  if (e->depth > kMaxExpressionDepth) {
    Fail(at, "expression nested deeper than " + std::to_string(kMaxExpressionDepth) + " levels (petrsim's limit)");
  }
}

void Parser::Statement(std::vector<StmtPtr>* out) {
  const Token& t = Tok();
  if (t.kind == TK::kIndent) Fail(t, "unexpected indentation (a Python IndentationError)");
  if (t.kind == TK::kDedent) FailExpected(t, "a statement");
  const Guard guard(this, t, &block_depth_, kMaxStatementsNesting, "blocks");
  if (t.kind == TK::kName) {
    const std::string& w = t.text;
    if (w == "if") return out->push_back(If());
    if (w == "while") return out->push_back(While());
    if (w == "for") return out->push_back(For(false, t));
    if (w == "try") return out->push_back(Try());
    if (w == "with") return out->push_back(With(false, t));
    if (w == "def") return out->push_back(FunctionDef({}, false, t));
    if (w == "class") return out->push_back(ClassDef({}));
    if (w == "async") {
      Advance();
      if (AtName("def")) return out->push_back(FunctionDef({}, true, t));
      if (AtName("for")) return out->push_back(For(true, t));
      if (AtName("with")) return out->push_back(With(true, t));
      FailExpected(Tok(), "'def', 'for' or 'with' after 'async'");
    }
  }
  if (IsOp(t, "@")) return out->push_back(Decorated());
  SimpleStatements(out);
}

void Parser::SimpleStatements(std::vector<StmtPtr>* out) {
  out->push_back(SimpleStatement());
  while (AtOp(";")) {
    Advance();
    if (Tok().kind == TK::kNewline || Tok().kind == TK::kEnd) break;
    out->push_back(SimpleStatement());
  }
  if (Tok().kind == TK::kNewline) {
    Advance();
    return;
  }
  if (Tok().kind == TK::kEnd) return;
  FailExpected(Tok(), "an operator or the end of the statement");
}

// A block after ':': statements on the same line, or an indented block.
std::vector<StmtPtr> Parser::Block() {
  std::vector<StmtPtr> body;
  if (Tok().kind != TK::kNewline) {
    if (Tok().kind == TK::kEnd) FailExpected(Tok(), "a statement after ':'");
    SimpleStatements(&body);
    return body;
  }
  Advance();
  if (Tok().kind != TK::kIndent) {
    Fail(Tok(), "expected an indented block (a Python IndentationError), found " + Describe(Tok()));
  }
  Advance();
  while (Tok().kind != TK::kDedent && Tok().kind != TK::kEnd) {
    if (Tok().kind == TK::kNewline) {
      Advance();
      continue;
    }
    Statement(&body);
  }
  if (Tok().kind == TK::kDedent) Advance();
  return body;
}

StmtPtr Parser::If() {
  StmtPtr s = SNode(StmtKind::kIf, Tok());
  Advance();  // if / elif
  s->test = NamedExprTest();
  Expect(":", "':' after the condition of an if");
  s->body = Block();
  if (AtName("elif")) {
    s->orelse.push_back(If());
  } else if (AtName("else")) {
    Advance();
    Expect(":", "':' after 'else'");
    s->orelse = Block();
  }
  return s;
}

StmtPtr Parser::While() {
  StmtPtr s = SNode(StmtKind::kWhile, Tok());
  Advance();
  s->test = NamedExprTest();
  Expect(":", "':' after the condition of a while loop");
  s->body = Block();
  Else(s.get());
  return s;
}

void Parser::Else(Stmt* s) {
  if (!AtName("else")) return;
  Advance();
  Expect(":", "':' after 'else'");
  s->orelse = Block();
}

StmtPtr Parser::For(bool is_async, const Token& start) {
  StmtPtr s = SNode(StmtKind::kFor, start);
  s->is_async = is_async;
  Advance();  // for
  s->targets.push_back(TargetList());
  CheckTarget(*s->targets[0], "a for loop's target");
  if (!AtName("in")) FailExpected(Tok(), "'in' in a for loop");
  Advance();
  s->value = TestListStarExpr();
  Expect(":", "':' after a for loop's iterable");
  s->body = Block();
  Else(s.get());
  return s;
}

StmtPtr Parser::Try() {
  StmtPtr s = SNode(StmtKind::kTry, Tok());
  Advance();
  Expect(":", "':' after 'try'");
  s->body = Block();
  while (AtName("except")) {
    ExceptHandler h;
    h.line = Tok().line;
    h.col = Tok().col;
    Advance();
    if (AtOp("*")) Advance();  // except* (3.11)
    if (!AtOp(":")) {
      h.type = Test();
      if (AtOp(",")) {
        const Token& comma = Tok();
        auto tuple = NodeAt(ExprKind::kTuple, *h.type);
        tuple->items.push_back(std::move(h.type));
        while (AtOp(",")) {
          Advance();
          if (AtOp(":") || AtName("as")) break;
          tuple->items.push_back(Test());
        }
        Deepen(tuple.get(), comma);
        h.type = std::move(tuple);
      }
      if (AtName("as")) {
        Advance();
        h.name = ExpectName("a name after 'as'");
      }
    }
    Expect(":", "':' after an except clause");
    h.body = Block();
    s->handlers.push_back(std::move(h));
  }
  Else(s.get());
  if (AtName("finally")) {
    Advance();
    Expect(":", "':' after 'finally'");
    s->finalbody = Block();
  }
  if (s->handlers.empty() && s->finalbody.empty()) FailExpected(Tok(), "'except' or 'finally' after a try block");
  return s;
}

StmtPtr Parser::With(bool is_async, const Token& start) {
  StmtPtr s = SNode(StmtKind::kWith, start);
  s->is_async = is_async;
  Advance();  // with
  // with (a as b, c as d): parenthesized items (3.10) look like a tuple; told apart by `as`.
  bool parenthesized = false;
  if (AtOp("(")) {
    int depth = 0;
    size_t i = pos_;
    for (; i < toks_.size(); ++i) {
      const Token& t = toks_[i];
      if (t.kind == TK::kOp && (t.text == "(" || t.text == "[" || t.text == "{")) ++depth;
      if (t.kind == TK::kOp && (t.text == ")" || t.text == "]" || t.text == "}")) --depth;
      if (depth == 1 && IsName(t, "as")) parenthesized = true;
      if (depth == 0 || t.kind == TK::kNewline || t.kind == TK::kEnd) break;
    }
    parenthesized = parenthesized && i + 1 < toks_.size() && IsOp(toks_[i + 1], ":");
  }
  if (parenthesized) Advance();
  while (true) {
    WithItem item;
    item.context = Test();
    if (AtName("as")) {
      Advance();
      item.target = Target();
      CheckTarget(*item.target, "a with statement's target");
    }
    s->items.push_back(std::move(item));
    if (!AtOp(",")) break;
    Advance();
    if (parenthesized && AtOp(")")) break;
  }
  if (parenthesized) Expect(")", "')' after the items of a with statement");
  Expect(":", "':' after a with statement's items");
  s->body = Block();
  return s;
}

StmtPtr Parser::Decorated() {
  std::vector<ExprPtr> decorators;
  while (AtOp("@")) {
    Advance();
    decorators.push_back(NamedExprTest());
    if (Tok().kind != TK::kNewline) FailExpected(Tok(), "the end of the line after a decorator");
    Advance();
  }
  const Token& t = Tok();
  if (AtName("def")) return FunctionDef(std::move(decorators), false, t);
  if (AtName("class")) return ClassDef(std::move(decorators));
  if (AtName("async") && IsName(Peek(1), "def")) {
    Advance();
    return FunctionDef(std::move(decorators), true, t);
  }
  FailExpected(t, "'def' or 'class' after a decorator");
}

StmtPtr Parser::FunctionDef(std::vector<ExprPtr> decorators, bool is_async, const Token& start) {
  StmtPtr s = SNode(StmtKind::kFunctionDef, start);
  s->is_async = is_async;
  s->decorators = std::move(decorators);
  if (!s->decorators.empty()) {
    // CPython's position of a decorated def is its `def` line.
    s->line = Tok().line;
    s->col = is_async ? start.col : Tok().col;
    if (is_async) s->line = start.line;
  }
  Advance();  // def
  s->name = ExpectName("a function's name after 'def'");
  Expect("(", "'(' after a function's name");
  s->args = Parameters(")", true);
  Expect(")", "')' after a function's parameters");
  if (AtOp("->")) {
    Advance();
    s->returns = Test();
  }
  Expect(":", "':' after a function's signature");
  s->body = Block();
  return s;
}

StmtPtr Parser::ClassDef(std::vector<ExprPtr> decorators) {
  StmtPtr s = SNode(StmtKind::kClassDef, Tok());
  s->decorators = std::move(decorators);
  Advance();  // class
  s->name = ExpectName("a class name after 'class'");
  if (AtOp("(")) {
    Advance();
    std::vector<ExprPtr> args;
    Arguments(&args, &s->keywords, ")");
    s->bases = std::move(args);
    Expect(")", "')' after a class's bases");
  }
  Expect(":", "':' after a class's name");
  s->body = Block();
  return s;
}

// A def's (annotations allowed) or a lambda's parameters, up to `close`.
std::unique_ptr<pyconfig::Arguments> Parser::Parameters(std::string_view close, bool annotations) {
  auto a = std::make_unique<pyconfig::Arguments>();
  bool keyword_only = false;
  bool seen_default = false;
  std::unordered_set<std::string> names;
  auto param = [&](bool allow_annotation) {
    Arg arg;
    arg.line = Tok().line;
    arg.col = Tok().col;
    arg.name = ExpectName("a parameter name");
    if (!names.insert(arg.name).second) {
      Fail(toks_[pos_ - 1], "duplicate argument '" + arg.name + "' in function definition (a Python SyntaxError)");
    }
    if (allow_annotation && annotations && AtOp(":")) {
      Advance();
      arg.annotation = Test();
    }
    return arg;
  };
  while (!AtOp(close)) {
    if (AtOp("**")) {
      Advance();
      a->kwarg = std::make_unique<Arg>(param(true));
      if (AtOp(",")) Advance();
      if (!AtOp(close)) FailExpected(Tok(), "'" + std::string(close) + "' after **kwargs");
      break;
    }
    if (AtOp("*")) {
      if (keyword_only) Fail(Tok(), "* argument may appear only once (a Python SyntaxError)");
      Advance();
      keyword_only = true;
      if (!AtOp(",") && !AtOp(close)) a->vararg = std::make_unique<Arg>(param(true));
    } else if (AtOp("/")) {
      if (keyword_only || !a->posonlyargs.empty() || a->args.empty()) {
        Fail(Tok(), "'/' must come after the positional parameters (a Python SyntaxError)");
      }
      Advance();
      a->posonlyargs = std::move(a->args);
      a->args.clear();
    } else {
      Arg arg = param(true);
      ExprPtr def;
      if (AtOp("=")) {
        Advance();
        def = Test();
      }
      if (keyword_only) {
        a->kwonlyargs.push_back(std::move(arg));
        a->kw_defaults.push_back(std::move(def));
      } else {
        if (def) {
          seen_default = true;
          a->defaults.push_back(std::move(def));
        } else if (seen_default) {
          Fail(toks_[pos_ - 1], "non-default argument follows default argument (a Python SyntaxError)");
        }
        a->args.push_back(std::move(arg));
      }
    }
    if (AtOp(close)) break;
    Expect(",", "',' or '" + std::string(close) + "' in the parameters");
  }
  return a;
}

StmtPtr Parser::SimpleStatement() {
  const Token& t = Tok();
  if (t.kind == TK::kName) {
    if (StmtPtr s = KeywordStatement(t)) return s;
  }
  return ExpressionStatement(t);
}

// A simple statement that starts with its keyword (at `t`, a name); nullptr when `t` is no such
// keyword.
StmtPtr Parser::KeywordStatement(const Token& t) {
  const std::string& w = t.text;
  if (w == "pass" || w == "break" || w == "continue") {
    Advance();
    return SNode(w == "pass" ? StmtKind::kPass : w == "break" ? StmtKind::kBreak : StmtKind::kContinue, t);
  }
  if (w == "return") {
    StmtPtr s = SNode(StmtKind::kReturn, t);
    Advance();
    if (!AtStatementEnd()) s->value = TestListStarExpr();
    return s;
  }
  if (w == "import") return Import();
  if (w == "from") return ImportFrom();
  if (w == "raise") {
    StmtPtr s = SNode(StmtKind::kRaise, t);
    Advance();
    if (!AtStatementEnd()) {
      s->value = Test();
      if (AtName("from")) {
        Advance();
        s->cause = Test();
      }
    }
    return s;
  }
  if (w == "assert") {
    StmtPtr s = SNode(StmtKind::kAssert, t);
    Advance();
    s->test = Test();
    if (AtOp(",")) {
      Advance();
      s->value = Test();
    }
    return s;
  }
  if (w == "del") {
    StmtPtr s = SNode(StmtKind::kDelete, t);
    Advance();
    while (true) {
      s->targets.push_back(Target());
      CheckTarget(*s->targets.back(), "a del statement's target");
      if (!AtOp(",")) break;
      Advance();
      if (AtStatementEnd()) break;
    }
    return s;
  }
  if (w == "global" || w == "nonlocal") {
    StmtPtr s = SNode(w == "global" ? StmtKind::kGlobal : StmtKind::kNonlocal, t);
    Advance();
    s->identifiers.push_back(ExpectName("a name after '" + w + "'"));
    while (AtOp(",")) {
      Advance();
      s->identifiers.push_back(ExpectName("a name after ','"));
    }
    return s;
  }
  static const std::unordered_set<std::string> kCompound = {"if",     "elif",    "else", "while", "for",  "try",
                                                            "except", "finally", "with", "def",   "class"};
  if (kCompound.count(w) > 0) FailExpected(t, "a statement");
  return nullptr;
}

// An expression statement or an assignment (plain, annotated or augmented), starting at `t`.
StmtPtr Parser::ExpressionStatement(const Token& t) {
  ExprPtr first = AtName("yield") ? Yield() : TestListStarExpr();
  if (AtOp("=")) {
    StmtPtr s = SNode(StmtKind::kAssign, t);
    s->targets.push_back(std::move(first));
    while (AtOp("=")) {
      const Token& eq = Tok();
      Advance();
      if (AtStatementEnd()) FailExpected(Tok(), "an expression after '='");
      ExprPtr next = AtName("yield") ? Yield() : TestListStarExpr();
      if (AtOp("=")) {
        s->targets.push_back(std::move(next));
      } else {
        s->value = std::move(next);
      }
      (void)eq;
    }
    for (const ExprPtr& target : s->targets) CheckTarget(*target, "an assignment's target");
    return s;
  }
  if (AtOp(":")) {
    StmtPtr s = SNode(StmtKind::kAnnAssign, t);
    if (first->kind != ExprKind::kName && first->kind != ExprKind::kAttribute && first->kind != ExprKind::kSubscript) {
      Fail(t, "only a single target (not a tuple or list) can be annotated (a Python SyntaxError)");
    }
    s->simple = first->kind == ExprKind::kName && !IsOp(t, "(");
    s->targets.push_back(std::move(first));
    Advance();
    s->annotation = Test();
    if (AtOp("=")) {
      Advance();
      s->value = AtName("yield") ? Yield() : TestListStarExpr();
    }
    return s;
  }
  static const std::unordered_set<std::string> kAugmented = {
      "+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", ">>=", "<<=", "&=", "|=", "^="};
  if (Tok().kind == TK::kOp && kAugmented.count(Tok().text) > 0) {
    StmtPtr s = SNode(StmtKind::kAugAssign, t);
    if (first->kind != ExprKind::kName && first->kind != ExprKind::kAttribute && first->kind != ExprKind::kSubscript) {
      Fail(t, "illegal expression for augmented assignment (a Python SyntaxError)");
    }
    s->op = Tok().text.substr(0, Tok().text.size() - 1);
    Advance();
    s->targets.push_back(std::move(first));
    s->value = AtName("yield") ? Yield() : TestListStarExpr();
    return s;
  }
  StmtPtr s = SNode(StmtKind::kExpr, t);
  s->value = std::move(first);
  return s;
}

StmtPtr Parser::Import() {
  StmtPtr s = SNode(StmtKind::kImport, Tok());
  Advance();
  while (true) {
    Alias alias;
    alias.line = Tok().line;
    alias.col = Tok().col;
    alias.name = DottedName();
    if (AtName("as")) {
      Advance();
      alias.asname = ExpectName("a name after 'as'");
    }
    s->names.push_back(std::move(alias));
    if (!AtOp(",")) break;
    Advance();
  }
  return s;
}

std::string Parser::DottedName() {
  std::string name = ExpectName("a module name");
  while (AtOp(".")) {
    Advance();
    // (two appends: "." + the name makes GCC 12 warn falsely, -Wrestrict)
    name += ".";
    name += ExpectName("a name after '.'");
  }
  return name;
}

StmtPtr Parser::ImportFrom() {
  StmtPtr s = SNode(StmtKind::kImportFrom, Tok());
  Advance();
  while (AtOp(".") || AtOp("...")) {
    s->level += AtOp(".") ? 1 : 3;
    Advance();
  }
  if (!AtName("import")) s->module = DottedName();
  if (s->level == 0 && s->module.empty()) FailExpected(Tok(), "a module name after 'from'");
  if (!AtName("import")) FailExpected(Tok(), "'import'");
  Advance();
  const bool parenthesized = AtOp("(");
  if (parenthesized) Advance();
  if (AtOp("*")) {
    Alias alias;
    alias.line = Tok().line;
    alias.col = Tok().col;
    alias.name = "*";
    Advance();
    s->names.push_back(std::move(alias));
  } else {
    while (true) {
      Alias alias;
      alias.line = Tok().line;
      alias.col = Tok().col;
      alias.name = ExpectName("a name to import");
      if (AtName("as")) {
        Advance();
        alias.asname = ExpectName("a name after 'as'");
      }
      s->names.push_back(std::move(alias));
      if (!AtOp(",")) break;
      Advance();
      if (parenthesized && AtOp(")")) break;
      if (!parenthesized && AtStatementEnd()) Fail(Tok(), "trailing comma not allowed without surrounding parentheses");
    }
  }
  if (parenthesized) Expect(")", "')' after the imported names");
  return s;
}

// Assignment targets: a name, an attribute, a subscript, a starred target, or a tuple/list of
// them.
void Parser::CheckTarget(const Expr& e, const char* what) const {
  switch (e.kind) {
    case ExprKind::kName:
    case ExprKind::kAttribute:
    case ExprKind::kSubscript:
      return;
    case ExprKind::kStarred:
      return CheckTarget(*e.items[0], what);
    case ExprKind::kTuple:
    case ExprKind::kList:
      for (const ExprPtr& item : e.items) CheckTarget(*item, what);
      return;
    case ExprKind::kConstant:
      if (e.constant.kind == Constant::Kind::kNone || e.constant.kind == Constant::Kind::kBool) {
        throw ScenarioError(Location(path_, e.line, e.col) + ": cannot assign to the keyword '" +
                            (e.constant.kind == Constant::Kind::kNone ? "None"
                             : e.constant.bool_value                  ? "True"
                                                                      : "False") +
                            "'");
      }
      break;
    default:
      break;
  }
  throw ScenarioError(Location(path_, e.line, e.col) + ": cannot assign to an expression (" + what +
                      " must be a name, an attribute, a subscript or a tuple or list of them)");
}

// for-loop and comprehension targets: star_targets (no `in` operator inside).
ExprPtr Parser::TargetList() {
  const Token& start = Tok();
  ExprPtr first = Target();
  if (!AtOp(",")) return first;
  ExprPtr tuple = NodeAt(ExprKind::kTuple, *first);
  tuple->items.push_back(std::move(first));
  while (AtOp(",")) {
    Advance();
    if (AtName("in") || AtOp("=")) break;
    tuple->items.push_back(Target());
  }
  Deepen(tuple.get(), start);
  return tuple;
}

ExprPtr Parser::Target() {
  if (AtOp("*")) {
    const Token& star = Tok();
    Advance();
    ExprPtr e = Node(ExprKind::kStarred, star);
    e->items.push_back(Expression());
    Deepen(e.get(), star);
    return e;
  }
  return Expression();  // `expr`: binds tighter than `in`
}

}  // namespace parser_internal

Module ParseTokens(Lexed lexed, const std::string& path) {
  return parser_internal::Parser(std::move(lexed), path).File();
}

Module Parse(std::string_view text, const LexOptions& options) { return ParseTokens(Lex(text, options), options.path); }

}  // namespace petrsim::pyconfig
