// Where `petrsim import` may write its scenario: never over one of its inputs, and never over a
// file that is not a scenario an import wrote (a typo'd -o must not cost the user a config or an
// info file).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace petrsim {

// Whether the opening bytes of an existing file (its first 64 KiB or less) are those of a
// scenario `petrsim import` wrote: the text form's opening comment, or the binary and JSON forms'
// name "imported..." / "probe_trace" followed by a description "petrsim import ...", in the order
// protobuf writes them. An empty file counts too (nothing to lose; `mktemp` makes them).
bool IsImportOutput(std::string_view opening);

// Throws ScenarioError when writing `output` would lose a file: it is the same file (device and
// inode, so another path to it or a link counts) as one of `inputs`, or it exists and is not an
// import's output (IsImportOutput); a missing output is fine. `inputs` may name missing files.
void CheckImportOutput(const std::string& output, const std::vector<std::string>& inputs);

// The same check against every file this process has read as input so far (InputFilesRead()),
// made again just before writing: a config's _base_ chain and the info files it names are only
// known after reading.
void CheckImportOutputAgainstInputsRead(const std::string& output);

}  // namespace petrsim
