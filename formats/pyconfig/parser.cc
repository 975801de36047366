// Python source to an AST by recursive descent over the grammar of Python 3.11's reference; see
// parser.h.
#include "formats/pyconfig/parser.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "base/error.h"
#include "formats/pyconfig/limits.h"

namespace petrsim::pyconfig {
namespace {

using TK = Token::Kind;

class Parser {
 public:
  Parser(Lexed lexed, std::string path)
      : toks_(std::move(lexed.tokens)), strings_(std::move(lexed.strings)), path_(std::move(path)) {}

  Module File() {
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
  ExprPtr StandaloneExpression(const char* what) {
    if (Tok().kind == TK::kNewline || Tok().kind == TK::kEnd) Fail(Tok(), std::string("f-string: empty ") + what);
    ExprPtr e = TestListStarExpr();
    if (Tok().kind != TK::kNewline && Tok().kind != TK::kEnd) FailExpected(Tok(), "'}' after an f-string expression");
    return e;
  }

 private:
  // ---- tokens
  const Token& Tok() const { return toks_[pos_]; }
  const Token& Peek(size_t k) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void Advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  static bool IsOp(const Token& t, std::string_view op) { return t.kind == TK::kOp && t.text == op; }
  static bool IsName(const Token& t, std::string_view name) { return t.kind == TK::kName && t.text == name; }
  bool AtOp(std::string_view op) const { return IsOp(Tok(), op); }
  bool AtName(std::string_view name) const { return IsName(Tok(), name); }
  bool AtStatementEnd() const { return Tok().kind == TK::kNewline || Tok().kind == TK::kEnd || AtOp(";"); }

  // ---- messages
  [[noreturn]] void Fail(const Token& t, const std::string& message) const {
    throw ScenarioError(Location(path_, t.line, t.col) + ": " + message);
  }
  static std::string Describe(const Token& t) {
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
  [[noreturn]] void FailExpected(const Token& t, const std::string& expected) const {
    if (t.kind == TK::kIndent) Fail(t, "unexpected indentation (a Python IndentationError)");
    Fail(t, "expected " + expected + ", found " + Describe(t));
  }
  void Expect(std::string_view op, const std::string& expected) {
    if (!AtOp(op)) FailExpected(Tok(), expected);
    Advance();
  }
  std::string ExpectName(const std::string& expected) {
    if (Tok().kind != TK::kName || IsKeyword(Tok().text)) FailExpected(Tok(), expected);
    std::string name = Tok().text;
    Advance();
    return name;
  }

  // ---- recursion guards
  class Guard {
   public:
    Guard(Parser* p, const Token& t, int* depth, int limit, const char* what) : depth_(depth) {
      if (++*depth_ > limit) {
        p->Fail(t, std::string(what) + " nested deeper than " + std::to_string(limit) + " levels (petrsim's limit)");
      }
    }
    ~Guard() { --*depth_; }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    int* depth_;
  };

  // ---- nodes
  static ExprPtr Node(ExprKind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  static ExprPtr NodeAt(ExprKind kind, const Expr& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.paren_line != 0 ? at.paren_line : at.line;
    e->col = at.paren_line != 0 ? at.paren_col : at.col;
    return e;
  }
  // Sets the depth of a node built over `children` and checks it (operator chains grow without
  // recursion of the parser).
  void Deepen(Expr* e, const Token& at) const {
    int deepest = 0;
    for (const ExprPtr& c : e->items) {
      if (c) deepest = std::max(deepest, c->depth);
    }
    e->depth = deepest + 1;
    if (e->depth > kMaxExpressionDepth) {
      Fail(at, "expression nested deeper than " + std::to_string(kMaxExpressionDepth) + " levels (petrsim's limit)");
    }
  }
  static StmtPtr SNode(StmtKind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  // ---- statements
  void Statement(std::vector<StmtPtr>* out) {
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

  void SimpleStatements(std::vector<StmtPtr>* out) {
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
  std::vector<StmtPtr> Block() {
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

  StmtPtr If() {
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

  StmtPtr While() {
    StmtPtr s = SNode(StmtKind::kWhile, Tok());
    Advance();
    s->test = NamedExprTest();
    Expect(":", "':' after the condition of a while loop");
    s->body = Block();
    Else(s.get());
    return s;
  }

  void Else(Stmt* s) {
    if (!AtName("else")) return;
    Advance();
    Expect(":", "':' after 'else'");
    s->orelse = Block();
  }

  StmtPtr For(bool is_async, const Token& start) {
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

  StmtPtr Try() {
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

  StmtPtr With(bool is_async, const Token& start) {
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

  StmtPtr Decorated() {
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

  StmtPtr FunctionDef(std::vector<ExprPtr> decorators, bool is_async, const Token& start) {
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

  StmtPtr ClassDef(std::vector<ExprPtr> decorators) {
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
  std::unique_ptr<pyconfig::Arguments> Parameters(std::string_view close, bool annotations) {
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

  StmtPtr SimpleStatement() {
    const Token& t = Tok();
    if (t.kind == TK::kName) {
      if (StmtPtr s = KeywordStatement(t)) return s;
    }
    return ExpressionStatement(t);
  }

  // A simple statement that starts with its keyword (at `t`, a name); nullptr when `t` is no such
  // keyword.
  StmtPtr KeywordStatement(const Token& t) {
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
  StmtPtr ExpressionStatement(const Token& t) {
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
      if (first->kind != ExprKind::kName && first->kind != ExprKind::kAttribute &&
          first->kind != ExprKind::kSubscript) {
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
      if (first->kind != ExprKind::kName && first->kind != ExprKind::kAttribute &&
          first->kind != ExprKind::kSubscript) {
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

  StmtPtr Import() {
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

  std::string DottedName() {
    std::string name = ExpectName("a module name");
    while (AtOp(".")) {
      Advance();
      name += "." + ExpectName("a name after '.'");
    }
    return name;
  }

  StmtPtr ImportFrom() {
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
        if (!parenthesized && AtStatementEnd())
          Fail(Tok(), "trailing comma not allowed without surrounding parentheses");
      }
    }
    if (parenthesized) Expect(")", "')' after the imported names");
    return s;
  }

  // Assignment targets: a name, an attribute, a subscript, a starred target, or a tuple/list of
  // them.
  void CheckTarget(const Expr& e, const char* what) const {
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
  ExprPtr TargetList() {
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
  ExprPtr Target() {
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

  // ---- expressions
  // star_expressions: a test or a starred expression, or a tuple of them (no brackets).
  ExprPtr TestListStarExpr() {
    const Token& start = Tok();
    ExprPtr first = TestOrStar();
    if (!AtOp(",")) return first;
    ExprPtr tuple = NodeAt(ExprKind::kTuple, *first);
    tuple->items.push_back(std::move(first));
    while (AtOp(",")) {
      Advance();
      if (AtStatementEnd() || AtOp("=") || AtOp(")") || AtOp(":") || (Tok().kind == TK::kOp && IsAugmented())) break;
      tuple->items.push_back(TestOrStar());
    }
    Deepen(tuple.get(), start);
    return tuple;
  }
  bool IsAugmented() const {
    const std::string& o = Tok().text;
    return o.size() >= 2 && o.back() == '=' && o != "==" && o != "!=" && o != "<=" && o != ">=";
  }

  ExprPtr TestOrStar() {
    if (AtOp("*")) {
      const Token& star = Tok();
      Advance();
      ExprPtr e = Node(ExprKind::kStarred, star);
      e->items.push_back(Expression());
      Deepen(e.get(), star);
      return e;
    }
    return NamedExprTest();
  }

  ExprPtr NamedExprTest() {
    const Token& start = Tok();
    if (start.kind == TK::kName && !IsKeyword(start.text) && IsOp(Peek(1), ":=")) {
      ExprPtr e = Node(ExprKind::kNamedExpr, start);
      ExprPtr target = Node(ExprKind::kName, start);
      target->text = start.text;
      Advance();
      Advance();
      e->items.push_back(std::move(target));
      e->items.push_back(Test());
      Deepen(e.get(), start);
      return e;
    }
    return Test();
  }

  ExprPtr Test() {
    const Token& start = Tok();
    const Guard guard(this, start, &depth_, kMaxNesting, "expression");
    if (AtName("lambda")) return Lambda(true);
    ExprPtr body = OrTest();
    if (!AtName("if")) return body;
    // `x if c else y`: stops before `if` where a comprehension's `if` clause could follow, which
    // the caller (Comprehension) handles by parsing its clauses with OrTest.
    Advance();
    ExprPtr e = NodeAt(ExprKind::kIfExp, *body);
    ExprPtr test = OrTest();
    if (!AtName("else")) FailExpected(Tok(), "'else' in a conditional expression");
    Advance();
    ExprPtr orelse = Test();
    e->items.push_back(std::move(test));
    e->items.push_back(std::move(body));
    e->items.push_back(std::move(orelse));
    Deepen(e.get(), start);
    return e;
  }

  // A test without a conditional expression or lambda... with one: CPython's
  // test_nocond, for comprehension `if` clauses (a lambda there is lambdef_nocond).
  ExprPtr TestNoCond() {
    const Token& start = Tok();
    const Guard guard(this, start, &depth_, kMaxNesting, "expression");
    if (AtName("lambda")) return Lambda(false);
    return OrTest();
  }

  ExprPtr Lambda(bool with_conditional) {
    const Token& start = Tok();
    Advance();
    ExprPtr e = Node(ExprKind::kLambda, start);
    e->args = Parameters(":", false);
    Expect(":", "':' after a lambda's parameters");
    e->items.push_back(with_conditional ? Test() : TestNoCond());
    Deepen(e.get(), start);
    return e;
  }

  ExprPtr OrTest() { return BoolChain("or"); }
  ExprPtr BoolChain(const char* op) {
    const Token& start = Tok();
    const bool is_or = std::string_view(op) == "or";
    ExprPtr first = is_or ? BoolChain("and") : NotTest();
    if (!AtName(op)) return first;
    ExprPtr e = NodeAt(ExprKind::kBoolOp, *first);
    e->text = op;
    e->op_line = Tok().line;
    e->op_col = Tok().col;
    e->items.push_back(std::move(first));
    while (AtName(op)) {
      Advance();
      e->items.push_back(is_or ? BoolChain("and") : NotTest());
    }
    Deepen(e.get(), start);
    return e;
  }

  ExprPtr NotTest() {
    if (!AtName("not")) return Comparison();
    const Token& op = Tok();
    const Guard guard(this, op, &depth_, kMaxNesting, "expression");
    Advance();
    ExprPtr e = Node(ExprKind::kUnaryOp, op);
    e->text = "not";
    e->op_line = op.line;
    e->op_col = op.col;
    e->items.push_back(NotTest());
    Deepen(e.get(), op);
    return e;
  }

  // The comparison operator at the current token, or "".
  std::string CompareOp() const {
    const Token& t = Tok();
    if (t.kind == TK::kOp) {
      static const std::unordered_set<std::string> kOps = {"==", "!=", "<", ">", "<=", ">="};
      if (kOps.count(t.text) > 0) return t.text;
      return "";
    }
    if (IsName(t, "in")) return "in";
    if (IsName(t, "not") && IsName(Peek(1), "in")) return "not in";
    if (IsName(t, "is")) return IsName(Peek(1), "not") ? "is not" : "is";
    return "";
  }

  ExprPtr Comparison() {
    const Token& start = Tok();
    ExprPtr first = Expression();
    std::string op = CompareOp();
    if (op.empty()) return first;
    ExprPtr e = NodeAt(ExprKind::kCompare, *first);
    e->op_line = Tok().line;
    e->op_col = Tok().col;
    e->items.push_back(std::move(first));
    while (!op.empty()) {
      Advance();
      if (op == "not in" || op == "is not") Advance();
      e->ops.push_back(op);
      e->items.push_back(Expression());
      op = CompareOp();
    }
    Deepen(e.get(), start);
    return e;
  }

  // expr: | ^ & << >> + - * / // % @ by precedence (levels 0..5).
  ExprPtr Expression() { return Binary(0); }
  ExprPtr Binary(int level) {
    static const std::vector<std::vector<std::string>> kLevels = {{"|"},        {"^"},      {"&"},
                                                                  {"<<", ">>"}, {"+", "-"}, {"*", "/", "//", "%", "@"}};
    if (level == static_cast<int>(kLevels.size())) return Factor();
    const Token& start = Tok();
    ExprPtr left = Binary(level + 1);
    const auto& ops = kLevels[static_cast<size_t>(level)];
    while (Tok().kind == TK::kOp && std::find(ops.begin(), ops.end(), Tok().text) != ops.end()) {
      const Token& op = Tok();
      Advance();
      ExprPtr e = NodeAt(ExprKind::kBinOp, *left);
      e->text = op.text;
      e->op_line = op.line;
      e->op_col = op.col;
      e->items.push_back(std::move(left));
      e->items.push_back(Binary(level + 1));
      Deepen(e.get(), op);
      left = std::move(e);
    }
    (void)start;
    return left;
  }

  ExprPtr Factor() {
    const Token& op = Tok();
    if (IsOp(op, "+") || IsOp(op, "-") || IsOp(op, "~")) {
      const Guard guard(this, op, &depth_, kMaxNesting, "expression");
      Advance();
      ExprPtr e = Node(ExprKind::kUnaryOp, op);
      e->text = op.text;
      e->op_line = op.line;
      e->op_col = op.col;
      e->items.push_back(Factor());
      Deepen(e.get(), op);
      return e;
    }
    return Power();
  }

  ExprPtr Power() {
    ExprPtr base;
    if (AtName("await")) {
      const Token& t = Tok();
      Advance();
      base = Node(ExprKind::kAwait, t);
      base->items.push_back(Primary());
      Deepen(base.get(), t);
    } else {
      base = Primary();
    }
    if (!AtOp("**")) return base;
    const Token& op = Tok();
    const Guard guard(this, op, &depth_, kMaxNesting, "expression");
    Advance();
    ExprPtr e = NodeAt(ExprKind::kBinOp, *base);
    e->text = "**";
    e->op_line = op.line;
    e->op_col = op.col;
    e->items.push_back(std::move(base));
    e->items.push_back(Factor());
    Deepen(e.get(), op);
    return e;
  }

  // An atom and its trailers: .name, (args), [subscript].
  ExprPtr Primary() {
    ExprPtr e = Atom();
    while (true) {
      const Token& t = Tok();
      if (IsOp(t, ".")) {
        Advance();
        ExprPtr a = NodeAt(ExprKind::kAttribute, *e);
        a->text = ExpectName("a name after '.'");
        a->items.push_back(std::move(e));
        Deepen(a.get(), t);
        e = std::move(a);
      } else if (IsOp(t, "(")) {
        Advance();
        ExprPtr c = NodeAt(ExprKind::kCall, *e);
        c->items.push_back(std::move(e));
        std::vector<ExprPtr> args;
        Arguments(&args, &c->keywords, ")", &t);
        Expect(")", "',' or ')' in the arguments of a call");
        for (ExprPtr& arg : args) c->items.push_back(std::move(arg));
        Deepen(c.get(), t);
        e = std::move(c);
      } else if (IsOp(t, "[")) {
        Advance();
        ExprPtr s = NodeAt(ExprKind::kSubscript, *e);
        s->items.push_back(std::move(e));
        s->items.push_back(SubscriptList());
        Expect("]", "']' after a subscript");
        Deepen(s.get(), t);
        e = std::move(s);
      } else {
        return e;
      }
    }
  }

  // Call arguments (and a class's bases) up to `close`: positional, *args, name=value, **kwargs,
  // and a lone generator expression.
  void Arguments(std::vector<ExprPtr>* args, std::vector<Keyword>* keywords, std::string_view close,
                 const Token* paren = nullptr) {
    std::unordered_set<std::string> names;
    while (!AtOp(close)) {
      const Token& t = Tok();
      if (IsOp(t, "**")) {
        Advance();
        Keyword k;
        k.line = t.line;
        k.col = t.col;
        k.value = Test();
        keywords->push_back(std::move(k));
      } else if (IsOp(t, "*")) {
        Advance();
        ExprPtr e = Node(ExprKind::kStarred, t);
        e->items.push_back(Test());
        Deepen(e.get(), t);
        args->push_back(std::move(e));
      } else if (t.kind == TK::kName && IsOp(Peek(1), "=")) {
        if (IsKeyword(t.text)) Fail(t, "the keyword '" + t.text + "' cannot be an argument name");
        if (!names.insert(t.text).second) Fail(t, "keyword argument repeated: '" + t.text + "' (a Python SyntaxError)");
        Advance();
        Advance();
        Keyword k;
        k.name = t.text;
        k.line = t.line;
        k.col = t.col;
        k.value = Test();
        keywords->push_back(std::move(k));
      } else {
        ExprPtr arg = NamedExprTest();
        if (AtName("for") || (AtName("async") && IsName(Peek(1), "for"))) {
          // f(x for x in y): CPython places the generator at the call's '('.
          ExprPtr g = paren != nullptr ? Node(ExprKind::kGeneratorExp, *paren) : NodeAt(ExprKind::kGeneratorExp, *arg);
          g->items.push_back(std::move(arg));
          Comprehensions(g.get());
          Deepen(g.get(), t);
          arg = std::move(g);
        }
        if (!keywords->empty() && keywords->back().name.empty() && arg->kind != ExprKind::kStarred) {
          Fail(t, "positional argument follows keyword argument unpacking (a Python SyntaxError)");
        }
        if (!keywords->empty() && !keywords->back().name.empty() && arg->kind != ExprKind::kStarred) {
          Fail(t, "positional argument follows keyword argument (a Python SyntaxError)");
        }
        args->push_back(std::move(arg));
      }
      if (AtOp(close)) break;
      if (!AtOp(",")) FailExpected(Tok(), "',' or '" + std::string(close) + "' in the arguments of a call");
      Advance();
    }
  }

  // A subscript: an expression, a slice, or a tuple of them.
  ExprPtr SubscriptList() {
    const Token& start = Tok();
    ExprPtr first = SliceItem();
    if (!AtOp(",")) return first;
    ExprPtr tuple = NodeAt(ExprKind::kTuple, *first);
    tuple->items.push_back(std::move(first));
    while (AtOp(",")) {
      Advance();
      if (AtOp("]")) break;
      tuple->items.push_back(SliceItem());
    }
    Deepen(tuple.get(), start);
    return tuple;
  }
  ExprPtr SliceItem() {
    const Token& start = Tok();
    ExprPtr lower;
    if (!AtOp(":")) {
      lower = TestOrStar();
      if (!AtOp(":")) return lower;
    }
    ExprPtr s = Node(ExprKind::kSlice, start);
    Advance();  // :
    ExprPtr upper;
    ExprPtr step;
    if (!AtOp(":") && !AtOp(",") && !AtOp("]")) upper = Test();
    if (AtOp(":")) {
      Advance();
      if (!AtOp(",") && !AtOp("]")) step = Test();
    }
    s->items.push_back(std::move(lower));
    s->items.push_back(std::move(upper));
    s->items.push_back(std::move(step));
    Deepen(s.get(), start);
    return s;
  }

  // `for ... in ... if ...` clauses after a comprehension's element.
  void Comprehensions(Expr* e) {
    while (AtName("for") || (AtName("async") && IsName(Peek(1), "for"))) {
      Comprehension c;
      if (AtName("async")) {
        c.is_async = true;
        Advance();
      }
      Advance();  // for
      c.target = TargetList();
      CheckTarget(*c.target, "a comprehension's target");
      if (!AtName("in")) FailExpected(Tok(), "'in' in a comprehension");
      Advance();
      c.iter = OrTest();
      while (AtName("if")) {
        Advance();
        c.ifs.push_back(TestNoCond());
      }
      e->generators.push_back(std::move(c));
    }
  }

  ExprPtr Yield() {
    const Token& t = Tok();
    Advance();
    if (AtName("from")) {
      Advance();
      ExprPtr e = Node(ExprKind::kYieldFrom, t);
      e->items.push_back(Test());
      Deepen(e.get(), t);
      return e;
    }
    ExprPtr e = Node(ExprKind::kYield, t);
    if (!AtStatementEnd() && !AtOp(")") && !AtOp("=")) {
      e->items.push_back(TestListStarExpr());
    } else {
      e->items.push_back(nullptr);
    }
    Deepen(e.get(), t);
    return e;
  }

  ExprPtr Atom() {
    const Token& t = Tok();
    switch (t.kind) {
      case TK::kInt: {
        Advance();
        ExprPtr e = Node(ExprKind::kConstant, t);
        e->constant.kind = Constant::Kind::kInt;
        e->constant.int_value = t.int_value;
        return e;
      }
      case TK::kFloat: {
        Advance();
        ExprPtr e = Node(ExprKind::kConstant, t);
        const bool imaginary = t.text.back() == 'j' || t.text.back() == 'J';
        e->constant.kind = imaginary ? Constant::Kind::kImaginary : Constant::Kind::kFloat;
        e->constant.float_value = t.float_value;
        e->constant.text = t.text;
        return e;
      }
      case TK::kString:
      case TK::kFString:
        return Strings();
      case TK::kBaseRef: {
        Advance();
        ExprPtr e = Node(ExprKind::kBaseRef, t);
        e->text = strings_[t.str];
        return e;
      }
      case TK::kName:
        return NameAtom();
      case TK::kOp:
        if (t.text == "(") return Paren();
        if (t.text == "[") return ListAtom();
        if (t.text == "{") return Brace();
        if (t.text == "...") {
          Advance();
          ExprPtr e = Node(ExprKind::kConstant, t);
          e->constant.kind = Constant::Kind::kEllipsis;
          return e;
        }
        FailExpected(t, "an expression");
      default:
        FailExpected(t, "an expression");
    }
  }

  ExprPtr NameAtom() {
    const Token& t = Tok();
    const std::string& name = t.text;
    if (IsKeyword(name)) {
      if (name == "None" || name == "True" || name == "False") {
        Advance();
        ExprPtr e = Node(ExprKind::kConstant, t);
        e->constant.kind = name == "None" ? Constant::Kind::kNone : Constant::Kind::kBool;
        e->constant.bool_value = name == "True";
        return e;
      }
      Fail(t, "expected an expression, found the keyword '" + name + "'");
    }
    Advance();
    ExprPtr e = Node(ExprKind::kName, t);
    e->text = name;
    return e;
  }

  ExprPtr Paren() {
    const Token& open = Tok();
    Advance();
    if (AtOp(")")) {
      Advance();
      return Node(ExprKind::kTuple, open);
    }
    if (AtName("yield")) {
      ExprPtr y = Yield();
      Expect(")", "')'");
      return y;
    }
    ExprPtr first = TestOrStar();
    if (AtName("for") || (AtName("async") && IsName(Peek(1), "for"))) {
      ExprPtr g = Node(ExprKind::kGeneratorExp, open);
      g->items.push_back(std::move(first));
      Comprehensions(g.get());
      Expect(")", "')' after a generator expression");
      Deepen(g.get(), open);
      return g;
    }
    if (AtOp(")")) {
      Advance();
      if (first->kind == ExprKind::kStarred) Fail(open, "cannot use starred expression here (a Python SyntaxError)");
      first->paren_line = open.line;
      first->paren_col = open.col;
      return first;
    }
    ExprPtr tuple = Node(ExprKind::kTuple, open);
    tuple->items.push_back(std::move(first));
    while (true) {
      if (AtOp(")")) break;
      Expect(",", "',' or ')' in a tuple");
      if (AtOp(")")) break;
      tuple->items.push_back(TestOrStar());
    }
    Advance();
    Deepen(tuple.get(), open);
    return tuple;
  }

  ExprPtr ListAtom() {
    const Token& open = Tok();
    Advance();
    ExprPtr list = Node(ExprKind::kList, open);
    if (AtOp("]")) {
      Advance();
      return list;
    }
    ExprPtr first = TestOrStar();
    if (AtName("for") || (AtName("async") && IsName(Peek(1), "for"))) {
      ExprPtr c = Node(ExprKind::kListComp, open);
      c->items.push_back(std::move(first));
      Comprehensions(c.get());
      Expect("]", "']' after a list comprehension");
      Deepen(c.get(), open);
      return c;
    }
    list->items.push_back(std::move(first));
    while (!AtOp("]")) {
      Expect(",", "',' or ']' in a list");
      if (AtOp("]")) break;
      list->items.push_back(TestOrStar());
    }
    Advance();
    Deepen(list.get(), open);
    return list;
  }

  ExprPtr Brace() {
    const Token& open = Tok();
    Advance();
    if (AtOp("}")) {
      Advance();
      return Node(ExprKind::kDict, open);
    }
    // The first entry decides: a dict (k: v or **d) or a set (x or *x).
    if (AtOp("**") || !StartsSetItem()) return DictAtom(open);
    ExprPtr first = TestOrStar();
    if (AtOp(":")) {
      Fail(Tok(), "internal: a dict entry read as a set item");
    }
    if (AtName("for") || (AtName("async") && IsName(Peek(1), "for"))) {
      ExprPtr c = Node(ExprKind::kSetComp, open);
      c->items.push_back(std::move(first));
      Comprehensions(c.get());
      Expect("}", "'}' after a set comprehension");
      Deepen(c.get(), open);
      return c;
    }
    ExprPtr set = Node(ExprKind::kSet, open);
    set->items.push_back(std::move(first));
    while (!AtOp("}")) {
      Expect(",", "',' or '}' in a set");
      if (AtOp("}")) break;
      set->items.push_back(TestOrStar());
    }
    Advance();
    Deepen(set.get(), open);
    return set;
  }

  // Whether the brace's first entry is a set item: no ':' on its own bracket level before the
  // next ',' / '}' / `for` (a lambda's ':' excepted).
  bool StartsSetItem() const {
    if (AtOp("*")) return true;
    int depth = 0;
    int lambdas = 0;
    for (size_t i = pos_; i < toks_.size(); ++i) {
      const Token& t = toks_[i];
      if (t.kind == TK::kEnd) return true;
      if (t.kind == TK::kOp && (t.text == "(" || t.text == "[" || t.text == "{")) ++depth;
      if (t.kind == TK::kOp && (t.text == ")" || t.text == "]" || t.text == "}")) {
        if (depth == 0) return true;
        --depth;
      }
      if (depth != 0) continue;
      if (IsName(t, "lambda")) ++lambdas;
      if (IsOp(t, ":")) {
        if (lambdas == 0) return false;
        --lambdas;
      }
      if (IsOp(t, ",") || IsName(t, "for")) return true;
    }
    return true;
  }

  ExprPtr DictAtom(const Token& open) {
    ExprPtr dict = Node(ExprKind::kDict, open);
    bool first = true;
    while (!AtOp("}")) {
      if (!first) {
        Expect(",", "',' or '}' in a dict");
        if (AtOp("}")) break;
      }
      first = false;
      if (AtOp("**")) {
        const Token& op = Tok();
        Advance();
        dict->items.push_back(nullptr);
        dict->values.push_back(Expression());
        dict->unpack_at.emplace_back(op.line, op.col);
        continue;
      }
      ExprPtr key = Test();
      if (!AtOp(":")) FailExpected(Tok(), "':' after a dict key");
      Advance();
      ExprPtr value = Test();
      if (dict->items.empty() && (AtName("for") || (AtName("async") && IsName(Peek(1), "for")))) {
        ExprPtr c = Node(ExprKind::kDictComp, open);
        c->items.push_back(std::move(key));
        c->items.push_back(std::move(value));
        Comprehensions(c.get());
        Expect("}", "'}' after a dict comprehension");
        Deepen(c.get(), open);
        return c;
      }
      dict->items.push_back(std::move(key));
      dict->values.push_back(std::move(value));
      dict->unpack_at.emplace_back(0, 0);
    }
    Advance();
    // Depth over keys and values.
    int deepest = 0;
    for (const ExprPtr& k : dict->items) {
      if (k) deepest = std::max(deepest, k->depth);
    }
    for (const ExprPtr& v : dict->values) deepest = std::max(deepest, v->depth);
    dict->depth = deepest + 1;
    if (dict->depth > kMaxExpressionDepth) Deepen(dict.get(), open);
    return dict;
  }

  // Adjacent string literals: one str (or bytes) constant, or an f-string (JoinedStr) when any
  // part is one.
  ExprPtr Strings() {
    const Token& start = Tok();
    ExprPtr joined = Node(ExprKind::kJoinedStr, start);
    bool any_f = false;
    bool any_bytes = false;
    bool any_str = false;
    std::string pending;
    auto flush = [&]() {
      if (pending.empty()) return;
      ExprPtr c = Node(ExprKind::kConstant, start);
      c->constant.kind = Constant::Kind::kString;
      c->constant.text = std::move(pending);
      pending.clear();
      joined->items.push_back(std::move(c));
    };
    while (Tok().kind == TK::kString || Tok().kind == TK::kFString) {
      const Token& t = Tok();
      const bool bytes = t.kind == TK::kString && t.text == "b";
      (bytes ? any_bytes : any_str) = true;
      if (any_bytes && any_str) Fail(t, "cannot mix bytes and nonbytes literals (a Python SyntaxError)");
      if (t.kind == TK::kString) {
        pending += strings_[t.str];
      } else {
        any_f = true;
        FString(t, joined.get(), &pending, 0);
      }
      Advance();
    }
    if (!any_f) {
      ExprPtr c = Node(ExprKind::kConstant, start);
      c->constant.kind = any_bytes ? Constant::Kind::kBytes : Constant::Kind::kString;
      c->constant.text = std::move(pending);
      return c;
    }
    flush();
    Deepen(joined.get(), start);
    return joined;
  }

  // Where the character at `offset` of an f-string's body is.
  static void BodyPosition(const Token& t, std::string_view body, size_t offset, int* line, int* col) {
    *line = t.body_line;
    *col = t.body_col;
    for (size_t i = 0; i < offset && i < body.size(); ++i) {
      if (body[i] == '\n' || (body[i] == '\r' && (i + 1 >= body.size() || body[i + 1] != '\n'))) {
        ++*line;
        *col = 1;
      } else {
        ++*col;
      }
    }
  }

  // One f-string's body (or a format spec's text between `begin` and `end`) into `joined`: literal
  // text into `pending`, `{...}` into FormattedValue nodes.
  void FString(const Token& t, Expr* joined, std::string* pending, int nesting) {
    const std::string body = strings_[t.str];
    FStringPart(t, body, 0, body.size(), joined, pending, nesting);
  }

  void FStringPart(const Token& t, const std::string& body, size_t begin, size_t end, Expr* joined,
                   std::string* pending, int nesting) {
    auto fail_at = [&](size_t offset, const std::string& message) {
      int line = 0;
      int col = 0;
      BodyPosition(t, body, offset, &line, &col);
      throw ScenarioError(Location(path_, line, col) + ": f-string: " + message);
    };
    auto flush = [&]() {
      if (pending->empty()) return;
      ExprPtr c = Node(ExprKind::kConstant, t);
      c->constant.kind = Constant::Kind::kString;
      c->constant.text = std::move(*pending);
      pending->clear();
      joined->items.push_back(std::move(c));
    };
    size_t i = begin;
    size_t literal = begin;
    auto take_literal = [&](size_t upto) {
      if (upto <= literal) return;
      const std::string_view raw(body.data() + literal, upto - literal);
      if (t.raw) {
        *pending += raw;
      } else {
        int line = 0;
        int col = 0;
        BodyPosition(t, body, literal, &line, &col);
        *pending += DecodeEscapes(raw, path_, line, col);
      }
    };
    while (i < end) {
      const char c = body[i];
      if (c == '\\' && !t.raw && i + 1 < end) {
        i += 2;  // an escaped character is literal text (\{ is not an escape in Python: kept)
        if (body[i - 1] == '{' || body[i - 1] == '}') --i;
        continue;
      }
      if (c == '}') {
        if (i + 1 < end && body[i + 1] == '}') {
          take_literal(i + 1);
          i += 2;
          literal = i;
          continue;
        }
        fail_at(i, "single '}' is not allowed");
      }
      if (c != '{') {
        ++i;
        continue;
      }
      if (i + 1 < end && body[i + 1] == '{' && nesting == 0) {
        take_literal(i + 1);
        i += 2;
        literal = i;
        continue;
      }
      take_literal(i);
      if (nesting >= 2) fail_at(i, "expressions nested too deeply");
      // The expression: up to '!', ':', '=' or '}' on its own bracket level, outside strings.
      const size_t expr_begin = i + 1;
      size_t j = expr_begin;
      int depth = 0;
      char quote = 0;
      size_t self_doc = std::string::npos;
      for (; j < end; ++j) {
        const char d = body[j];
        if (quote != 0) {
          if (d == quote) quote = 0;
          continue;
        }
        if (d == '\'' || d == '"') {
          quote = d;
          continue;
        }
        if (d == '\\') fail_at(j, "expression part cannot include a backslash");
        if (d == '#') fail_at(j, "expression part cannot include '#'");
        if (d == '(' || d == '[' || d == '{') ++depth;
        if (d == ')' || d == ']' || (d == '}' && depth > 0)) {
          --depth;
          continue;
        }
        if (depth > 0) continue;
        if (d == '}' || d == ':') break;
        if (d == '!' && j + 1 < end && body[j + 1] != '=') break;
        if (d == '=' && j + 1 < end && body[j + 1] != '=' && j > expr_begin &&
            std::string_view("=!<>").find(body[j - 1]) == std::string_view::npos) {
          self_doc = j;
          break;
        }
      }
      if (j >= end) fail_at(i, "expecting '}'");
      const size_t expr_end = self_doc != std::string::npos ? self_doc : j;
      ExprPtr fv;
      {
        int line = 0;
        int col = 0;
        BodyPosition(t, body, expr_begin, &line, &col);
        LexOptions options;
        options.path = path_;
        options.first_line = line;
        options.first_col = col;
        options.indentation = false;
        // An expression may span lines inside a triple-quoted f-string: parenthesize by lexing it
        // as if in brackets (the lexer joins lines only inside brackets), so wrap it.
        const std::string inner = body.substr(expr_begin, expr_end - expr_begin);
        if (inner.find_first_not_of(" \t\r\n") == std::string::npos)
          fail_at(expr_begin, "empty expression not allowed");
        std::string text = "(" + inner + "\n)";
        options.first_col = col - 1;
        Lexed lexed = Lex(text, options);
        Parser sub(std::move(lexed), path_);
        sub.depth_ = depth_;
        ExprPtr value = sub.StandaloneExpression("expression not allowed");
        if (value->kind == ExprKind::kTuple && value->line == line && value->col == col - 1) {
          // `{a, b}`: a tuple; CPython places it at its first item.
          if (!value->items.empty()) {
            value->line = value->items[0]->line;
            value->col = value->items[0]->col;
          }
        }
        if (self_doc != std::string::npos) {
          j = self_doc + 1;
          // `{x=}`: the expression's text and the '=' are literal text, the value repr'd.
          while (j < end && (body[j] == ' ')) ++j;
          *pending += body.substr(expr_begin, j - expr_begin);
        }
        flush();
        fv = Node(ExprKind::kFormattedValue, t);
        fv->items.push_back(std::move(value));
        fv->items.push_back(nullptr);
      }
      if (self_doc != std::string::npos && j < end && body[j] != '!' && body[j] != ':') fv->conversion = 'r';
      if (j < end && body[j] == '!') {
        if (j + 1 >= end || std::string_view("sra").find(body[j + 1]) == std::string_view::npos) {
          fail_at(j, "invalid conversion character: expected 's', 'r', or 'a'");
        }
        fv->conversion = body[j + 1];
        j += 2;
        if (j >= end || (body[j] != ':' && body[j] != '}')) fail_at(j, "expecting '}'");
      }
      if (j < end && body[j] == ':') {
        // The format spec: up to the matching '}', itself an f-string (one more level).
        size_t k = j + 1;
        int d = 0;
        for (; k < end; ++k) {
          if (body[k] == '{') ++d;
          if (body[k] == '}') {
            if (d == 0) break;
            --d;
          }
        }
        if (k >= end) fail_at(i, "expecting '}'");
        ExprPtr spec = Node(ExprKind::kJoinedStr, t);
        std::string spec_pending;
        FStringPart(t, body, j + 1, k, spec.get(), &spec_pending, nesting + 1);
        if (!spec_pending.empty()) {
          ExprPtr c = Node(ExprKind::kConstant, t);
          c->constant.kind = Constant::Kind::kString;
          c->constant.text = std::move(spec_pending);
          spec->items.push_back(std::move(c));
        }
        Deepen(spec.get(), t);
        fv->items[1] = std::move(spec);
        j = k;
      }
      if (j >= end || body[j] != '}') fail_at(i, "expecting '}'");
      Deepen(fv.get(), t);
      joined->items.push_back(std::move(fv));
      i = j + 1;
      literal = i;
    }
    take_literal(end);
  }

  std::vector<Token> toks_;
  std::vector<std::string> strings_;
  std::string path_;
  size_t pos_ = 0;
  int depth_ = 0;
  int block_depth_ = 0;
};

}  // namespace

Module ParseTokens(Lexed lexed, const std::string& path) { return Parser(std::move(lexed), path).File(); }

Module Parse(std::string_view text, const LexOptions& options) { return ParseTokens(Lex(text, options), options.path); }

}  // namespace petrsim::pyconfig
