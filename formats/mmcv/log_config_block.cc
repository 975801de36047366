// The `Config:` block of a training log (mmcv's pretty_text of the merged config); see config.h.
#include <cctype>

#include "base/error.h"
#include "base/file_io.h"
#include "formats/mmcv/config.h"
#include "formats/mmcv/config_internal.h"

namespace petrsim {
namespace {

bool StartsWithLoggerTimestamp(std::string_view line) {
  // "2022-11-08 10:02:13,000 - "
  static const char kShape[] = "dddd-dd-dd dd:dd:dd,ddd - ";
  const size_t n = sizeof(kShape) - 1;
  if (line.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(line[i])) != 0;
    if (kShape[i] == 'd' ? !digit : line[i] != kShape[i]) return false;
  }
  return true;
}

}  // namespace

Config ReadConfigBlockOfLogText(std::string_view text, const std::string& log_path) {
  // The lines, with their numbers; the block is between the `Config:` record and the next record.
  size_t p = 0;
  int line = 0;
  size_t block_begin = std::string_view::npos;
  int block_line = 0;
  size_t block_end = text.size();
  while (p < text.size()) {
    ++line;
    size_t end = text.find('\n', p);
    if (end == std::string_view::npos) end = text.size();
    std::string_view content = text.substr(p, end - p);
    const size_t next = end < text.size() ? end + 1 : end;
    if (block_begin == std::string_view::npos) {
      while (!content.empty() && (content.back() == '\r' || content.back() == ' ' || content.back() == '\t')) {
        content.remove_suffix(1);
      }
      constexpr std::string_view kConfigRecord = " - Config:";
      if (StartsWithLoggerTimestamp(content) && content.size() >= kConfigRecord.size() &&
          content.substr(content.size() - kConfigRecord.size()) == kConfigRecord) {
        block_begin = next;
        block_line = line + 1;
      }
    } else if (StartsWithLoggerTimestamp(content)) {
      block_end = p;
      break;
    }
    p = next;
  }
  if (block_begin == std::string_view::npos) {
    throw ScenarioError(log_path +
                        ": no Config block: petrsim looks for the record mmdet's train.py logs before the config, a "
                        "line like '2022-11-08 10:02:13,000 - mmdet - INFO - Config:'");
  }
  const std::string_view block = text.substr(block_begin, block_end - block_begin);
  pyconfig::Budget budget;
  mmcv_internal::FileValues file = mmcv_internal::EvaluatePython(block, log_path, true, block_line, &budget);
  mmcv_internal::CheckReservedKeys(file.dict, log_path);
  Config config;
  config.path = log_path;
  config.files = {log_path};
  config.root.value = std::move(file.dict);
  config.root.where = log_path;
  return config;
}

Config ReadConfigBlockOfLog(const std::string& log_path) {
  const std::string text = ReadRegularFile(log_path, "training log", kMaxConfigLogBytes);
  return ReadConfigBlockOfLogText(text, log_path);
}

}  // namespace petrsim
