// Files being written under a temporary name ("X.tmp", renamed onto "X" once complete), and what
// Ctrl-C does to them. Each writer (the Perfetto timeline, the trace directory, the imported
// scenario) registers its temporary files while they exist; the handler InstallTempFileCleanup()
// installs for SIGINT, SIGTERM and SIGHUP removes every registered file, then dies of the signal
// as the process would have without it (a shell reports 128 + the signal: 130 for Ctrl-C). The
// final name is only ever made by a rename, so an interrupted run leaves neither the temporary
// file nor a half-written output. A commit that renames several files holds the signals
// (TerminationSignalsHeld) so that it is never cut in half.
//
// The handler is async-signal-safe: the registry is a fixed table of kTempFileSlots entries
// (no allocation; unlink(2) only). An entry is one path, or a numbered family
// "<prefix><n><suffix>" for n in [0, count) (a trace directory's rank_<r>.pbtrace.tmp files). A
// registration that finds the table full, or a path longer than kTempFilePathMax, is a handle
// that holds nothing (the file is then removed only by its writer).
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace petrsim {

inline constexpr size_t kTempFileSlots = 32;
inline constexpr size_t kTempFilePathMax = 4096;

// One registered path or family; unregistered when destroyed or Reset().
class TempFileRegistration {
 public:
  TempFileRegistration() = default;
  explicit TempFileRegistration(const std::string& path);
  TempFileRegistration(const std::string& prefix, const std::string& suffix, uint32_t count);
  ~TempFileRegistration() { Reset(); }
  TempFileRegistration(TempFileRegistration&& other) noexcept : slot_(other.slot_) { other.slot_ = -1; }
  TempFileRegistration& operator=(TempFileRegistration&& other) noexcept;
  TempFileRegistration(const TempFileRegistration&) = delete;
  TempFileRegistration& operator=(const TempFileRegistration&) = delete;

  void Reset();
  bool registered() const { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

// Installs the cleanup handler for SIGINT, SIGTERM and SIGHUP, each only where its action is
// the default one (a signal the parent ignores, e.g. SIGHUP under nohup, stays ignored).
void InstallTempFileCleanup();

// Removes every registered file (what the handler does before dying). Async-signal-safe.
void RemoveRegisteredTempFiles();

// Blocks SIGINT, SIGTERM and SIGHUP on this thread while it lives; one that arrives meanwhile
// is delivered when it ends (after the renames of a commit).
class TerminationSignalsHeld {
 public:
  TerminationSignalsHeld();
  ~TerminationSignalsHeld();
  TerminationSignalsHeld(const TerminationSignalsHeld&) = delete;
  TerminationSignalsHeld& operator=(const TerminationSignalsHeld&) = delete;

 private:
  sigset_t previous_;
};

// An output file written whole or not at all: bytes go to "<path>.tmp" (registered above), which
// Commit() renames onto `path`; destroyed uncommitted, or on Ctrl-C, it is removed. Errors throw
// ScenarioError naming the file and the system's reason.
class AtomicFile {
 public:
  // kFixed: the temporary file is "<path>.tmp". kUnique: "<path>.tmp.<pid>.<n>", created
  // exclusively, so that runs writing the same output at once never write into one file (the
  // last rename wins, whole).
  enum class TempName { kFixed, kUnique };
  explicit AtomicFile(const std::string& path, TempName temp_name = TempName::kFixed);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void Write(std::string_view data);
  void Commit();

 private:
  std::string path_;
  std::string tmp_path_;
  TempFileRegistration registration_;
  std::FILE* file_ = nullptr;
};

// `bytes` as the whole of `path`, through an AtomicFile.
void WriteFileAtomically(const std::string& path, std::string_view bytes,
                         AtomicFile::TempName temp_name = AtomicFile::TempName::kFixed);

}  // namespace petrsim
