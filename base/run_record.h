// A command's run recorded for re-use, so that running it again on unchanged files costs a few
// stat calls: `petrsim import` keeps its record beside its output (OUT.petrsim-cache), `petrsim
// check` in petrsim's cache directory (CacheDirectory). The record holds what the run read
// (every input file, the directories it listed, and petrsim's own executable), the key it ran
// with (the command line, the working directory, anything else its result depends on), its
// output file if it wrote one, what it printed and its exit code. A later run with the same key
// finds the record valid when every one of those files is unchanged, and then prints the same
// and exits the same without reading anything else.
//
// Unchanged: the same stat identity (size, mtime, ctime, inode, device; any write changes the
// ctime, which no tool sets back), or else the same content hash (a file copied back or touched
// is still unchanged); a directory, the same list of regular files under it. A changed, missing
// or unreadable file, another key, a different petrsim, an output that is missing or not the one
// recorded, or a record that does not parse: the command runs again and rewrites the record.
// Concurrent runs write the output and the record through unique temporary files (the last
// rename wins, whole), and a record is only believed for the output it recorded, so a race costs
// a run, never a wrong result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/input_files.h"

namespace petrsim {

struct RecordedRun {
  std::string printed;  // stdout
  int exit_code = 0;
};

// The recorded run at `record_path`, when it is valid now for `key` (and `output`: "" when the
// command writes no file).
std::optional<RecordedRun> FindRecordedRun(const std::string& record_path, const std::vector<std::string>& key,
                                           const std::string& output);

// Records the run just done: it printed and exited as `run` says, wrote `output` ("" none), after
// reading `inputs` (each as it was when opened) and listing `directories`. Nothing is recorded
// when an input is no longer the file that was read, or `output` no longer the file this process
// wrote (a concurrent run renamed its own onto it). Errors writing the record are ignored (the
// record is an aid).
void StoreRecordedRun(const std::string& record_path, const std::vector<std::string>& key,
                      const std::vector<InputFile>& inputs, const std::vector<std::string>& directories,
                      const std::string& output, const RecordedRun& run);

// The hash of `key` and the working directory a record is keyed by (16 hex digits), for naming a
// record in the cache directory.
std::string RunKeyHash(const std::vector<std::string>& key);

// petrsim's cache directory, created (mode 0700) if missing: $PETRSIM_CACHE_DIR, else
// $XDG_CACHE_HOME/petrsim, else $HOME/.cache/petrsim; "" when PETRSIM_CACHE_DIR is "off" or none
// can be made (then nothing is cached there).
std::string CacheDirectory();

// Where `petrsim import` keeps the record of the import that wrote `output`.
std::string ImportRecordPath(const std::string& output);

}  // namespace petrsim
