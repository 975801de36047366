// Python's tokens; see lexer.h.
#include "formats/pyconfig/lexer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "base/assert.h"
#include "base/error.h"
#include "base/utf8.h"
#include "formats/pyconfig/limits.h"

namespace petrsim::pyconfig {

const char kUnsupportedTail[] = " is not supported in a config petrsim reads without running it";

std::string Location(const std::string& path, int line, int col) {
  return path + ":" + std::to_string(line) + ":" + std::to_string(col);
}

bool IsKeyword(std::string_view name) {
  static const std::unordered_set<std::string_view> keywords = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return keywords.count(name) > 0;
}

namespace {

bool IsNewlineAt(std::string_view s, size_t p, size_t* length) {
  if (p >= s.size()) return false;
  if (s[p] == '\n') {
    *length = 1;
    return true;
  }
  if (s[p] == '\r') {
    *length = p + 1 < s.size() && s[p + 1] == '\n' ? 2 : 1;
    return true;
  }
  return false;
}

}  // namespace

void CheckText(std::string_view text, const std::string& path, int first_line) {
  int line = first_line;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size();) {
    size_t newline = 0;
    if (IsNewlineAt(text, i, &newline)) {
      i += newline;
      ++line;
      line_start = i;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    const int col = static_cast<int>(i - line_start) + 1;
    if (c == 0) {
      throw ScenarioError(Location(path, line, col) + ": a NUL byte: this is not a Python config (a binary file?)");
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(reinterpret_cast<const uint8_t*>(text.data()) + i, text.size() - i);
    if (length == 0) {
      char byte[8];
      std::snprintf(byte, sizeof(byte), "0x%02X", c);
      throw ScenarioError(Location(path, line, col) + ": not UTF-8 text (byte " + byte +
                          "); a Python config is UTF-8 (a binary file?)");
    }
    i += length;
  }
}

bool MatchBraces(std::string_view s, size_t p, bool base_only, size_t* end, std::string* name) {
  if (p + 1 >= s.size() || s[p] != '{' || s[p + 1] != '{') return false;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  auto is_word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
  };
  size_t q = p + 2;
  while (q < s.size() && is_space(s[q])) ++q;
  if (base_only) {
    if (s.substr(q, 7) != "_base_.") return false;
    q += 7;
  }
  const size_t start = q;
  while (q < s.size() && (is_word(s[q]) || (base_only && s[q] == '.'))) ++q;
  if (q == start) return false;
  *name = std::string(s.substr(start, q - start));
  while (q < s.size() && is_space(s[q])) ++q;
  if (s.substr(q, 2) != "}}") return false;
  *end = q + 2;
  return true;
}

namespace {

class Lexer {
 public:
  Lexer(std::string_view text, const LexOptions& options)
      : s_(text),
        path_(options.path),
        line_(options.first_line),
        col_offset_(options.first_col - 1),
        base_refs_(options.base_refs),
        indentation_(options.indentation) {}

  // The decoded text of a whole string body (an f-string's literal part).
  std::string DecodeBody() {
    body_only_ = true;
    LexString(false, line_, Col());
    return std::move(strings_.back());
  }

