// What the mmcv config reader's files share (not a public header): one file's values before its
// bases, and the readers of a file's text.
#pragma once

#include <string>
#include <string_view>

#include "formats/pyconfig/evaluator.h"
#include "formats/pyconfig/value.h"

namespace petrsim::mmcv_internal {

struct FileValues {
  ConfigDict dict;  // the file's cfg_dict before its bases: names in first-assignment order
  bool has_base = false;
  ConfigValue base;        // the `_base_` value
  std::string base_where;  // FILE:LINE:COL of the (last) `_base_` assignment
};

// A .py file's (or a log block's) text: parsed, evaluated, and its names filtered as mmcv's
// _file2dict filters them. `first_line` numbers the text's first line.
FileValues EvaluatePython(std::string_view text, const std::string& path, bool log_block, int first_line,
                          pyconfig::Budget* budget);
// A .json file's text (`{{_base_.x}}` placeholders allowed, as mmcv reads them).
FileValues EvaluateJson(std::string_view original, const std::string& path, pyconfig::Budget* budget);
// mmcv's RESERVED_KEYS: filename, text, pretty_text.
void CheckReservedKeys(const ConfigDict& dict, const std::string& path);

}  // namespace petrsim::mmcv_internal
