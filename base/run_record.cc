// A command's run recorded for re-use: the record's text form, written and checked; see
// run_record.h.
//
//   petrsim-run-record 2
//   command <hash of the key and the working directory>
//   file <size> <mtime_ns> <ctime_ns> <inode> <device> <content hash> <path length> <path>
//   dir <listing hash> <path length> <path>
//   output <size> <mtime_ns> <ctime_ns> <inode> <device> <content hash>     (when it wrote one)
//   exit <code>
//   printed <length>
//   <the printed bytes>
//
// One `file` line per input and one for petrsim's executable; paths are length-prefixed (they
// may hold spaces or newlines).
#include "base/run_record.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "base/file_io.h"
#include "base/input_files.h"
#include "base/temp_files.h"

namespace petrsim {
namespace {

constexpr const char* kMagic = "petrsim-run-record 2";
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
  bool Integer(int& value) { return static_cast<bool>(in_ >> value); }
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
  // What was printed: its length, a newline, its bytes, then the end of the record.
  bool Printed(std::string& out) {
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

std::string ImportRecordPath(const std::string& output) { return output + ".petrsim-cache"; }

std::string RunKeyHash(const std::vector<std::string>& key) { return fmt::format("{:016x}", CommandHash(key)); }

std::string CacheDirectory() {
  std::string directory;
  if (const char* own = std::getenv("PETRSIM_CACHE_DIR"); own != nullptr && *own != 0) {
    if (std::string(own) == "off") return "";
    directory = own;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/') {
    directory = std::string(xdg) + "/petrsim";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    directory = std::string(home) + "/.cache/petrsim";
  } else {
    return "";
  }
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error || !std::filesystem::is_directory(directory, error)) return "";
  ::chmod(directory.c_str(), 0700);
  return directory;
}

namespace {

// The record's file lines up to its end; false when one no longer holds. `output`: whether the
// record must name one (and which), "" when it must not.
bool InputsUnchanged(RecordReader& record, const std::string& output, int& exit_code) {
  bool executable_seen = false;
  bool output_seen = false;
  const std::string executable = Executable();
  for (std::string kind = record.Next();; kind = record.Next()) {
    if (kind == "file") {
      FileRecord file;
      if (!record.Identity(file.identity, file.hash) || !record.Sized(file.path)) return false;
      if (!Unchanged(file.path, file.identity, file.hash)) return false;
      executable_seen = executable_seen || file.path == executable;
    } else if (kind == "dir") {
      uint64_t listing = 0;
      std::string directory;
      if (!record.HexWord(listing) || !record.Sized(directory)) return false;
      const std::optional<uint64_t> now = HashDirectoryListing(directory);
      if (!now || *now != listing) return false;
    } else if (kind == "output") {
      FileIdentity identity;
      uint64_t hash = 0;
      if (output.empty() || !record.Identity(identity, hash) || !Unchanged(output, identity, hash)) return false;
      output_seen = true;
    } else if (kind == "exit") {
      return record.Integer(exit_code) && executable_seen && !executable.empty() && output_seen == !output.empty();
    } else {
      return false;
    }
  }
}

}  // namespace

std::optional<RecordedRun> FindRecordedRun(const std::string& record_path, const std::vector<std::string>& key,
                                           const std::string& output) {
  std::string text;
  try {  // a missing, oversized or unreadable record is none
    text = ReadRegularFile(record_path, "run record", kRecordBytesMax);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  RecordReader record(std::move(text));
  if (!record.Word("petrsim-run-record") || !record.Word("2") || !record.Word("command")) return std::nullopt;
  uint64_t command = 0;
  if (!record.HexWord(command) || command != CommandHash(key)) return std::nullopt;
  RecordedRun run;
  if (!InputsUnchanged(record, output, run.exit_code) || !record.Word("printed") || !record.Printed(run.printed)) {
    return std::nullopt;
  }
  return run;
}

void StoreRecordedRun(const std::string& record_path, const std::vector<std::string>& key,
                      const std::vector<InputFile>& inputs, const std::vector<std::string>& directories,
                      const std::string& output, const RecordedRun& run) {
  try {
    std::string text = fmt::format("{}\ncommand {:016x}\n", kMagic, CommandHash(key));
    std::vector<InputFile> files = inputs;
    const std::string executable = Executable();
    const std::optional<FileIdentity> running = executable.empty() ? std::nullopt : IdentifyFile(executable);
    if (!running) return;
    files.push_back(InputFile{executable, *running});
    for (const InputFile& file : files) {
      // Recorded only as the file that was read: one that changed since was read in another
      // state than it is in now, and the result may be of neither.
      const std::optional<IdentifiedContent> now = IdentifyAndHashFile(file.path);
      if (!now || !(now->identity == file.identity)) return;
      text += fmt::format("file {} {} {}\n", IdentityText(now->identity, now->hash), file.path.size(), file.path);
    }
    for (const std::string& directory : directories) {
      const std::optional<uint64_t> listing = HashDirectoryListing(directory);
      if (!listing) return;
      text += fmt::format("dir {:016x} {} {}\n", *listing, directory.size(), directory);
    }
    if (!output.empty()) {
      // Only the output this run wrote: another run may have renamed its own onto it since.
      const std::optional<FileIdentity> written = OutputFileWritten(output);
      const std::optional<IdentifiedContent> now = IdentifyAndHashFile(output);
      if (!written || !now || now->identity.inode != written->inode || now->identity.device != written->device ||
          now->identity.size != written->size || now->identity.mtime_ns != written->mtime_ns) {
        return;
      }
      text += fmt::format("output {}\n", IdentityText(now->identity, now->hash));
    }
    text += fmt::format("exit {}\nprinted {}\n", run.exit_code, run.printed.size());
    text += run.printed;
    WriteFileAtomically(record_path, text, AtomicFile::TempName::kUnique);
  } catch (const std::exception&) {
    // The record is an aid: a run that could not record itself runs again next time.
  }
}

}  // namespace petrsim
