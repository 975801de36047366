// The registry of temporary files and the Ctrl-C handler that removes them; see temp_files.h.
#include "base/temp_files.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>

#include "base/error.h"
#include "base/input_files.h"

namespace petrsim {
namespace {

enum SlotState : int { kFree = 0, kClaimed = 1, kLive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char prefix[kTempFilePathMax];
  char suffix[64];
  uint32_t count;  // 0: prefix is the whole path
};

Slot g_slots[kTempFileSlots];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

int Claim(const std::string& prefix, const std::string& suffix, uint32_t count) {
  if (prefix.size() >= kTempFilePathMax || suffix.size() >= sizeof(Slot::suffix) ||
      prefix.size() + suffix.size() + 12 >= kTempFilePathMax) {
    return -1;
  }
  for (size_t i = 0; i < kTempFileSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kClaimed)) continue;
    Slot& slot = g_slots[i];
    std::memcpy(slot.prefix, prefix.c_str(), prefix.size() + 1);
    std::memcpy(slot.suffix, suffix.c_str(), suffix.size() + 1);
    slot.count = count;
    slot.state.store(kLive, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

// Appends `text` at `at` of `buffer` (room checked by Claim); returns the new end.
size_t Append(char* buffer, size_t at, const char* text) {
  const size_t n = std::strlen(text);
  std::memcpy(buffer + at, text, n + 1);
  return at + n;
}

void RemoveSlot(const Slot& slot) {
  if (slot.count == 0) {
    ::unlink(slot.prefix);
    return;
  }
  char path[kTempFilePathMax];
  const size_t stem = Append(path, 0, slot.prefix);
  for (uint32_t n = 0; n < slot.count; ++n) {
    char digits[12];
    size_t d = sizeof(digits);
    digits[--d] = '\0';
    uint32_t value = n;
    do {
      digits[--d] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0);
    Append(path, Append(path, stem, digits + d), slot.suffix);
    ::unlink(path);
  }
}

void OnTerminationSignal(int signo) {
  RemoveRegisteredTempFiles();
  // Die of the signal, as without this handler: it is pending (blocked while the handler runs)
  // and is delivered, with its default action, when the handler returns.
  std::signal(signo, SIG_DFL);
  std::raise(signo);
}

}  // namespace

TempFileRegistration::TempFileRegistration(const std::string& path) : slot_(Claim(path, "", 0)) {}

TempFileRegistration::TempFileRegistration(const std::string& prefix, const std::string& suffix, uint32_t count)
    : slot_(Claim(prefix, suffix, count)) {}

TempFileRegistration& TempFileRegistration::operator=(TempFileRegistration&& other) noexcept {
  if (this != &other) {
    Reset();
    slot_ = other.slot_;
    other.slot_ = -1;
  }
  return *this;
}

void TempFileRegistration::Reset() {
  if (slot_ < 0) return;
  g_slots[slot_].state.store(kFree, std::memory_order_release);
  slot_ = -1;
}

void RemoveRegisteredTempFiles() {
  for (const Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kLive) RemoveSlot(slot);
  }
}

void InstallTempFileCleanup() {
  for (const int signo : kSignals) {
    struct sigaction previous {};
    if (::sigaction(signo, nullptr, &previous) != 0 || previous.sa_handler != SIG_DFL) continue;
    struct sigaction action {};
    action.sa_handler = OnTerminationSignal;
    sigemptyset(&action.sa_mask);
    for (const int other : kSignals) sigaddset(&action.sa_mask, other);
    action.sa_flags = SA_RESTART;
    ::sigaction(signo, &action, nullptr);
  }
}

TerminationSignalsHeld::TerminationSignalsHeld() {
  sigset_t held;
  sigemptyset(&held);
  for (const int signo : kSignals) sigaddset(&held, signo);
  ::pthread_sigmask(SIG_BLOCK, &held, &previous_);
}

TerminationSignalsHeld::~TerminationSignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

namespace {

std::string TempPath(const std::string& path, AtomicFile::TempName temp_name) {
  if (temp_name == AtomicFile::TempName::kFixed) return path + ".tmp";
  static std::atomic<uint64_t> next{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(next.fetch_add(1));
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path, TempName temp_name)
    : path_(path), tmp_path_(TempPath(path, temp_name)), registration_(tmp_path_) {
  if (temp_name == TempName::kFixed) {
    file_ = std::fopen(tmp_path_.c_str(), "wb");
  } else {
    const int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    file_ = fd < 0 ? nullptr : ::fdopen(fd, "wb");
    if (fd >= 0 && file_ == nullptr) ::close(fd);
  }
  if (file_ == nullptr) {
    // Named as "<path>.tmp" either way: the process id in a unique name says nothing to the user.
    throw ScenarioError(path + ".tmp: cannot open for writing: " + std::strerror(errno));
  }
}

AtomicFile::~AtomicFile() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void AtomicFile::Write(std::string_view data) {
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
    throw ScenarioError(tmp_path_ + ": cannot write: " + std::strerror(errno));
  }
}

void AtomicFile::Commit() {
  // The inode this rename puts at path_: what this process wrote there (base/input_files.h).
  const bool flushed = std::fflush(file_) == 0;
  const std::optional<FileIdentity> written = flushed ? IdentifyOpenFile(::fileno(file_)) : std::nullopt;
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) {
    const int error = errno;
    std::remove(tmp_path_.c_str());
    throw ScenarioError(tmp_path_ + ": cannot write: " + std::strerror(error));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp_path_.c_str());
    throw ScenarioError(path_ + ": cannot rename " + tmp_path_ + " onto it: " + std::strerror(error));
  }
  if (written) NoteOutputFile(path_, *written);
}

void WriteFileAtomically(const std::string& path, std::string_view bytes, AtomicFile::TempName temp_name) {
  AtomicFile file(path, temp_name);
  file.Write(bytes);
  file.Commit();
}

}  // namespace petrsim
