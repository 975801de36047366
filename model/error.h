// The operating error of petrsim: bad input a user can fix. Its message names the file, the
// field path or line:column, what was expected and what was found.
#pragma once

#include <stdexcept>
#include <string>

namespace petrsim {

class ScenarioError : public std::runtime_error {
 public:
  explicit ScenarioError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace petrsim
