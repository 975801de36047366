// The files read as input, their identities and content hashes; see input_files.h.
#include "base/input_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace petrsim {
namespace {

std::mutex g_inputs_mutex;
std::vector<InputFile>& Inputs() {
  static std::vector<InputFile> inputs;
  return inputs;
}
std::vector<InputFile>& Outputs() {
  static std::vector<InputFile> outputs;
  return outputs;
}
std::vector<std::string>& Directories() {
  static std::vector<std::string> directories;
  return directories;
}

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t Lane(uint64_t lane, uint64_t word) { return Rotl(lane + word * kPrime2, 31) * kPrime1; }
uint64_t Word(const char* p) {
  uint64_t word;
  std::memcpy(&word, p, 8);
  return word;
}
uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

FileIdentity IdentityOf(const struct stat& info) {
  FileIdentity identity;
  identity.size = static_cast<uint64_t>(info.st_size);
  identity.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
  identity.ctime_ns = static_cast<int64_t>(info.st_ctim.tv_sec) * 1'000'000'000 + info.st_ctim.tv_nsec;
  identity.inode = static_cast<uint64_t>(info.st_ino);
  identity.device = static_cast<uint64_t>(info.st_dev);
  return identity;
}

}  // namespace

void NoteInputFile(const std::string& path, int fd) {
  const std::optional<FileIdentity> identity = IdentifyOpenFile(fd);
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  auto& inputs = Inputs();
  const auto known = std::find_if(inputs.begin(), inputs.end(), [&](const InputFile& f) { return f.path == path; });
  // Read twice and different in between (or not identifiable): recorded as no file, which no
  // later identity matches.
  const FileIdentity noted = identity.value_or(FileIdentity{});
  if (known == inputs.end()) {
    inputs.push_back(InputFile{path, noted});
  } else if (!(known->identity == noted)) {
    known->identity = FileIdentity{};
  }
}

void NoteOutputFile(const std::string& path, const FileIdentity& identity) {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  auto& outputs = Outputs();
  const auto known = std::find_if(outputs.begin(), outputs.end(), [&](const InputFile& f) { return f.path == path; });
  if (known == outputs.end()) {
    outputs.push_back(InputFile{path, identity});
  } else {
    known->identity = identity;
  }
}

std::optional<FileIdentity> OutputFileWritten(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  for (const InputFile& output : Outputs()) {
    if (output.path == path) return output.identity;
  }
  return std::nullopt;
}

std::vector<InputFile> InputFilesRead() {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  return Inputs();
}

void NoteInputDirectory(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  auto& directories = Directories();
  if (std::find(directories.begin(), directories.end(), path) == directories.end()) directories.push_back(path);
}

std::vector<std::string> InputDirectoriesListed() {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  return Directories();
}

void ClearInputFilesRead() {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  Inputs().clear();
  Directories().clear();
  Outputs().clear();
}

std::optional<FileIdentity> IdentifyFile(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
  return IdentityOf(info);
}

std::optional<FileIdentity> IdentifyOpenFile(int fd) {
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) return std::nullopt;
  return IdentityOf(info);
}

uint64_t HashBytes(std::string_view bytes) {
  const char* p = bytes.data();
  const size_t n = bytes.size();
  uint64_t lanes[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) lanes[k] = Lane(lanes[k], Word(p + i + 8 * k));
  }
  uint64_t h = Rotl(lanes[0], 1) + Rotl(lanes[1], 7) + Rotl(lanes[2], 12) + Rotl(lanes[3], 18);
  h += n;
  for (; i + 8 <= n; i += 8) h = Rotl(h ^ Lane(0, Word(p + i)), 27) * kPrime1 + kPrime3;
  for (; i < n; ++i) h = Rotl(h ^ (static_cast<uint8_t>(p[i]) * kPrime3), 11) * kPrime1;
  return Mix(h);
}

std::optional<IdentifiedContent> IdentifyAndHashFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const std::optional<FileIdentity> identity = IdentifyOpenFile(fd);
  if (!identity) return std::nullopt;
  const auto size = static_cast<size_t>(identity->size);
  if (size == 0) return IdentifiedContent{*identity, HashBytes({})};
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return std::nullopt;
  ::madvise(data, size, MADV_SEQUENTIAL);
  const uint64_t hash = HashBytes(std::string_view(static_cast<const char*>(data), size));
  ::munmap(data, size);
  return IdentifiedContent{*identity, hash};
}

std::optional<uint64_t> HashFileContent(const std::string& path) {
  const std::optional<IdentifiedContent> content = IdentifyAndHashFile(path);
  if (!content) return std::nullopt;
  return content->hash;
}

std::optional<uint64_t> HashDirectoryListing(const std::string& path, uint64_t entries_max) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(path, error)) return std::nullopt;
  std::vector<std::string> files;
  uint64_t entries = 0;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (++entries > entries_max) return std::nullopt;
    if (it->is_regular_file(error)) files.push_back(it->path().string());
  }
  if (error) return std::nullopt;
  std::sort(files.begin(), files.end());
  std::string joined;
  for (const std::string& file : files) {
    joined += file;
    joined += '\0';
  }
  return HashBytes(joined);
}

}  // namespace petrsim
