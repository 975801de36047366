// The parser's expressions (parser_internal.h): tests and operators by precedence, lambdas, trailers
// (attributes, calls and their arguments, subscripts and slices), comprehensions, yield, atoms and displays.
#include <algorithm>
#include <unordered_set>
#include <utility>

#include "base/error.h"
#include "formats/pyconfig/limits.h"
#include "formats/pyconfig/parser_internal.h"

namespace petrsim::pyconfig::parser_internal {

// star_expressions: a test or a starred expression, or a tuple of them (no brackets).
ExprPtr Parser::TestListStarExpr() {
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

bool Parser::IsAugmented() const {
  const std::string& o = Tok().text;
  return o.size() >= 2 && o.back() == '=' && o != "==" && o != "!=" && o != "<=" && o != ">=";
}

ExprPtr Parser::TestOrStar() {
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

ExprPtr Parser::NamedExprTest() {
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

ExprPtr Parser::Test() {
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
ExprPtr Parser::TestNoCond() {
  const Token& start = Tok();
  const Guard guard(this, start, &depth_, kMaxNesting, "expression");
  if (AtName("lambda")) return Lambda(false);
  return OrTest();
}

ExprPtr Parser::Lambda(bool with_conditional) {
  const Token& start = Tok();
  Advance();
  ExprPtr e = Node(ExprKind::kLambda, start);
  e->args = Parameters(":", false);
  Expect(":", "':' after a lambda's parameters");
  e->items.push_back(with_conditional ? Test() : TestNoCond());
  Deepen(e.get(), start);
  return e;
}

ExprPtr Parser::OrTest() { return BoolChain("or"); }

ExprPtr Parser::BoolChain(const char* op) {
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

ExprPtr Parser::NotTest() {
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
std::string Parser::CompareOp() const {
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

ExprPtr Parser::Comparison() {
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
ExprPtr Parser::Expression() { return Binary(0); }

ExprPtr Parser::Binary(int level) {
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

ExprPtr Parser::Factor() {
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

ExprPtr Parser::Power() {
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
ExprPtr Parser::Primary() {
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
void Parser::Arguments(std::vector<ExprPtr>* args, std::vector<Keyword>* keywords, std::string_view close,
                       const Token* paren) {
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
ExprPtr Parser::SubscriptList() {
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

ExprPtr Parser::SliceItem() {
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
void Parser::Comprehensions(Expr* e) {
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

ExprPtr Parser::Yield() {
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

ExprPtr Parser::Atom() {
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

ExprPtr Parser::NameAtom() {
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

ExprPtr Parser::Paren() {
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

ExprPtr Parser::ListAtom() {
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

ExprPtr Parser::Brace() {
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
bool Parser::StartsSetItem() const {
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

ExprPtr Parser::DictAtom(const Token& open) {
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

}  // namespace petrsim::pyconfig::parser_internal
