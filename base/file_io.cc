// Reading whole input files; see file_io.h.
#include "base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/input_files.h"

namespace petrsim {
const char* FileKindName(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

RegularFileChunks::RegularFileChunks(const std::string& path, const std::string& what, uint64_t max_bytes,
                                     size_t chunk_bytes)
    : path_(path), what_(what), max_bytes_(max_bytes), buffer_(chunk_bytes) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    const int saved = errno;
    if (saved == ENOENT) throw ScenarioError(path + ": cannot open " + what + " (no such file or not readable)");
    throw ScenarioError(path + ": cannot open " + what + ": " + std::strerror(saved));
  }
  if (!S_ISREG(info.st_mode)) {
    throw ScenarioError(path + ": expected a " + what + " (a regular file), found " + FileKindName(info.st_mode));
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    throw ScenarioError(path + ": " + std::to_string(info.st_size) + " bytes, more than petrsim reads for a " + what +
                        " (" + std::to_string(max_bytes) + ")");
  }
  // O_NONBLOCK: should the file have been swapped for a FIFO since the stat, open does not wait.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw ScenarioError(path + ": cannot open " + what + " (no such file or not readable)");
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw ScenarioError(path + ": expected a " + what + " (a regular file), found " + FileKindName(info.st_mode));
  }
  size_at_open_ = static_cast<uint64_t>(info.st_size);
  NoteInputFile(path, fd_);
}

RegularFileChunks::~RegularFileChunks() { ::close(fd_); }

std::string_view RegularFileChunks::Next() {
  while (true) {
    const ssize_t got = ::read(fd_, buffer_.data(), buffer_.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      throw ScenarioError(path_ + ": error while reading the " + what_ + ": " + std::strerror(errno));
    }
    // Read to the end, not to the stat'ed size: a file that grew since is still bounded.
    if (read_ + static_cast<uint64_t>(got) > max_bytes_) {
      throw ScenarioError(path_ + ": grew past " + std::to_string(max_bytes_) + " bytes while being read (" + what_ +
                          ")");
    }
    read_ += static_cast<uint64_t>(got);
    return {buffer_.data(), static_cast<size_t>(got)};
  }
}

std::string ReadRegularFile(const std::string& path, const std::string& what, uint64_t max_bytes) {
  RegularFileChunks chunks(path, what, max_bytes, 1 << 16);
  std::string content;
  content.reserve(static_cast<size_t>(chunks.size_at_open()));
  for (std::string_view chunk = chunks.Next(); !chunk.empty(); chunk = chunks.Next()) content.append(chunk);
  return content;
}

}  // namespace petrsim
