// Module-level config statements of a Python AST (ast.h) to values (value.h), without running
// anything: assignments (names, tuples, subscripts), augmented and annotated assignments,
// imports (their names become unknown), expression statements (evaluated and dropped, except the
// list/dict methods that change a named value), `if` with an evaluable test (its taken branch),
// `for` over a known sequence and `while` (each iteration drawn from the value budget), and
// del/assert/pass. A construct petrsim does not evaluate yields a ConfigUnknown naming
// "FILE:LINE: <construct>"; names a skipped block (def, class, with, try, an `if` on an unknown)
// would assign become unknown. What Python itself would refuse (an undefined name, 1 / 0, 'a' - 1,
// [][0]) is a ScenarioError "FILE:LINE:COL: <what> (Python raises X)".
//
// Expressions: literals, names, + - * / // % ** << >> & | ^ ~ unary +/-, comparisons (chained),
// and/or/not (operands returned as Python does), conditional expressions, subscripts and slices,
// list/tuple/dict displays with * and ** unpacking, list/dict comprehensions and generator
// expressions consumed by a call (their own scope), f-strings, and calls of len, int, float, round,
// min, max, sum, abs, list, tuple, dict, range, zip, enumerate, sorted, reversed, str, bool, any,
// all, and of the str/list/dict methods format, join, split, rsplit, replace, upper, lower, strip,
// lstrip, rstrip, startswith, endswith, count, index, find, get, keys, values, items, copy.
// Not Python exactly: ints are 64-bit (overflow is an error); dict keys are str or int, an int key
// stored as its decimal text; values are copied where Python shares them, so changing a list through
// one name does not change it under another; range, zip, enumerate, reversed and dict views are
// lists (Python's are lazy objects).
#pragma once

#include <cstddef>
#include <string>

#include "formats/pyconfig/ast.h"
#include "formats/pyconfig/value.h"

namespace petrsim::pyconfig {

// Counts values and string bytes built during one read (and iterations of loops and
// comprehensions), so that `[x] * n`, names copied many times or a huge JSON file end in an error,
// not in exhausted memory. Not thread-safe: one per read.
class Budget {
 public:
  void Charge(size_t nodes, size_t bytes, const std::string& where);
  size_t nodes_left() const;
  size_t bytes_left() const;

 private:
  size_t nodes_ = 0;
  size_t bytes_ = 0;
};

// Counts a value's nodes and string bytes (keys included).
void Measure(const ConfigValue& v, size_t* nodes, size_t* bytes);
// Depth of nesting: a scalar 0, a container 1 + its deepest item.
int Depth(const ConfigValue& v);

// An mmcv `{{_base_.a.b}}` placeholder while a file is evaluated: the string
// PlaceholderMarker() + "a.b" + "}}". It starts with a NUL, which no config file holds as text.
const std::string& PlaceholderMarker();
bool HasPlaceholder(const std::string& s);
// How a string holding a placeholder reads in a message: "{{_base_.a.b}}" or the string's text.
std::string PlaceholderText(const std::string& s);

struct EvaluateOptions {
  // A log's `Config:` block (mmcv's pretty_text) holds only values: anything that would be unknown
  // is an error there, `inf`/`nan` are floats, `_base_` is refused.
  bool log_block = false;
};

struct ModuleValues {
  ConfigDict names;        // every module-level name, in first-assignment order
  std::string base_where;  // FILE:LINE:COL of the last `_base_` assignment, "" when none
};

ModuleValues EvaluateModule(const Module& module, const EvaluateOptions& options, Budget* budget);

}  // namespace petrsim::pyconfig
