// Python 3.11 source to an AST (ast.h): every statement and expression of the language's grammar
// (no pattern matching, no type-parameter syntax), with INDENT/DEDENT blocks. It only builds the
// tree; nothing is evaluated. Errors are ScenarioError "FILE:LINE:COL: <what>" ("expected an
// expression, found the end of the line", "unexpected indentation (a Python IndentationError)").
// Limits: kMaxNesting recursion, kMaxExpressionDepth for an expression tree,
// kMaxStatementsNesting nested blocks, the lexer's kMaxTokens.
#pragma once

#include <string>
#include <string_view>

#include "formats/pyconfig/ast.h"
#include "formats/pyconfig/lexer.h"

namespace petrsim::pyconfig {

// Parses a file's text (already checked by CheckText where the caller reads a file).
Module Parse(std::string_view text, const LexOptions& options);
// Parses tokens lexed by the caller.
Module ParseTokens(Lexed lexed, const std::string& path);

}  // namespace petrsim::pyconfig
