// The files this process read as input, and how to tell later that one is unchanged: what a
// cached result depends on (base/run_record.h). Every whole-file reader notes the files it
// opens (NoteInputFile); the list is in first-read order, each path once, and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace petrsim {

// What stat says of a regular file. Any write changes its ctime (which no tool can set back), so
// an equal identity means the same content in practice; a content hash settles the rest.
struct FileIdentity {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t inode = 0;
  uint64_t device = 0;
  bool operator==(const FileIdentity&) const = default;
};

// A file read, with its identity when the reader opened it (`fd`, open on it): a result cached
// from it is only recorded when the file is still that one (it did not change while being read).
struct InputFile {
  std::string path;
  FileIdentity identity;
};
void NoteInputFile(const std::string& path, int fd);
std::vector<InputFile> InputFilesRead();
// Directories whose listing a reader depended on (the files it found under them).
void NoteInputDirectory(const std::string& path);
std::vector<std::string> InputDirectoriesListed();
// An output this process wrote whole (AtomicFile::Commit): the inode its rename put at `path`.
void NoteOutputFile(const std::string& path, const FileIdentity& identity);
std::optional<FileIdentity> OutputFileWritten(const std::string& path);
void ClearInputFilesRead();  // and the directories and outputs
// Null when `path` is missing, unreadable or not a regular file (after symlinks).
std::optional<FileIdentity> IdentifyFile(const std::string& path);

// A 64-bit hash of bytes: four independent multiply-rotate lanes over 32-byte blocks (several
// GB/s), for telling an unchanged file from a changed one. Not cryptographic.
uint64_t HashBytes(std::string_view bytes);
// The hash of a regular file's content, read through a private mapping; null when it cannot be
// read.
std::optional<uint64_t> HashFileContent(const std::string& path);
// The identity and content hash of the file at `path`, both of the one file opened (a rename
// between the two cannot mix two files); null when it cannot be read.
struct IdentifiedContent {
  FileIdentity identity;
  uint64_t hash = 0;
};
std::optional<IdentifiedContent> IdentifyAndHashFile(const std::string& path);
// The identity of the file open as `fd`; null when fstat fails or it is not a regular file.
std::optional<FileIdentity> IdentifyOpenFile(int fd);
// The hash of the sorted paths of the regular files under `path` (recursively, at most
// `entries_max` entries walked); null when it is not a directory or holds more.
std::optional<uint64_t> HashDirectoryListing(const std::string& path, uint64_t entries_max = 200'000);

}  // namespace petrsim
