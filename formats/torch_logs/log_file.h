// A training log file's bytes for formats/torch_logs/training_log_read.cc: mapped, or inflated from gzip (concatenated
// members too), and whether they are text at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace petrsim::log_file {

// A file's bytes: mapped, or inflated from gzip. Throws ScenarioError naming the file when it cannot be
// opened, is not a regular file, or is gzip that cannot be inflated; a gzip stream cut short is read up to
// its end and said in truncated_gzip().
class LogBuffer {
 public:
  explicit LogBuffer(const std::string& path);
  ~LogBuffer();
  LogBuffer(const LogBuffer&) = delete;
  LogBuffer& operator=(const LogBuffer&) = delete;

  std::string_view text() const { return inflated_ ? std::string_view(text_) : std::string_view(map_, size_); }
  bool gzip() const { return inflated_; }
  const std::string& truncated_gzip() const { return gzip_note_; }

 private:
  void Inflate();

  std::string path_;
  const char* map_ = nullptr;
  size_t size_ = 0;
  bool inflated_ = false;
  std::string text_;
  std::string gzip_note_;
};

// Binary: the offset of a NUL byte, or 0 when most of the first 64 KiB are bytes no text log has; nothing
// for text.
std::optional<size_t> BinaryOffset(std::string_view text);

// A name a log has: *.log, *.txt, *.out, *.err (and their .gz), stdout, stderr.
bool HasLogName(const std::filesystem::path& path);

// The rank a file belongs to by its path: `rank<r>` / `rank_<r>` in its name, or torchrun --log-dir's
// `<local_rank>/stderr.log` (then `*local` is set: that rank is the local one).
std::optional<uint32_t> RankOfPath(const std::filesystem::path& path, bool* local);

}  // namespace petrsim::log_file
