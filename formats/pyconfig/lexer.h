// Python's tokens (the language reference's lexical analysis, Python 3.11), for a reader that never
// runs what it reads: names, numbers (64-bit ints, doubles), strings with their escapes decoded,
// f-strings (their raw body, parsed by the parser), operators, NEWLINE, INDENT and DEDENT, and an
// mmcv `{{_base_.a.b}}` placeholder as one token where the caller asks for them.
// Errors are ScenarioError "FILE:LINE:COL: <what>".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace petrsim::pyconfig {

struct Token {
  enum class Kind : uint8_t { kName, kInt, kFloat, kString, kFString, kBaseRef, kOp, kNewline, kIndent, kDedent, kEnd };
  Kind kind = Kind::kEnd;
  bool raw = false;  // an f-string with an r prefix
  int line = 0;
  int col = 0;  // 1-based, in bytes
  // A string's decoded value, an f-string's raw body, a placeholder's variable: an index into
  // Lexed::strings.
  uint32_t str = 0;
  int body_line = 0;  // an f-string's body: where its first character is
  int body_col = 0;
  union {
    int64_t int_value = 0;
    double float_value;
  };
  std::string text;  // a name, an operator, a number's or a placeholder's source text
};

struct Lexed {
  std::vector<Token> tokens;  // ends with kEnd; every logical line ends with kNewline
  std::vector<std::string> strings;
};

struct LexOptions {
  std::string path;         // names the text in messages
  int first_line = 1;       // the line number of the text's first line
  int first_col = 1;        // the column of the text's first character (a sub-expression of an f-string)
  bool base_refs = false;   // read `{{_base_.x}}` as a kBaseRef token (an mmcv config file)
  bool indentation = true;  // emit INDENT/DEDENT (false: an f-string's expression)
};

Lexed Lex(std::string_view text, const LexOptions& options);

// Decodes the escapes of a string body (not raw): the f-string parser's literal parts.
// `line`/`col` are where `body` starts, for messages.
std::string DecodeEscapes(std::string_view body, const std::string& path, int line, int col);

// Checks that `text` is UTF-8 without a NUL byte (what Python reads a source file as).
void CheckText(std::string_view text, const std::string& path, int first_line);

bool IsKeyword(std::string_view name);

// "FILE:LINE:COL".
std::string Location(const std::string& path, int line, int col);

// `{{ \s* NAME \s* }}` at `p`: the span's end and NAME. With `base_only`, NAME must be
// `_base_.` followed by [\w.]+ (mmcv's r'\{\{\s*_base_\.([\w\.]+)\s*\}\}'), and `name` gets what
// follows `_base_.`.
bool MatchBraces(std::string_view s, size_t p, bool base_only, size_t* end, std::string* name);

}  // namespace petrsim::pyconfig
