// Python's tokens (formats/pyconfig/lexer.h): INDENT/DEDENT, f-string bodies, numbers, errors.
#include "formats/pyconfig/lexer.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "base/error.h"

namespace petrsim::pyconfig {
namespace {

std::string Kinds(const std::string& text) {
  LexOptions options;
  options.path = "t.py";
  const Lexed lexed = Lex(text, options);
  std::string out;
  for (const Token& t : lexed.tokens) {
    switch (t.kind) {
      case Token::Kind::kName:
      case Token::Kind::kOp:
        out += t.text;
        break;
      case Token::Kind::kInt:
        out += "I" + std::to_string(t.int_value);
        break;
      case Token::Kind::kFloat:
        out += "F";
        break;
      case Token::Kind::kString:
        out += "S(" + lexed.strings[t.str] + ")";
        break;
      case Token::Kind::kFString:
        out += "FS(" + lexed.strings[t.str] + ")";
        break;
      case Token::Kind::kBaseRef:
        out += "B";
        break;
      case Token::Kind::kNewline:
        out += "NL";
        break;
      case Token::Kind::kIndent:
        out += "IN";
        break;
      case Token::Kind::kDedent:
        out += "DE";
        break;
      case Token::Kind::kEnd:
        out += "END";
        break;
    }
    out += " ";
  }
  return out;
}

std::string ErrorOf(const std::string& text) {
  try {
    Kinds(text);
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(PyconfigLexer, IndentAndDedent) {
  EXPECT_EQ(Kinds("if a:\n    b = 1\n\n    # c\nc = 2\n"), "if a : NL IN b = I1 NL DE c = I2 NL END ");
  EXPECT_EQ(Kinds("if a:\n  if b:\n    c\n"), "if a : NL IN if b : NL IN c NL DE DE END ");
  EXPECT_EQ(Kinds("x = (1,\n  2)\n"), "x = ( I1 , I2 ) NL END ");
  EXPECT_EQ(ErrorOf("if a:\n    b\n  c\n"),
            "t.py:3:3: unindent does not match any outer indentation level (a Python IndentationError)");
}

TEST(PyconfigLexer, StringsAndNumbers) {
  EXPECT_EQ(Kinds("'a' \"b\" r'\\n' f'{x:>3}' rf'\\{y}'"), "S(a) S(b) S(\\n) FS({x:>3}) FS(\\{y}) NL END ");
  EXPECT_EQ(Kinds("1_000 0x1F 0o17 0b101 1e-4 .5 2j"), "I1000 I31 I15 I5 F F F NL END ");
  EXPECT_EQ(ErrorOf("x = 012\n"),
            "t.py:1:5: leading zeros in a decimal integer literal are not permitted (Python syntax; an octal number "
            "is written 0o17)");
  EXPECT_EQ(ErrorOf("x = 'abc\n"),
            "t.py:1:5: unterminated string literal (expected its closing quote on the same line)");
  EXPECT_EQ(DecodeEscapes("a\\tb\\x41", "t.py", 1, 1), "a\tbA");
}

}  // namespace
}  // namespace petrsim::pyconfig
