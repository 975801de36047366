// petrsim's errors: one base, Error, and two kinds under it.
// - ScenarioError: bad input a user can fix (a scenario, a trace, a dump, an infos file, a command
//   line). Its message names the file, the field path or line:column, what was expected and what
//   was found. Every program exits 2 on it, having written nothing half-way.
// - JobError: the job itself failed in a way petrsim detects while running it for real (a
//   sampler livelock, a collective that failed or timed out, a job another rank stopped). The
//   programs exit 1 on it, as the job would have failed.
// Anything else escaping is a bug of petrsim's.
#pragma once

#include <stdexcept>
#include <string>

namespace petrsim {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

class ScenarioError : public Error {
 public:
  explicit ScenarioError(const std::string& message) : Error(message) {}
};

class JobError : public Error {
 public:
  explicit JobError(const std::string& message) : Error(message) {}
};

}  // namespace petrsim
