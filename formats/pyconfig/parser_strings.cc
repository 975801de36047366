// The parser's string literals (parser_internal.h): adjacent literals joined into one constant, and
// f-strings into JoinedStr/FormattedValue nodes, their expressions parsed by a sub-parser.
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "formats/pyconfig/parser_internal.h"

namespace petrsim::pyconfig::parser_internal {

// Adjacent string literals: one str (or bytes) constant, or an f-string (JoinedStr) when any
// part is one.
ExprPtr Parser::Strings() {
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
void Parser::BodyPosition(const Token& t, std::string_view body, size_t offset, int* line, int* col) {
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
void Parser::FString(const Token& t, Expr* joined, std::string* pending, int nesting) {
  const std::string body = strings_[t.str];
  FStringPart(t, body, 0, body.size(), joined, pending, nesting);
}

// An f-string error at `offset` of the body, placed where CPython reports it.
void Parser::FStringFail(const Token& t, const std::string& body, size_t offset, const std::string& message) {
  int line = 0;
  int col = 0;
  BodyPosition(t, body, offset, &line, &col);
  throw ScenarioError(Location(path_, line, col) + ": f-string: " + message);
}

// The pending literal text becomes one string constant; it is kept pending until a field or the
// end so that adjacent literal pieces (and `{{`, `}}`) join into a single constant.
void Parser::FStringFlush(const Token& t, Expr* joined, std::string* pending) {
  if (pending->empty()) return;
  ExprPtr c = Node(ExprKind::kConstant, t);
  c->constant.kind = Constant::Kind::kString;
  c->constant.text = std::move(*pending);
  pending->clear();
  joined->items.push_back(std::move(c));
}

// The literal text between `from` and `upto` onto `pending`, its escapes decoded unless the
// f-string is raw, so that escape errors name the escape's own position.
void Parser::FStringLiteral(const Token& t, const std::string& body, size_t from, size_t upto, std::string* pending) {
  if (upto <= from) return;
  const std::string_view raw(body.data() + from, upto - from);
  if (t.raw) {
    *pending += raw;
  } else {
    int line = 0;
    int col = 0;
    BodyPosition(t, body, from, &line, &col);
    *pending += DecodeEscapes(raw, path_, line, col);
  }
}

void Parser::FStringPart(const Token& t, const std::string& body, size_t begin, size_t end, Expr* joined,
                         std::string* pending, int nesting) {
  size_t i = begin;
  size_t literal = begin;
  while (i < end) {
    const char c = body[i];
    if (c == '\\' && !t.raw && i + 1 < end) {
      i += 2;  // an escaped character is literal text (\{ is not an escape in Python: kept)
      if (body[i - 1] == '{' || body[i - 1] == '}') --i;
      continue;
    }
    if (c == '}') {
      if (i + 1 < end && body[i + 1] == '}') {
        FStringLiteral(t, body, literal, i + 1, pending);
        i += 2;
        literal = i;
        continue;
      }
      FStringFail(t, body, i, "single '}' is not allowed");
    }
    if (c != '{') {
      ++i;
      continue;
    }
    if (i + 1 < end && body[i + 1] == '{' && nesting == 0) {
      FStringLiteral(t, body, literal, i + 1, pending);
      i += 2;
      literal = i;
      continue;
    }
    FStringLiteral(t, body, literal, i, pending);
    i = FStringField(t, body, i, end, joined, pending, nesting);
    literal = i;
  }
  FStringLiteral(t, body, literal, end, pending);
}

// One replacement field `{...}` opening at `open`, appended to `joined` as a FormattedValue; its
// `{x=}` text goes to `pending` first. Returns the position after its closing '}'.
size_t Parser::FStringField(const Token& t, const std::string& body, size_t open, size_t end, Expr* joined,
                            std::string* pending, int nesting) {
  if (nesting >= 2) FStringFail(t, body, open, "expressions nested too deeply");
  const size_t expr_begin = open + 1;
  size_t self_doc = std::string::npos;
  size_t j = FStringExpressionEnd(t, body, expr_begin, end, &self_doc);
  if (j >= end) FStringFail(t, body, open, "expecting '}'");
  const size_t expr_end = self_doc != std::string::npos ? self_doc : j;
  ExprPtr value = FStringExpression(t, body, expr_begin, expr_end);
  if (self_doc != std::string::npos) {
    j = self_doc + 1;
    // `{x=}`: the expression's text and the '=' are literal text, the value repr'd.
    while (j < end && (body[j] == ' ')) ++j;
    *pending += body.substr(expr_begin, j - expr_begin);
  }
  FStringFlush(t, joined, pending);
  ExprPtr fv = Node(ExprKind::kFormattedValue, t);
  fv->items.push_back(std::move(value));
  fv->items.push_back(nullptr);
  if (self_doc != std::string::npos && j < end && body[j] != '!' && body[j] != ':') fv->conversion = 'r';
  if (j < end && body[j] == '!') {
    if (j + 1 >= end || std::string_view("sra").find(body[j + 1]) == std::string_view::npos) {
      FStringFail(t, body, j, "invalid conversion character: expected 's', 'r', or 'a'");
    }
    fv->conversion = body[j + 1];
    j += 2;
    if (j >= end || (body[j] != ':' && body[j] != '}')) FStringFail(t, body, j, "expecting '}'");
  }
  if (j < end && body[j] == ':') j = FStringSpec(t, body, open, j, end, fv.get(), nesting);
  if (j >= end || body[j] != '}') FStringFail(t, body, open, "expecting '}'");
  Deepen(fv.get(), t);
  joined->items.push_back(std::move(fv));
  return j + 1;
}

// The expression: up to '!', ':', '=' or '}' on its own bracket level, outside strings. Returns
// where it stops (`end` when unclosed); a self-documenting '=' is stored in `self_doc`.
size_t Parser::FStringExpressionEnd(const Token& t, const std::string& body, size_t expr_begin, size_t end,
                                    size_t* self_doc) {
  size_t j = expr_begin;
  int depth = 0;
  char quote = 0;
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
    if (d == '\\') FStringFail(t, body, j, "expression part cannot include a backslash");
    if (d == '#') FStringFail(t, body, j, "expression part cannot include '#'");
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
      *self_doc = j;
      break;
    }
  }
  return j;
}

// The field's expression text, parsed by a sub-parser whose tokens carry their positions in the
// enclosing file.
ExprPtr Parser::FStringExpression(const Token& t, const std::string& body, size_t expr_begin, size_t expr_end) {
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
  if (inner.find_first_not_of(" \t\r\n") == std::string::npos) {
    FStringFail(t, body, expr_begin, "empty expression not allowed");
  }
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
  return value;
}

// The format spec after ':' up to the matching '}', itself an f-string one level deeper, set as
// `fv`'s spec. Returns the position of that '}'; errors name the field's '{' at `open`.
size_t Parser::FStringSpec(const Token& t, const std::string& body, size_t open, size_t colon, size_t end, Expr* fv,
                           int nesting) {
  size_t k = colon + 1;
  int d = 0;
  for (; k < end; ++k) {
    if (body[k] == '{') ++d;
    if (body[k] == '}') {
      if (d == 0) break;
      --d;
    }
  }
  if (k >= end) FStringFail(t, body, open, "expecting '}'");
  ExprPtr spec = Node(ExprKind::kJoinedStr, t);
  std::string spec_pending;
  FStringPart(t, body, colon + 1, k, spec.get(), &spec_pending, nesting + 1);
  FStringFlush(t, spec.get(), &spec_pending);
  Deepen(spec.get(), t);
  fv->items[1] = std::move(spec);
  return k;
}

}  // namespace petrsim::pyconfig::parser_internal
