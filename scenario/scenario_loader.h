// Reads a scenario file in any of its three encodings (text format, binary, JSON mapping),
// detected by content, and validates it. Every failure is a ScenarioError naming the file.
#pragma once

#include <string>
#include <string_view>

#include "proto/scenario.pb.h"

namespace petrsim {

enum class ScenarioEncoding { kText, kBinary, kJson };

// Guesses the encoding from the bytes: binary when they are not printable UTF-8 text (a binary
// scenario may well start with "\n{"), else JSON when the first non-blank byte is '{', else
// text format.
ScenarioEncoding DetectScenarioEncoding(std::string_view bytes);

// Parses without semantic validation. `display_name` is used in error messages (the path).
Scenario ParseScenario(std::string_view bytes, const std::string& display_name);

// Parses and validates (ValidateScenario). Throws ScenarioError.
Scenario LoadScenario(std::string_view bytes, const std::string& display_name);

// Reads the file at `path`, then LoadScenario.
Scenario LoadScenarioFile(const std::string& path);

}  // namespace petrsim
