// Reading training logs into a TrainingLog (see training_log.h): which paths are logs, the log files of a directory,
// the environment block's PyTorch version, the ReadTrainingLogs driver and the checks on what it read.
#include "formats/torch_logs/training_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/assert.h"
#include "base/error.h"
#include "formats/torch_logs/log_file.h"
#include "formats/torch_logs/training_log_internal.h"
#include "scenario/torch_version.h"

namespace petrsim {
namespace {

using log_file::BinaryOffset;
using log_file::HasLogName;
using log_file::LogStream;
using log_file::RankOfPath;
using std::string_view;
using training_log_internal::FileContext;
using training_log_internal::LogParser;
using training_log_internal::ReleaseOfFormat;

// The first non-blank line of `text`, cut to 60 characters ("" when there is none).
std::string FirstLine(string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == string_view::npos) return "";
  string_view line = text.substr(begin, text.find('\n', begin) - begin);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line.size() > 60 ? std::string(line.substr(0, 57)) + "..." : std::string(line);
}

}  // namespace

bool LooksLikeTrainingLog(const std::string& path) {
  // petrsim's own inputs are not logs, whatever their text.
  for (const char* ext : {".pbtxt", ".pb", ".pbtrace", ".json", ".pkl", ".pickle"}) {
    const size_t n = std::strlen(ext);
    if (path.size() > n && path.compare(path.size() - n, n, ext) == 0) return false;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char head[512];
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  if (n <= 0) return HasLogName(path);
  const auto* bytes = reinterpret_cast<const unsigned char*>(head);
  if (n >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return true;
  if (bytes[0] == 0x80) return false;  // a pickle
  ssize_t i = 0;
  while (i < n && std::isspace(bytes[i])) ++i;
  if (i < n && bytes[i] == '{') return false;  // a JSON dump
  if (i < n && bytes[i] == '[') {
    ssize_t j = i + 1;
    while (j < n && std::isspace(bytes[j])) ++j;
    if (j >= n || bytes[j] == '{' || bytes[j] == ']') return false;  // a bare list of entries
  }
  return true;
}

bool IsTrainingLogPath(const std::string& path) {
  namespace fs = std::filesystem;
  const auto is_trace = [](const std::string& p) {
    return p.size() > 8 && p.compare(p.size() - 8, 8, ".pbtrace") == 0;
  };
  std::error_code error;
  if (fs::is_regular_file(path, error)) return !is_trace(path) && LooksLikeTrainingLog(path);
  if (!fs::is_directory(path, error)) return false;
  for (const auto& entry : fs::directory_iterator(path, error)) {
    if (!entry.is_regular_file(error)) continue;
    const std::string p = entry.path().string();
    if (is_trace(p) || (!HasLogName(entry.path()) && !LooksLikeTrainingLog(p))) return false;
  }
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file(error) && HasLogName(it->path())) return true;
  }
  return false;
}

namespace {

// The files PATHS name: files as they are, directories searched for log names (sorted).
std::vector<FileContext> ListLogFiles(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<FileContext> files;
  for (const std::string& path : paths) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (error || !fs::exists(status)) throw ScenarioError(fmt::format("{}: no such file or directory", path));
    if (fs::is_directory(status)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, error);
           !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
        if (it->is_regular_file(error) && HasLogName(it->path())) found.push_back(it->path().string());
      }
      if (error) throw ScenarioError(fmt::format("{}: cannot list: {}", path, error.message()));
      if (found.empty()) {
        throw ScenarioError(fmt::format(
            "{}: the directory holds no training logs (*.log, *.txt, *.out, *.err, gzip too), traces or dumps", path));
      }
      std::sort(found.begin(), found.end());
      for (std::string& f : found) files.push_back(FileContext{std::move(f), std::nullopt, false});
    } else {
      files.push_back(FileContext{path, std::nullopt, false});
    }
  }
  return files;
}

// The environment block's `PyTorch: X` of one file: the first file's is used, another noted.
void ReadTorchVersion(TrainingLog& log, string_view text, const std::string& path) {
  if (const auto logged = FindLoggedTorchVersion(text)) {
    const std::string from = fmt::format("{}:{}", path, logged->line);
    if (log.torch_version.empty()) {
      log.torch_version = logged->text;
      log.torch_version_from = from;
    } else if (logged->text != log.torch_version) {
      log.notes.push_back(fmt::format("{} says PyTorch {}, {} PyTorch {}: the first is used", from, logged->text,
                                      log.torch_version_from, log.torch_version));
    }
  }
}

// What was read, checked against how it was read: no rank counted more lines than the log has,
// none logged an iteration past the job's last one, and a world size is never 0.
void CheckReadLog(const TrainingLog& log) {
  uint64_t rank_lines = 0;
  for (const auto& [r, rank] : log.ranks) {
    rank_lines += rank.lines;
    if (rank.last_iteration) PETRSIM_ASSERT(log.last_iteration.has_value());
    if (rank.last_iteration && log.last_iteration)
      PETRSIM_ASSERT(rank.last_iteration->done <= log.last_iteration->done);
  }
  PETRSIM_ASSERT(rank_lines <= log.lines);
  if (log.world_size) PETRSIM_ASSERT(*log.world_size >= 1);
}

