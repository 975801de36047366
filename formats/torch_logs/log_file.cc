// A training log file's bytes; see log_file.h.
#include "formats/torch_logs/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "base/error.h"
#include "base/input_files.h"
#include "formats/torch_logs/training_log.h"

namespace petrsim::log_file {

LogStream::LogStream(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw ScenarioError(fmt::format("{}: cannot open the log: {}", path, std::strerror(errno)));
  NoteInputFile(path, fd_);
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw ScenarioError(fmt::format("{}: expected a training log (a regular file)", path));
  }
  char magic[2];
  const ssize_t n = ::pread(fd_, magic, 2, 0);
  if (n == 2 && static_cast<unsigned char>(magic[0]) == 0x1f && static_cast<unsigned char>(magic[1]) == 0x8b) {
    if (inflateInit2(&z_, 15 + 32) != Z_OK) {
      ::close(fd_);
      throw ScenarioError(path + ": cannot start reading gzip");
    }
    gzip_ = true;
  }
}

LogStream::~LogStream() {
  if (gzip_) inflateEnd(&z_);
  if (fd_ >= 0) ::close(fd_);
}

size_t LogStream::Read(std::string& out, size_t want) {
  if (ended_ || want == 0) return 0;
  // At most a mebibyte a call: `out` grows with what the file holds, never by a whole window of
  // zeros (a window is 32 MiB; a run's logs are often a thousand files of a few kilobytes).
  want = std::min(want, kReadChunkBytes);
  const size_t old = out.size();
  out.resize(old + want);
  const size_t n = gzip_ ? Inflate(out.data() + old, want) : ReadRaw(out.data() + old, want);
  out.resize(old + n);
  if (n == 0) ended_ = true;
  return n;
}

size_t LogStream::ReadRaw(char* into, size_t want) {
  for (;;) {
    const ssize_t n = ::read(fd_, into, want);
    if (n >= 0) {
      raw_read_ += static_cast<uint64_t>(n);
      return static_cast<size_t>(n);
    }
    if (errno != EINTR) throw ScenarioError(fmt::format("{}: cannot read the log: {}", path_, std::strerror(errno)));
  }
}

size_t LogStream::Inflate(char* into, size_t want) {
  z_stream& z = z_;
  const auto consumed = [&] { return raw_read_ - z.avail_in; };  // compressed bytes inflated
  size_t produced = 0;
  while (produced < want) {
    if (z.avail_in == 0) {
      in_.resize(1 << 20);
      in_.resize(ReadRaw(in_.data(), in_.size()));
      z.next_in = reinterpret_cast<Bytef*>(in_.data());
      z.avail_in = static_cast<uInt>(in_.size());
    }
    const bool input_over = z.avail_in == 0;
    z.next_out = reinterpret_cast<Bytef*>(into + produced);
    z.avail_out = static_cast<uInt>(std::min<size_t>(want - produced, UINT32_MAX));
    const uInt before_out = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced += before_out - z.avail_out;
    produced_ += before_out - z.avail_out;
    if (produced_ > kGzipFreeBytes && produced_ > kGzipRatioMax * consumed()) {
      throw ScenarioError(fmt::format(
          "{}: byte {} of the gzip: it inflates to {} bytes, more than {} times its size (petrsim's limit on a "
          "compressed log, against gzip bombs); gunzip it and give the plain log",
          path_, consumed(), produced_, kGzipRatioMax));
    }
    if (rc == Z_STREAM_END) {
      if (z.avail_in > 0 || ::lseek(fd_, 0, SEEK_CUR) < static_cast<off_t>(FileSize())) {
        inflateReset(&z);  // concatenated gzip members (`cat a.gz b.gz`) are one log
        continue;
      }
      break;
    }
    if (rc == Z_BUF_ERROR && input_over) {
      if (produced_ == 0) {  // nothing to read: not an empty log but a file cut short (or only a gzip header)
        throw ScenarioError(
            fmt::format("{}: a gzip stream of {} byte(s) that ends before any of its data; expected a "
                        "compressed training log",
                        path_, raw_read_));
      }
      gzip_note_ = fmt::format("{}: the gzip stream ends early (a file cut short); read up to its end", path_);
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string why = z.msg != nullptr ? z.msg : "corrupt data";
      throw ScenarioError(fmt::format("{}: byte {}: a gzip log that cannot be inflated: {}", path_, consumed(), why));
    }
  }
  return produced;
}

uint64_t LogStream::FileSize() const {
  struct stat info {};
  return ::fstat(fd_, &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
}

// Binary: a NUL byte, or mostly bytes no text log has, in the first 64 KiB.
std::optional<size_t> BinaryOffset(std::string_view text) {
  const std::string_view head = text.substr(0, 1 << 16);
  size_t odd = 0;
  for (size_t i = 0; i < head.size(); ++i) {
    const auto c = static_cast<unsigned char>(head[i]);
    if (c == 0) return i;
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\033' && c != '\b' && c != '\f') ++odd;
  }
  if (head.size() >= 64 && odd * 10 > head.size()) return size_t{0};
  return std::nullopt;
}

bool HasLogName(const std::filesystem::path& path) {
  std::string name = path.filename().string();
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
  for (const char* ext : {".log", ".txt", ".out", ".err"}) {
    const size_t n = std::strlen(ext);
    if (name.size() > n && name.compare(name.size() - n, n, ext) == 0) return true;
  }
  return name == "stdout" || name == "stderr";
}

// The rank a file belongs to by its path: `rank<r>` / `rank_<r>` in its name, or torchrun --log-dir's
// `<local_rank>/stderr.log` (that rank is the local one; the same as the global on one node).
std::optional<uint32_t> RankOfPath(const std::filesystem::path& path, bool* local) {
  std::string name = path.filename().string();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (size_t at = name.find("rank"); at != std::string::npos; at = name.find("rank", at + 1)) {
    size_t p = at + 4;
    if (p < name.size() && (name[p] == '_' || name[p] == '-')) ++p;
    uint32_t r = 0;
    const auto [end, ec] = std::from_chars(name.data() + p, name.data() + name.size(), r);
    if (ec == std::errc() && end != name.data() + p) return r;
  }
  const std::string parent = path.parent_path().filename().string();
  if (!parent.empty() && parent.size() <= 6 && std::all_of(parent.begin(), parent.end(), ::isdigit) &&
      (name.rfind("stdout", 0) == 0 || name.rfind("stderr", 0) == 0)) {
    *local = true;
    return static_cast<uint32_t>(std::stoul(parent));
  }
  return std::nullopt;
}

}  // namespace petrsim::log_file
