// The import cache's record: its text form, written and checked; see import_cache.h.
//
//   petrsim-import-cache 1
//   command <hash of the command line and the working directory>
//   file <size> <mtime_ns> <ctime_ns> <inode> <device> <content hash> <path length> <path>
//   dir <listing hash> <path length> <path>
//   output <size> <mtime_ns> <ctime_ns> <inode> <device> <content hash>
//   summary <length>
//   <the summary's bytes>
//
// One `file` line per input and one for petrsim's executable; paths are length-prefixed (they
// may hold spaces or newlines).
#include "importers/import_cache.h"

#include <fmt/format.h>
#include <filesystem>
#include <sstream>

#include "base/file_io.h"
#include "base/input_files.h"
#include "base/temp_files.h"

namespace petrsim {
namespace {

constexpr const char* kMagic = "petrsim-import-cache 1";
constexpr uint64_t kRecordBytesMax = uint64_t{1} << 24;

// petrsim itself is an input: another build may import differently.
std::string Executable() {
  std::error_code error;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string() : path.string();
}

uint64_t CommandHash(const std::vector<std::string>& command_line) {
  std::error_code error;
  std::string joined = std::filesystem::current_path(error).string();
  for (const std::string& argument : command_line) {
    joined += '\0';
    joined += argument;
  }
  return HashBytes(joined);
}

struct FileRecord {
  FileIdentity identity;
  uint64_t hash = 0;
  std::string path;
};

std::string IdentityText(const FileIdentity& identity, uint64_t hash) {
  return fmt::format("{} {} {} {} {} {:016x}", identity.size, identity.mtime_ns, identity.ctime_ns, identity.inode,
                     identity.device, hash);
}

// Whether the file at `path` still is the one recorded: the same identity, or the same content.
bool Unchanged(const std::string& path, const FileIdentity& identity, uint64_t hash) {
  const std::optional<FileIdentity> now = IdentifyFile(path);
  if (!now) return false;
  if (*now == identity) return true;
  if (now->size != identity.size) return false;
  const std::optional<uint64_t> content = HashFileContent(path);
  return content && *content == hash;
}

// A strict reader of the record: any deviation makes it invalid (nullopt).
class RecordReader {
 public:
  explicit RecordReader(std::string text) : in_(std::move(text)) {}

  bool Word(const char* expected) {
    std::string word;
    return static_cast<bool>(in_ >> word) && word == expected;
  }
  bool Identity(FileIdentity& identity, uint64_t& hash) {
    std::string hex;
    if (!(in_ >> identity.size >> identity.mtime_ns >> identity.ctime_ns >> identity.inode >> identity.device >> hex)) {
      return false;
    }
    return Hex(hex, hash);
  }
  bool Hex(const std::string& hex, uint64_t& value) {
    if (hex.empty() || hex.size() > 16) return false;
    value = 0;
    for (const char c : hex) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return false;
      value = value << 4 | static_cast<uint64_t>(digit);
    }
    return true;
  }
  bool HexWord(uint64_t& value) {
    std::string hex;
    return static_cast<bool>(in_ >> hex) && Hex(hex, value);
  }
  // A length, one space, then that many bytes.
  bool Sized(std::string& out) {
    uint64_t length = 0;
    if (!(in_ >> length) || length > kRecordBytesMax || in_.get() != ' ') return false;
    out.resize(length);
    return static_cast<bool>(in_.read(out.data(), static_cast<std::streamsize>(length)));
  }
  std::string Next() {
    std::string word;
    in_ >> word;
    return word;
  }
  // The summary: its length, a newline, its bytes, then the end of the record.
  bool Summary(std::string& out) {
    uint64_t length = 0;
    if (!(in_ >> length) || length > kRecordBytesMax || in_.get() != '\n') return false;
    out.resize(length);
    if (!in_.read(out.data(), static_cast<std::streamsize>(length))) return false;
    return in_.peek() == std::char_traits<char>::eof();
  }

 private:
  std::istringstream in_;
};

}  // namespace