// A log is read a window at a time (kWindowBytes of whole lines, and kLookaheadBytes past them for a traceback's
// frames), so that its memory is constant in the log's size; a line longer than a window is refused.
constexpr size_t kWindowBytes = size_t{32} << 20;
constexpr size_t kLookaheadBytes = size_t{1} << 20;

// Reads one file into `parser`; returns its bytes (inflated).
uint64_t ReadLogFile(const FileContext& f, LogParser& parser, TrainingLog& log, std::string& first_line) {
  LogStream stream(f.path);
  std::string window;
  window.reserve(kWindowBytes + kLookaheadBytes);
  uint64_t offset = 0;
  bool ended = false;
  parser.BeginFile(f);
  for (bool first = true;; first = false) {
    while (!ended && window.size() < kWindowBytes + kLookaheadBytes) {
      ended = stream.Read(window, kWindowBytes + kLookaheadBytes - window.size()) == 0;
    }
    if (first) {
      if (const auto at = BinaryOffset(window)) {
        throw ScenarioError(fmt::format("{}: byte {}: expected a text training log, found binary data{}", f.path, *at,
                                        stream.gzip() ? " (after gzip)" : ""));
      }
      if (first_line.empty()) first_line = FirstLine(window);
      ReadTorchVersion(log, window, f.path);
    }
    if (window.empty()) break;
    size_t end = window.size();
    if (!ended || end > kWindowBytes) {
      const size_t nl = string_view(window).substr(0, kWindowBytes).rfind('\n');
      if (nl == string_view::npos) {
        throw ScenarioError(
            fmt::format("{}: byte {}: a line longer than {} MiB; expected a text training log "
                        "(petrsim's limit on a line)",
                        f.path, offset, kWindowBytes >> 20));
      }
      end = nl + 1;
    }
    parser.ParseWindow(window, end, offset);
    window.erase(0, end);
    offset += end;
  }
  parser.EndFile();
  if (!stream.truncated_gzip().empty()) log.notes.push_back(stream.truncated_gzip());
  log.files.push_back(f.path);
  return offset;
}

}  // namespace

TrainingLog ReadTrainingLogs(const std::vector<std::string>& paths) {
  std::vector<FileContext> files = ListLogFiles(paths);
  // A file's own rank counts only when every file has one (one file a rank, or stdout and stderr a rank).
  bool all_ranked = files.size() > 1;
  for (FileContext& f : files) {
    f.rank = RankOfPath(f.path, &f.local_rank);
    if (!f.rank) all_ranked = false;
  }
  TrainingLog log;
  std::set<uint32_t> file_ranks;
  for (FileContext& f : files) {
    if (!all_ranked) {
      f.rank.reset();
    } else if (*f.rank >= kLogRanksMax) {
      throw ScenarioError(
          fmt::format("{}: rank {} by its name: expected a rank of the job, below {} (petrsim's limit "
                      "on the ranks of a log's job)",
                      f.path, *f.rank, kLogRanksMax));
    } else {
      file_ranks.insert(*f.rank);
    }
  }
  log.per_rank_files = static_cast<uint32_t>(file_ranks.size());
  LogParser parser(log);
  std::string first_line;  // the first file's first non-blank line, to say what a file that is no log looks like
  for (const FileContext& f : files) {
    log.bytes += ReadLogFile(f, parser, log, first_line);
    if (f.rank) log.ranks[*f.rank].rank = *f.rank;
    if (f.rank && log.ranks[*f.rank].source.empty()) log.ranks[*f.rank].source = f.path;
  }
  log.log_interval = parser.config_interval_ ? parser.config_interval_ : parser.min_step_;
  if (!log.world_size && log.per_rank_files > 0 && *file_ranks.rbegin() + 1 == log.per_rank_files) {
    log.world_size = log.per_rank_files;
    log.world_size_from = fmt::format("one file per rank, ranks 0-{}", log.per_rank_files - 1);
  }
  if (all_ranked && std::any_of(files.begin(), files.end(), [](const FileContext& f) { return f.local_rank; })) {
    log.notes.push_back(
        "the files' ranks are torchrun's local ranks (`<local_rank>/stderr.log`): the global ranks on one node");
  }
  log.torch_release = ReleaseOfFormat(log);
  // Lines of no rank alone (a watchdog line quoted in a README) do not make a log.
  const bool recognised = !log.ranks.empty() || log.seed || log.world_size || log.last_iteration ||
                          !log.torch_version.empty() || parser.config_interval_ > 0;
  if (!recognised) {
    throw ScenarioError(fmt::format(
        "{}: not a training log, a petrsim trace or a Flight Recorder dump: none of its {} line(s) is one petrsim "
        "reads (an NCCL watchdog or Gloo timeout, an mmcv/mmengine iteration line, a traceback, the environment or "
        "config block){}; {}",
        fmt::join(log.files, ", "), log.lines,
        log.unattributed > 0 ? fmt::format(" of a rank ({} such line(s) name no rank: {})", log.unattributed,
                                           log.notes.empty() ? std::string("-") : log.notes.front())
                             : std::string(),
        first_line.empty() ? std::string("it holds only whitespace")
                           : fmt::format("it starts with \"{}\"", first_line)));
  }
  CheckReadLog(log);
  return log;
}

}  // namespace petrsim
