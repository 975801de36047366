// The command line's words that name petrsim's commands: the nearest command to a mistyped one
// (`petrsim chek S` -> "did you mean 'check'?") and the command a `help` path names
// (`petrsim help import mmdet3d-config`).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace petrsim {

// The optimal string alignment distance (insertions, deletions, substitutions, transpositions of two
// adjacent characters), capped: any distance above `cap` is returned as cap + 1.
int EditDistance(std::string_view a, std::string_view b, int cap);

// The command among `names` nearest to `word` when it is a likely typo of it: at most 2 edits, and
// fewer than half of the word's length; nullopt otherwise (or when `word` is itself a name).
std::optional<std::string> NearestCommand(std::string_view word, std::span<const std::string> names);

// The subcommand `path` names below `app` ({"import", "mmdet3d-config"}), nullptr when a word names
// none.
const CLI::App* FindCommand(const CLI::App& app, std::span<const std::string> path);

}  // namespace petrsim