std::string ImportCachePath(const std::string& output) { return output + ".petrsim-cache"; }

std::optional<std::string> FindCachedImport(const std::string& output, const std::vector<std::string>& command_line) {
  const std::string path = ImportCachePath(output);
  const std::optional<FileIdentity> exists = IdentifyFile(path);
  if (!exists || exists->size > kRecordBytesMax) return std::nullopt;
  std::string text;
  try {
    text = ReadRegularFile(path, "import cache record", kRecordBytesMax);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  RecordReader record(std::move(text));
  if (!record.Word("petrsim-import-cache") || !record.Word("1") || !record.Word("command")) return std::nullopt;
  uint64_t command = 0;
  if (!record.HexWord(command) || command != CommandHash(command_line)) return std::nullopt;
  bool executable_seen = false;
  const std::string executable = Executable();
  for (std::string kind = record.Next();; kind = record.Next()) {
    if (kind == "file") {
      FileRecord file;
      if (!record.Identity(file.identity, file.hash) || !record.Sized(file.path)) return std::nullopt;
      if (!Unchanged(file.path, file.identity, file.hash)) return std::nullopt;
      executable_seen = executable_seen || file.path == executable;
    } else if (kind == "dir") {
      uint64_t listing = 0;
      std::string directory;
      if (!record.HexWord(listing) || !record.Sized(directory)) return std::nullopt;
      const std::optional<uint64_t> now = HashDirectoryListing(directory);
      if (!now || *now != listing) return std::nullopt;
    } else if (kind == "output") {
      FileIdentity identity;
      uint64_t hash = 0;
      if (!record.Identity(identity, hash) || !Unchanged(output, identity, hash)) return std::nullopt;
      break;
    } else {
      return std::nullopt;
    }
  }
  std::string summary;
  if (!executable_seen || executable.empty() || !record.Word("summary") || !record.Summary(summary)) {
    return std::nullopt;
  }
  return summary;
}

void StoreCachedImport(const std::string& output, const std::vector<std::string>& command_line,
                       const std::vector<InputFile>& inputs, const std::vector<std::string>& directories,
                       const std::string& summary) {
  try {
    std::string text = fmt::format("{}\ncommand {:016x}\n", kMagic, CommandHash(command_line));
    std::vector<InputFile> files = inputs;
    const std::string executable = Executable();
    const std::optional<FileIdentity> running = executable.empty() ? std::nullopt : IdentifyFile(executable);
    if (!running) return;
    files.push_back(InputFile{executable, *running});
    for (const InputFile& file : files) {
      // Recorded only as the file that was read: one that changed since was read in another
      // state than it is in now, and the scenario may be of neither.
      const std::optional<IdentifiedContent> now = IdentifyAndHashFile(file.path);
      if (!now || !(now->identity == file.identity)) return;
      text += fmt::format("file {} {} {}\n", IdentityText(now->identity, now->hash), file.path.size(), file.path);
    }
    for (const std::string& directory : directories) {
      const std::optional<uint64_t> listing = HashDirectoryListing(directory);
      if (!listing) return;
      text += fmt::format("dir {:016x} {} {}\n", *listing, directory.size(), directory);
    }
    // Only the OUT this import wrote: another run may have renamed its own onto it since.
    const std::optional<FileIdentity> written = OutputFileWritten(output);
    const std::optional<IdentifiedContent> now = IdentifyAndHashFile(output);
    if (!written || !now || now->identity.inode != written->inode || now->identity.device != written->device ||
        now->identity.size != written->size || now->identity.mtime_ns != written->mtime_ns) {
      return;
    }
    text += fmt::format("output {}\nsummary {}\n", IdentityText(now->identity, now->hash), summary.size());
    text += summary;
    WriteFileAtomically(ImportCachePath(output), text, AtomicFile::TempName::kUnique);
  } catch (const std::exception&) {
    // The cache is an aid: an import that could not record itself runs again next time.
  }
}

}  // namespace petrsim
