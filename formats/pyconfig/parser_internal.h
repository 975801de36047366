// Internals of the parser (parser.h), shared by its files and by nothing else: the Parser class,
// whose members parser*.cc define by concept, with its token, message and node helpers inline.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "formats/pyconfig/ast.h"
#include "formats/pyconfig/lexer.h"

namespace petrsim::pyconfig::parser_internal {

using TK = Token::Kind;

// Python 3.11 source to an AST by recursive descent (parser.h). Its members are defined by concept:
// parser.cc (the file, messages, statements and assignment targets), parser_expressions.cc
// (expressions by precedence, calls, subscripts, comprehensions, atoms and displays) and
// parser_strings.cc (adjacent string literals and f-strings).
class Parser {
 public:
  Parser(Lexed lexed, std::string path)
      : toks_(std::move(lexed.tokens)), strings_(std::move(lexed.strings)), path_(std::move(path)) {}

  Module File();
  ExprPtr StandaloneExpression(const char* what);

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
  static std::string Describe(const Token& t);
  [[noreturn]] void FailExpected(const Token& t, const std::string& expected) const;
  void Expect(std::string_view op, const std::string& expected);
  std::string ExpectName(const std::string& expected);

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
  void Deepen(Expr* e, const Token& at) const;
  static StmtPtr SNode(StmtKind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  // ---- statements
  void Statement(std::vector<StmtPtr>* out);
  void SimpleStatements(std::vector<StmtPtr>* out);
  std::vector<StmtPtr> Block();
  StmtPtr If();
  StmtPtr While();
  void Else(Stmt* s);
  StmtPtr For(bool is_async, const Token& start);
  StmtPtr Try();
  StmtPtr With(bool is_async, const Token& start);
  StmtPtr Decorated();
  StmtPtr FunctionDef(std::vector<ExprPtr> decorators, bool is_async, const Token& start);
  StmtPtr ClassDef(std::vector<ExprPtr> decorators);
  std::unique_ptr<pyconfig::Arguments> Parameters(std::string_view close, bool annotations);
  StmtPtr SimpleStatement();
  StmtPtr KeywordStatement(const Token& t);
  StmtPtr ExpressionStatement(const Token& t);
  StmtPtr Import();
  std::string DottedName();
  StmtPtr ImportFrom();

  // ---- assignment targets
  void CheckTarget(const Expr& e, const char* what) const;
  ExprPtr TargetList();
  ExprPtr Target();

  // ---- expressions
  ExprPtr TestListStarExpr();
  bool IsAugmented() const;
  ExprPtr TestOrStar();
  ExprPtr NamedExprTest();
  ExprPtr Test();
  ExprPtr TestNoCond();
  ExprPtr Lambda(bool with_conditional);
  ExprPtr OrTest();
  ExprPtr BoolChain(const char* op);
  ExprPtr NotTest();
  std::string CompareOp() const;
  ExprPtr Comparison();
  ExprPtr Expression();
  ExprPtr Binary(int level);
  ExprPtr Factor();
  ExprPtr Power();

  // ---- trailers, calls, subscripts and comprehensions
  ExprPtr Primary();
  void Arguments(std::vector<ExprPtr>* args, std::vector<Keyword>* keywords, std::string_view close,
                 const Token* paren = nullptr);
  ExprPtr SubscriptList();
  ExprPtr SliceItem();
  void Comprehensions(Expr* e);
  ExprPtr Yield();

  // ---- atoms and displays
  ExprPtr Atom();
  ExprPtr NameAtom();
  ExprPtr Paren();
  ExprPtr ListAtom();
  ExprPtr Brace();
  bool StartsSetItem() const;
  ExprPtr DictAtom(const Token& open);

  // ---- strings and f-strings
  ExprPtr Strings();
  static void BodyPosition(const Token& t, std::string_view body, size_t offset, int* line, int* col);
  void FString(const Token& t, Expr* joined, std::string* pending, int nesting);
  void FStringPart(const Token& t, const std::string& body, size_t begin, size_t end, Expr* joined,
                   std::string* pending, int nesting);
  [[noreturn]] void FStringFail(const Token& t, const std::string& body, size_t offset, const std::string& message);
  void FStringFlush(const Token& t, Expr* joined, std::string* pending);
  void FStringLiteral(const Token& t, const std::string& body, size_t from, size_t upto, std::string* pending);
  size_t FStringField(const Token& t, const std::string& body, size_t open, size_t end, Expr* joined,
                      std::string* pending, int nesting);
  size_t FStringExpressionEnd(const Token& t, const std::string& body, size_t expr_begin, size_t end, size_t* self_doc);
  ExprPtr FStringExpression(const Token& t, const std::string& body, size_t expr_begin, size_t expr_end);
  size_t FStringSpec(const Token& t, const std::string& body, size_t open, size_t colon, size_t end, Expr* fv,
                     int nesting);

  std::vector<Token> toks_;
  std::vector<std::string> strings_;
  std::string path_;
  size_t pos_ = 0;
  int depth_ = 0;
  int block_depth_ = 0;
};

}  // namespace petrsim::pyconfig::parser_internal
