// Reading a whole input file (a scenario, a dump, a shard) the one way every reader does: only a
// regular file (after symlinks; a directory, a FIFO, a device such as /dev/zero or a symlink
// loop is refused, never waited on or read without end), at most `max_bytes`, and every failure
// a ScenarioError naming the file, what it was expected to be and what was found.
#pragma once

#include <cstdint>
#include <string>

namespace petrsim {

// `what` names the expected content in errors ("scenario file", "shard file", ...).
std::string ReadRegularFile(const std::string& path, const std::string& what, uint64_t max_bytes);

// What a file of st_mode `mode` is, for errors: "a directory", "a FIFO", "a character device", ...
const char* FileKindName(unsigned mode);

}  // namespace petrsim
