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

std::string ReadRegularFile(const std::string& path, const std::string& what, uint64_t max_bytes) {
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
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ScenarioError(path + ": cannot open " + what + " (no such file or not readable)");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw ScenarioError(path + ": expected a " + what + " (a regular file), found " + FileKindName(info.st_mode));
  }
  NoteInputFile(path, fd);
  // Read to the end, not to the stat'ed size: a file that grew since is still bounded.
  std::string content;
  content.reserve(static_cast<size_t>(info.st_size));
  char chunk[1 << 16];
  while (true) {
    const ssize_t got = ::read(fd, chunk, sizeof(chunk));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw ScenarioError(path + ": error while reading the " + what + ": " + std::strerror(errno));
    }
    if (got == 0) break;
    if (content.size() + static_cast<size_t>(got) > max_bytes) {
      throw ScenarioError(path + ": grew past " + std::to_string(max_bytes) + " bytes while being read (" + what + ")");
    }
    content.append(chunk, static_cast<size_t>(got));
  }
  return content;
}

}  // namespace petrsim
