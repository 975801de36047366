// What the line grammars (training_log.cc) share with the reading of whole logs (training_log_read.cc): a file
// being read, the LogParser that reads its lines into a TrainingLog, and the releases the watchdog lines fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "formats/torch_logs/training_log.h"

namespace petrsim::training_log_internal {

struct FileContext {
  std::string path;
  std::optional<uint32_t> rank;  // the file's own rank
  bool local_rank = false;
};

struct Prefixed;  // the launcher prefixes of a line (training_log.cc)

class LogParser {
 public:
  explicit LogParser(TrainingLog& log) : log_(log) {}

  // A file is read a window at a time: BeginFile, ParseWindow for each, EndFile. ParseWindow parses the lines of
  // text[0, end) (whole lines; numbered on from the window before), looking ahead into text[end, size) for what
  // follows a line (a traceback's frames); `offset` is text[0]'s byte in the file.
  void BeginFile(const FileContext& file);
  void ParseWindow(std::string_view text, size_t end, uint64_t offset);
  void EndFile();

 private:
  LogPlace Here(uint64_t line) const;
  std::string At(uint64_t line) const;

  std::optional<uint32_t> RankOf(const Prefixed& p, std::optional<uint32_t> message_rank);
  RankLog& Rank(uint32_t r);
  void ParseLine(uint64_t number, size_t offset, std::string_view line);
  void Seed(uint64_t number, std::string_view rest);
  void ExitCode(std::string_view after);
  void GpuIds(uint64_t number, std::string_view rest, size_t at);
  uint32_t CheckedRank(uint64_t r, uint64_t number, bool bracketed = false) const;
  std::optional<uint64_t> CountAfter(uint64_t number, std::string_view rest, std::string_view key,
                                     std::string_view ends) const;
  void SetWorldSize(uint64_t n, std::string from);
  std::optional<uint32_t> MessageRank(std::string_view rest, uint64_t number) const;
  static void MessageGroup(std::string_view rest, std::string& pg, std::string& desc);
  void Watchdog(uint64_t number, const Prefixed& p);
  void WorkStatus(uint64_t number, const Prefixed& p);
  void GlooTimeout(uint64_t number, const Prefixed& p);
  void Merge(uint32_t r, LogTimeout t, uint64_t number, bool status_only = false);
  static size_t IterationMarker(std::string_view rest, LogIteration& it);
  bool Iteration(uint64_t number, const Prefixed& p);
  void Traceback(uint64_t number, size_t offset, size_t length, const Prefixed& head);
  void Note(std::string note);

 public:
  std::optional<uint64_t> config_interval_, min_step_;

 private:
  TrainingLog& log_;
  const FileContext* file_ = nullptr;
  std::string_view text_;
  std::string seed_at_;
  std::optional<uint32_t> summary_rank_;
  uint64_t line_ = 0;        // the line being parsed, for errors
  uint64_t file_lines_ = 0;  // lines of the file parsed so far
};

// The releases a watchdog line's format fits, from its fields and ProcessGroupNCCL.cpp line.
std::string ReleaseOfFormat(const TrainingLog& log);

}  // namespace petrsim::training_log_internal
