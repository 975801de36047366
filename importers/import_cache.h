// `petrsim import` cached beside its output: OUT + ".petrsim-cache" records what the import of
// OUT read (every input file, the directories it listed, and petrsim's own executable), the
// command line and working directory it ran with, OUT as it was written, and the summary it
// printed. A later import with the same command line finds the record valid when every one of
// those files is unchanged, and then prints the summary again without reading anything else.
//
// Unchanged: the same stat identity (size, mtime, ctime, inode, device; any write changes the
// ctime, which no tool sets back), or else the same content hash (a file copied back or touched
// is still unchanged); a directory, the same list of regular files under it. A changed, missing
// or unreadable file, another command line, a different petrsim, an OUT that is missing or not
// the one recorded, or a record that does not parse: the import runs again and rewrites the
// record. Concurrent imports of one OUT write it and the record through unique temporary files
// (the last rename wins, whole), and a record is only believed for the OUT it recorded, so a
// race costs an import, never a wrong scenario.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/input_files.h"

namespace petrsim {

// Where the record of an import that wrote `output` lives.
std::string ImportCachePath(const std::string& output);

// The summary the recorded import printed, when the record is valid for `command_line` now.
std::optional<std::string> FindCachedImport(const std::string& output, const std::vector<std::string>& command_line);

// Records the import just done: it wrote `output` and printed `summary`, after reading `inputs`
// (each as it was when opened) and listing `directories`. Nothing is recorded when an input is no
// longer the file that was read, or `output` no longer the file this process wrote (a concurrent
// import renamed its own onto it). Errors writing the record are ignored (the cache is an aid).
void StoreCachedImport(const std::string& output, const std::vector<std::string>& command_line,
                       const std::vector<InputFile>& inputs, const std::vector<std::string>& directories,
                       const std::string& summary);

}  // namespace petrsim
