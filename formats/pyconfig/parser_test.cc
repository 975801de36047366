// The parser (formats/pyconfig/parser.h): statements and expressions of full Python; the tree is
// compared with CPython's own ast module by ast_oracle_test.py, here are its shapes and errors.
#include "formats/pyconfig/parser.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace petrsim::pyconfig {
namespace {

Module ParseText(const std::string& text) {
  LexOptions options;
  options.path = "t.py";
  return Parse(text, options);
}

std::string ErrorOf(const std::string& text) {
  try {
    ParseText(text);
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(PyconfigParser, EveryStatementKind) {
  const Module m = ParseText(
      "import a.b as c, d\n"
      "from ..x import (y as z, w,)\n"
      "@decorate(1)\n"
      "def f(a, /, b: int = 1, *args, c, d=2, **kw) -> None:\n"
      "    global g\n"
      "    return a\n"
      "class K(Base, metaclass=M):\n"
      "    x: int = 1\n"
      "for i, j in pairs:\n"
      "    continue\n"
      "else:\n"
      "    pass\n"
      "while x:\n"
      "    break\n"
      "try:\n"
      "    pass\n"
      "except (A, B) as e:\n"
      "    raise X from e\n"
      "else:\n"
      "    pass\n"
      "finally:\n"
      "    del a[0], b.c\n"
      "with open(p) as fh, g():\n"
      "    assert fh, 'msg'\n"
      "x += 1; y = z = lambda q, *r: q\n");
  ASSERT_EQ(m.body.size(), 10u);
  EXPECT_EQ(m.body[0]->kind, StmtKind::kImport);
  EXPECT_EQ(m.body[0]->names[0].name, "a.b");
  EXPECT_EQ(m.body[1]->level, 2);
  EXPECT_EQ(m.body[2]->kind, StmtKind::kFunctionDef);
  EXPECT_EQ(m.body[2]->line, 4);  // CPython places a decorated def at `def`
  EXPECT_EQ(m.body[2]->args->posonlyargs.size(), 1u);
  EXPECT_EQ(m.body[2]->args->kwonlyargs.size(), 2u);
  EXPECT_EQ(m.body[3]->kind, StmtKind::kClassDef);
  EXPECT_EQ(m.body[4]->kind, StmtKind::kFor);
  EXPECT_EQ(m.body[6]->handlers.size(), 1u);
  EXPECT_EQ(m.body[7]->items.size(), 2u);
  EXPECT_EQ(m.body[8]->kind, StmtKind::kAugAssign);
  EXPECT_EQ(m.body[9]->targets.size(), 2u);  // y = z = lambda ...
  EXPECT_EQ(m.body[9]->value->kind, ExprKind::kLambda);
}

TEST(PyconfigParser, FStringsAndComprehensions) {
  const Module m = ParseText("x = f'a{b!r:>{w}}c' 'd'\ny = {k: v for k, v in z if k}\n");
  const Expr& f = *m.body[0]->value;
  ASSERT_EQ(f.kind, ExprKind::kJoinedStr);
  ASSERT_EQ(f.items.size(), 3u);
  EXPECT_EQ(f.items[1]->conversion, 'r');
  EXPECT_EQ(f.items[2]->constant.text, "cd");
  EXPECT_EQ(m.body[1]->value->kind, ExprKind::kDictComp);
  EXPECT_EQ(m.body[1]->value->generators[0].ifs.size(), 1u);
}

TEST(PyconfigParser, Errors) {
  EXPECT_EQ(ErrorOf("x = 1\ny = x +\n"), "t.py:2:8: expected an expression, found the end of the line");
  EXPECT_EQ(ErrorOf("x = 1 2\n"), "t.py:1:7: expected an operator or the end of the statement, found the number 2");
  EXPECT_EQ(ErrorOf("x = 1\n  y = 2\n"), "t.py:2:3: unexpected indentation (a Python IndentationError)");
  EXPECT_EQ(ErrorOf("if x:\ny = 1\n"),
            "t.py:2:1: expected an indented block (a Python IndentationError), found the name 'y'");
  EXPECT_EQ(ErrorOf("f(a=1, a=2)\n"), "t.py:1:8: keyword argument repeated: 'a' (a Python SyntaxError)");
  EXPECT_EQ(ErrorOf("1 = x\n"),
            "t.py:1:1: cannot assign to an expression (an assignment's target must be a name, an attribute, a "
            "subscript or a tuple or list of them)");
  EXPECT_EQ(ErrorOf("x = f'{}'\n"), "t.py:1:8: f-string: empty expression not allowed");
  std::string deep = "x = ";
  for (int i = 0; i < 1200; ++i) deep += "a + ";
  EXPECT_EQ(ErrorOf(deep + "a\n").substr(0, 12), "t.py:1:4003:");
}

}  // namespace
}  // namespace petrsim::pyconfig
