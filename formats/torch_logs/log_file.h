// A training log file's bytes for formats/torch_logs/training_log_read.cc: read or inflated from gzip (concatenated
// members too) a window at a time, and whether they are text at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <zlib.h>

namespace petrsim::log_file {

// A file's bytes read in order, a window at a time, so that reading a log costs memory constant in its size: plain
// files by read(2), gzip inflated as it is read (concatenated members are one log). Throws ScenarioError naming the
// file when it cannot be opened, is not a regular file, is gzip that cannot be inflated, or inflates past
// kGzipRatioMax times its size (training_log.h); a gzip stream cut short is read up to its end and said in
// truncated_gzip().
class LogStream {
 public:
  explicit LogStream(const std::string& path);
  ~LogStream();
  LogStream(const LogStream&) = delete;
  LogStream& operator=(const LogStream&) = delete;

  // Appends up to `want` bytes (at most kReadChunkBytes) to `out`; returns how many, 0 at the end
  // of the log.
  size_t Read(std::string& out, size_t want);
  static constexpr size_t kReadChunkBytes = size_t{1} << 20;
  bool gzip() const { return gzip_; }
  const std::string& truncated_gzip() const { return gzip_note_; }

 private:
  size_t ReadRaw(char* into, size_t want);
  size_t Inflate(char* into, size_t want);
  uint64_t FileSize() const;

  std::string path_;
  int fd_ = -1;
  bool gzip_ = false;
  bool ended_ = false;
  std::string in_;         // compressed bytes read ahead (gzip)
  uint64_t raw_read_ = 0;  // bytes read from the file
  uint64_t produced_ = 0;  // bytes inflated (gzip)
  z_stream z_{};           // gzip: inflateInit2 done when gzip_
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
