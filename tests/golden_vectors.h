// Loads tests/golden/rng_golden.json: vectors produced by scripts/gen_rng_golden.py with the
// real torch and numpy (Debian python3-torch 1.13, python3-numpy 1.24).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace petrsim::testing {

inline const nlohmann::json& RngGolden() {
  static const nlohmann::json golden = [] {
    std::ifstream file(std::string(PETRSIM_SOURCE_DIR) + "/tests/golden/rng_golden.json");
    return nlohmann::json::parse(file);
  }();
  return golden;
}

}  // namespace petrsim::testing