  Lexed Run() {
    out_.reserve(s_.size() / 3 + 8);
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") {
      pos_ = 3;
      line_start_ = 3;
    }
    bool logical_start = true;
    while (true) {
      if (logical_start && open_.empty()) {
        const LineStart start = StartLogicalLine();
        if (start == LineStart::kEnd) break;
        if (start == LineStart::kBlank) continue;
        logical_start = false;
      }
      if (pos_ >= s_.size()) break;
      const char c = s_[pos_];
      size_t newline = 0;
      if (c == ' ' || c == '\t' || c == '\f') {
        ++pos_;
        continue;
      }
      if (c == '#') {
        SkipComment();
        continue;
      }
      if (IsNewlineAt(s_, pos_, &newline)) {
        if (open_.empty()) {
          Token t = Make(Token::Kind::kNewline, Col());
          out_.push_back(std::move(t));
          logical_start = true;
        }
        pos_ += newline;
        NewLine();
        continue;
      }
      if (out_.size() >= kMaxTokens) {
        Fail(line_, Col(), "more than " + std::to_string(kMaxTokens) + " tokens (petrsim's limit for a config)");
      }
      if (c == '\\') {
        if (IsNewlineAt(s_, pos_ + 1, &newline)) {
          pos_ += 1 + newline;
          NewLine();
          continue;
        }
        if (pos_ + 1 >= s_.size()) Fail(line_, Col(), "unexpected end of file after a line continuation '\\'");
        Fail(line_, Col(), "unexpected character after a line continuation '\\'");
      } else if (IsIdentStart(c)) {
        LexNameOrString();
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && pos_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1])))) {
        LexNumber();
      } else if (c == '\'' || c == '"') {
        LexString(false, line_, Col());
      } else {
        LexOperator();
      }
    }
    return Finish();
  }

 private:
  struct Open {
    char c;
    int line;
    int col;
  };
  enum class LineStart { kEnd, kBlank, kToken };

  // At the start of a logical line outside brackets: reads its indentation (INDENT/DEDENT), or
  // skips the line when it holds only a comment or nothing; kEnd at the end of the text.
  LineStart StartLogicalLine() {
    size_t p = pos_;
    int width = 0;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t' || s_[p] == '\f')) {
      width = s_[p] == ' ' ? width + 1 : s_[p] == '\t' ? (width / 8 + 1) * 8 : 0;
      ++p;
    }
    size_t newline = 0;
    if (p >= s_.size()) {
      pos_ = p;
      return LineStart::kEnd;
    }
    if (s_[p] == '#') {
      pos_ = p;
      SkipComment();
      return LineStart::kBlank;
    }
    if (IsNewlineAt(s_, p, &newline)) {
      pos_ = p + newline;
      NewLine();
      return LineStart::kBlank;
    }
    pos_ = p;
    if (indentation_) Indent(width);
    return LineStart::kToken;
  }

  // At the end of the text: no bracket left open, then the last NEWLINE, DEDENTs and END.
  Lexed Finish() {
    if (!open_.empty()) {
      const Open& open = open_.back();
      Fail(open.line, open.col,
           std::string("unbalanced bracket: '") + open.c + "' is never closed (expected '" + Closer(open.c) +
               "' before the end of the file)");
    }
    if (!out_.empty() && out_.back().kind != Token::Kind::kNewline && out_.back().kind != Token::Kind::kDedent) {
      out_.push_back(Make(Token::Kind::kNewline, Col()));
    }
    while (indents_.size() > 1) {
      indents_.pop_back();
      out_.push_back(Make(Token::Kind::kDedent, Col()));
    }
    out_.push_back(Make(Token::Kind::kEnd, Col()));
    // Python's indentation stack keeps its bottom level 0 (every INDENT has had its DEDENT).
    PETRSIM_ASSERT(indents_.size() == 1);
    PETRSIM_ASSERT(indents_.front() == 0);
    return Lexed{std::move(out_), std::move(strings_)};
  }

  [[noreturn]] void Fail(int line, int col, const std::string& message) const {
    throw ScenarioError(Location(path_, line, col) + ": " + message);
  }
  [[noreturn]] void Unsupported(int line, int col, const std::string& construct) const {
    Fail(line, col, construct + kUnsupportedTail);
  }
  int Col() const { return static_cast<int>(pos_ - line_start_) + 1 + col_offset_; }
  void NewLine() {
    ++line_;
    line_start_ = pos_;
    col_offset_ = 0;
  }
  // Python's INDENT/DEDENT at the start of a logical line of `width` columns.
  void Indent(int width) {
    if (width > indents_.back()) {
      indents_.push_back(width);
      out_.push_back(Make(Token::Kind::kIndent, Col()));
      return;
    }
    while (width < indents_.back()) {
      indents_.pop_back();
      out_.push_back(Make(Token::Kind::kDedent, Col()));
    }
    if (width != indents_.back()) {
      Fail(line_, Col(), "unindent does not match any outer indentation level (a Python IndentationError)");
    }
  }
  Token Make(Token::Kind kind, int col) const {
    Token t;
    t.kind = kind;
    t.line = line_;
    t.col = col;
    return t;
  }
  static char Closer(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }
  static bool IsIdentStart(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
  }
  static bool IsIdentChar(char c) { return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

  void SkipComment() {
    size_t newline = 0;
    while (pos_ < s_.size() && !IsNewlineAt(s_, pos_, &newline)) ++pos_;
  }

  void LexNameOrString() {
    const int col = Col();
    const size_t start = pos_;
    while (pos_ < s_.size() && IsIdentChar(s_[pos_])) ++pos_;
    const std::string name(s_.substr(start, pos_ - start));
    if (pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"') && name.size() <= 2) {
      std::string lower = name;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      static const std::unordered_set<std::string> prefixes = {"r", "u", "f", "b", "fr", "rf", "br", "rb"};
      if (prefixes.count(lower) > 0) {
        const bool raw = lower.find('r') != std::string::npos;
        if (lower.find('f') != std::string::npos) {
          LexFString(raw, line_, col);
        } else {
          LexString(raw, line_, col);
          if (lower.find('b') != std::string::npos) out_.back().text = "b";  // a bytes literal
        }
        return;
      }
    }
    Token t = Make(Token::Kind::kName, col);
    t.text = name;
    out_.push_back(std::move(t));
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  // An f-string: its body is kept raw (the parser reads its literal parts and expressions); it ends
  // where a plain string would (Python 3.11: an expression cannot hold the f-string's own quote).
  void LexFString(bool raw, int line, int col) {
    const char quote = s_[pos_];
    const bool triple = s_.substr(pos_, 3) == std::string(3, quote);
    pos_ += triple ? 3 : 1;
    Token t;
    t.kind = Token::Kind::kFString;
    t.raw = raw;
    t.line = line;
    t.col = col;
    t.body_line = line_;
    t.body_col = Col();
    const size_t body = pos_;
    size_t body_end = 0;
    while (true) {
      if (pos_ >= s_.size()) {
        Fail(line, col,
             triple ? "unterminated triple-quoted string literal (it starts here)"
                    : "unterminated string literal (expected its closing quote before the end of the file)");
      }
      const char c = s_[pos_];
      size_t newline = 0;
      if (c == quote && (!triple || s_.substr(pos_, 3) == std::string(3, quote))) {
        body_end = pos_;
        pos_ += triple ? 3 : 1;
        break;
      }
      if (IsNewlineAt(s_, pos_, &newline)) {
        if (!triple) Fail(line, col, "unterminated string literal (expected its closing quote on the same line)");
        pos_ += newline;
        NewLine();
        continue;
      }
      if (c == '\\' && pos_ + 1 < s_.size()) {
        if (IsNewlineAt(s_, pos_ + 1, &newline)) {
          pos_ += 1 + newline;
          NewLine();
          continue;
        }
        pos_ += 2;
        continue;
      }
      ++pos_;
    }
    t.str = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(s_.substr(body, body_end - body));
    out_.push_back(std::move(t));
  }

  // At the opening quote (the prefix, if any, already consumed; `line`/`col` are where it began).
  void LexString(bool raw, int line, int col) {
    const char quote = body_only_ ? '\0' : s_[pos_];
    const bool triple = !body_only_ && s_.substr(pos_, 3) == std::string(3, quote);
    if (!body_only_) pos_ += triple ? 3 : 1;
    const size_t body = pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) {
        if (body_only_) break;
        Fail(line, col,
             triple ? "unterminated triple-quoted string literal (it starts here)"
                    : "unterminated string literal (expected its closing quote before the end of the file)");
      }
      const char c = s_[pos_];
      size_t newline = 0;
      if (c == quote && !body_only_) {
        if (!triple) {
          ++pos_;
          break;
        }
        if (s_.substr(pos_, 3) == std::string(3, quote)) {
          pos_ += 3;
          break;
        }
        out += c;
        ++pos_;
        continue;
      }
      if (IsNewlineAt(s_, pos_, &newline)) {
        if (!triple && !body_only_) {
          Fail(line, col, "unterminated string literal (expected its closing quote on the same line)");
        }
        out += '\n';
        pos_ += newline;
        NewLine();
        continue;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      Backslash(raw, &out);
    }
    if (base_refs_) RefuseBaseRefs(s_.substr(body, pos_ - body), line, col);
    Token t;
    t.kind = Token::Kind::kString;
    t.line = line;
    t.col = col;
    t.str = static_cast<uint32_t>(strings_.size());
    strings_.push_back(std::move(out));
    out_.push_back(std::move(t));
  }

  // At a backslash in a string: a line continuation, a raw string's backslash (kept) or an escape.
  void Backslash(bool raw, std::string* out) {
    size_t newline = 0;
    if (pos_ + 1 >= s_.size()) {
      ++pos_;
      return;  // the end of the file: unterminated, in LexString
    }
    const char e = s_[pos_ + 1];
    if (IsNewlineAt(s_, pos_ + 1, &newline)) {
      if (raw) *out += "\\\n";
      pos_ += 1 + newline;
      NewLine();
      return;
    }
    if (raw) {
      *out += '\\';
      *out += e;
      pos_ += 2;
      return;
    }
    const int escape_col = Col();
    pos_ += 2;
    Escape(e, escape_col, out);
  }

  // The escape `\e` of a string that is not raw (its backslash and `e` already read, at
  // `escape_col`), appended to `out`.
  void Escape(char e, int escape_col, std::string* out) {
    switch (e) {
      case '\\':
      case '\'':
      case '"':
        *out += e;
        break;
      case 'a':
        *out += '\a';
        break;
      case 'b':
        *out += '\b';
        break;
      case 'f':
        *out += '\f';
        break;
      case 'n':
        *out += '\n';
        break;
      case 'r':
        *out += '\r';
        break;
      case 't':
        *out += '\t';
        break;
      case 'v':
        *out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int k = 0; k < digits; ++k) {
          const int h = pos_ < s_.size() ? HexValue(s_[pos_]) : -1;
          if (h < 0) {
            Fail(line_, escape_col,
                 std::string("truncated \\") + e + " escape (expected " + std::to_string(digits) + " hex digits)");
          }
          cp = cp * 16 + static_cast<uint32_t>(h);
          ++pos_;
        }
        if (cp > 0x10FFFF) Fail(line_, escape_col, "illegal Unicode character in a \\U escape");
        if (cp >= 0xD800 && cp <= 0xDFFF) {
          Fail(line_, escape_col, "a surrogate code point escape (petrsim reads strings as UTF-8)");
        }
        AppendUtf8(cp, out);
        break;
      }
      case 'N':
        Unsupported(line_, escape_col, "a \\N{...} escape (a named Unicode character)");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++k) {
            cp = cp * 8 + static_cast<uint32_t>(s_[pos_] - '0');
            ++pos_;
          }
          AppendUtf8(cp, out);
        } else {
          *out += '\\';  // Python keeps an unknown escape as it is
          --pos_;        // the escaped character is read again as an ordinary one
        }
    }
  }

  // mmcv replaces `{{_base_.x}}` by a quoted placeholder even inside a string, where it is never
  // substituted again: refuse it in a string's `source`.
  void RefuseBaseRefs(std::string_view source, int line, int col) const {
    for (size_t at = source.find("{{"); at != std::string_view::npos; at = source.find("{{", at + 1)) {
      size_t end = 0;
      std::string variable;
      if (MatchBraces(source, at, true, &end, &variable)) {
        Fail(line, col,
             "{{_base_." + variable +
                 "}} inside a string literal: mmcv substitutes a base's variable only as a whole value (write "
                 "name = {{_base_." +
                 variable + "}} without quotes)");
      }
    }
  }

  // Digits of `base` with single underscores between them; appends them (without underscores).
  void ReadDigits(int base, std::string* digits) {
    auto is_digit = [base](char c) {
      const int v = HexValue(c);
      return v >= 0 && v < base;
    };
    while (pos_ < s_.size()) {
      if (s_[pos_] == '_' && pos_ + 1 < s_.size() && is_digit(s_[pos_ + 1]) && !digits->empty()) {
        ++pos_;
      }
      if (!is_digit(s_[pos_])) break;
      *digits += s_[pos_];
      ++pos_;
    }
  }

  void LexNumber() {
    const int col = Col();
    const size_t start = pos_;
    Token t = Make(Token::Kind::kInt, col);
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] != '\0' &&
        std::strchr("xXoObB", s_[pos_ + 1]) != nullptr) {
      t.int_value = PrefixedInt(start, col);
    } else if (LexDecimal(start, col, &t)) {
      return;  // an imaginary literal, already out
    }
    if (pos_ < s_.size() && (IsIdentChar(s_[pos_]) || s_[pos_] == '_')) InvalidNumber(start, col);
    t.text = std::string(s_.substr(start, pos_ - start));
    out_.push_back(std::move(t));
  }

  [[noreturn]] void InvalidNumber(size_t start, int col) const {
    Fail(line_, col, "invalid number literal '" + std::string(s_.substr(start, pos_ + 1 - start)) + "'");
  }

  // 0x.., 0o.., 0b..: at the 0 of its prefix.
  int64_t PrefixedInt(size_t start, int col) {
    const char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[pos_ + 1])));
    const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
    pos_ += 2;
    if (pos_ < s_.size() && s_[pos_] == '_') ++pos_;  // 0x_ff is valid
    std::string digits;
    ReadDigits(base, &digits);
    if (digits.empty()) InvalidNumber(start, col);
    uint64_t value = 0;
    for (const char d : digits) {
      const auto v = static_cast<uint64_t>(HexValue(d));
      if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - v) / static_cast<uint64_t>(base)) {
        Fail(line_, col, "integer literal too large (petrsim reads 64-bit integers)");
      }
      value = value * static_cast<uint64_t>(base) + v;
    }
    return static_cast<int64_t>(value);
  }

  // A decimal int, a float or an imaginary literal into `t`; true when it was imaginary (then
  // `t` is out, with its text).
  bool LexDecimal(size_t start, int col, Token* t) {
    std::string int_part;
    ReadDigits(10, &int_part);
    std::string text = int_part;
    bool is_float = false;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_float = true;
      ++pos_;
      text += '.';
      std::string fraction;
      ReadDigits(10, &fraction);
      text += fraction;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
        is_float = true;
        text += 'e';
        if (s_[pos_ + 1] == '-') text += '-';
        pos_ = q;
        std::string exponent;
        ReadDigits(10, &exponent);
        text += exponent;
      }
    }
    if (pos_ < s_.size() && (s_[pos_] == 'j' || s_[pos_] == 'J')) {
      ++pos_;  // an imaginary literal: the parser reads it, the evaluator does not
      t->kind = Token::Kind::kFloat;
      t->float_value = 0;
      t->text = std::string(s_.substr(start, pos_ - start));
      if (pos_ < s_.size() && IsIdentChar(s_[pos_])) InvalidNumber(start, col);
      out_.push_back(std::move(*t));
      return true;
    }
    if (is_float) {
      t->kind = Token::Kind::kFloat;
      if (text[0] == '.') text.insert(text.begin(), '0');
      double value = 0;
      const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
      if (result.ec == std::errc::result_out_of_range) {
        value = std::strtod(text.c_str(), nullptr);  // Python: inf, or 0.0 for a tiny one
      } else if (result.ec != std::errc() || result.ptr != text.data() + text.size()) {
        InvalidNumber(start, col);
      }
      t->float_value = value;
    } else {
      t->int_value = DecimalInt(int_part, col);
    }
    return false;
  }

  int64_t DecimalInt(const std::string& int_part, int col) const {
    if (int_part.size() > 1 && int_part[0] == '0' && int_part.find_first_not_of('0') != std::string::npos) {
      Fail(line_, col,
           "leading zeros in a decimal integer literal are not permitted (Python syntax; an octal number is "
           "written 0o17)");
    }
    uint64_t value = 0;
    for (const char d : int_part) {
      const auto v = static_cast<uint64_t>(d - '0');
      if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - v) / 10) {
        Fail(line_, col, "integer literal too large (petrsim reads 64-bit integers)");
      }
      value = value * 10 + v;
    }
    return static_cast<int64_t>(value);
  }

  void LexOperator() {
    const int col = Col();
    const char c = s_[pos_];
    if (c == '{' && base_refs_) {
      size_t end = 0;
      std::string variable;
      if (MatchBraces(s_, pos_, true, &end, &variable)) {
        Token t = Make(Token::Kind::kBaseRef, col);
        t.str = static_cast<uint32_t>(strings_.size());
        strings_.push_back(variable);
        t.text = "{{_base_." + variable + "}}";
        for (size_t p = pos_; p < end; ++p) {
          size_t newline = 0;
          if (IsNewlineAt(s_, p, &newline) && newline == 1) {
            line_start_ = p + 1;
            ++line_;
            col_offset_ = 0;
          }
        }
        pos_ = end;
        out_.push_back(std::move(t));
        return;
      }
    }
    static const char* const kOperators[] = {
        "**=", "//=", ">>=", "<<=", "...", "!=", "**", "//", "<<", ">>", "<=", ">=", "==", "+=", "-=", "*=",
        "/=",  "%=",  "&=",  "|=",  "^=",  "@=", "->", ":=", "+",  "-",  "*",  "/",  "%",  "@",  "&",  "|",
        "^",   "~",   "<",   ">",   "(",   ")",  "[",  "]",  "{",  "}",  ",",  ":",  ".",  ";",  "="};
    for (const char* op : kOperators) {
      const size_t length = std::strlen(op);
      if (s_.substr(pos_, length) != op) continue;
      if (length == 1 && (c == '(' || c == '[' || c == '{')) {
        if (static_cast<int>(open_.size()) >= kMaxNesting) {
          Fail(line_, col, "brackets nested deeper than " + std::to_string(kMaxNesting) + " (petrsim's limit)");
        }
        open_.push_back({c, line_, col});
      } else if (length == 1 && (c == ')' || c == ']' || c == '}')) {
        if (open_.empty()) Fail(line_, col, std::string("unbalanced bracket: '") + c + "' closes no open bracket");
        const Open open = open_.back();
        if (Closer(open.c) != c) {
          Fail(line_, col,
               std::string("unbalanced bracket: '") + c + "' closes the '" + open.c + "' opened at line " +
                   std::to_string(open.line) + ":" + std::to_string(open.col) + " (expected '" + Closer(open.c) + "')");
        }
        open_.pop_back();
      }
      Token t = Make(Token::Kind::kOp, col);
      t.text = op;
      pos_ += length;
      out_.push_back(std::move(t));
      return;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) Fail(line_, col, std::string("unexpected character '") + c + "'");
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", u);
    Fail(line_, col, std::string("unexpected character (byte ") + byte + ")");
  }

  std::string_view s_;
  std::string path_;
  size_t pos_ = 0;
  int line_;
  size_t line_start_ = 0;
  int col_offset_;
  bool base_refs_;
  bool indentation_;
  bool body_only_ = false;
  std::vector<int> indents_ = {0};
  std::vector<Open> open_;
  std::vector<Token> out_;
  std::vector<std::string> strings_;
};

}  // namespace

Lexed Lex(std::string_view text, const LexOptions& options) { return Lexer(text, options).Run(); }

std::string DecodeEscapes(std::string_view body, const std::string& path, int line, int col) {
  LexOptions options;
  options.path = path;
  options.first_line = line;
  options.first_col = col;
  return Lexer(body, options).DecodeBody();
}

}  // namespace petrsim::pyconfig
