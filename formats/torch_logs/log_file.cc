// A training log file's bytes; see log_file.h.
#include "formats/torch_logs/log_file.h"

#include <fcntl.h>
#include <sys/mman.h>
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

namespace petrsim::log_file {

LogBuffer::LogBuffer(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ScenarioError(fmt::format("{}: cannot open the log: {}", path, std::strerror(errno)));
  NoteInputFile(path, fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw ScenarioError(fmt::format("{}: expected a training log (a regular file)", path));
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    // MAP_POPULATE: the whole file is read, so map it at once rather than a page fault at a time.
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      throw ScenarioError(fmt::format("{}: cannot map the log: {}", path, std::strerror(errno)));
    }
    map_ = static_cast<const char*>(map);
  }
  ::close(fd);
  if (size_ >= 2 && static_cast<unsigned char>(map_[0]) == 0x1f && static_cast<unsigned char>(map_[1]) == 0x8b) {
    Inflate();
  }
}

LogBuffer::~LogBuffer() {
  if (map_ != nullptr) ::munmap(const_cast<char*>(map_), size_);
}

void LogBuffer::Inflate() {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) throw ScenarioError(path_ + ": cannot start reading gzip");
  const auto consumed = [&] { return static_cast<size_t>(reinterpret_cast<const char*>(z.next_in) - map_); };
  const auto feed = [&] {
    if (z.avail_in == 0) z.avail_in = static_cast<uInt>(std::min<size_t>(size_ - consumed(), UINT32_MAX));
  };
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(map_));
  feed();
  std::string out(std::max<size_t>(size_ * 4, 1 << 16), '\0');
  size_t produced = 0;
  for (;;) {
    if (produced == out.size()) out.resize(out.size() * 2);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    z.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, UINT32_MAX));
    const uInt before_out = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced += before_out - z.avail_out;
    feed();
    if (rc == Z_STREAM_END) {
      if (consumed() < size_) {  // concatenated gzip members (`cat a.gz b.gz`) are one log
        inflateReset(&z);
        continue;
      }
      break;
    }
    if (rc == Z_BUF_ERROR && consumed() >= size_) {
      if (produced == 0) {  // nothing to read: not an empty log but a file cut short (or only a gzip header)
        inflateEnd(&z);
        throw ScenarioError(
            fmt::format("{}: a gzip stream of {} byte(s) that ends before any of its data; expected a "
                        "compressed training log",
                        path_, size_));
      }
      gzip_note_ = fmt::format("{}: the gzip stream ends early (a file cut short); read up to its end", path_);
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string why = z.msg != nullptr ? z.msg : "corrupt data";
      const size_t at = consumed();
      inflateEnd(&z);
      throw ScenarioError(fmt::format("{}: byte {}: a gzip log that cannot be inflated: {}", path_, at, why));
    }
  }
  inflateEnd(&z);
  out.resize(produced);
  text_ = std::move(out);
  inflated_ = true;
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
