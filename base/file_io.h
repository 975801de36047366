// Reading a whole input file (a scenario, a dump, a shard) the one way every reader does: only a
// regular file (after symlinks; a directory, a FIFO, a device such as /dev/zero or a symlink
// loop is refused, never waited on or read without end), at most `max_bytes`, and every failure
// a ScenarioError naming the file, what it was expected to be and what was found.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace petrsim {

// `what` names the expected content in errors ("scenario file", "shard file", ...).
std::string ReadRegularFile(const std::string& path, const std::string& what, uint64_t max_bytes);

// The same file, opened with the same checks, read a chunk at a time (a file too big to hold whole, parsed as it
// is read). Every failure is a ScenarioError as above.
class RegularFileChunks {
 public:
  RegularFileChunks(const std::string& path, const std::string& what, uint64_t max_bytes, size_t chunk_bytes = 1 << 20);
  ~RegularFileChunks();
  RegularFileChunks(const RegularFileChunks&) = delete;
  RegularFileChunks& operator=(const RegularFileChunks&) = delete;
  // The next chunk (valid until the next call), empty at the end of the file.
  std::string_view Next();
  // The file's size when it was opened.
  uint64_t size_at_open() const { return size_at_open_; }

 private:
  std::string path_, what_;
  uint64_t max_bytes_;
  int fd_ = -1;
  uint64_t size_at_open_ = 0;
  uint64_t read_ = 0;
  std::vector<char> buffer_;
};

// What a file of st_mode `mode` is, for errors: "a directory", "a FIFO", "a character device", ...
const char* FileKindName(unsigned mode);

}  // namespace petrsim
