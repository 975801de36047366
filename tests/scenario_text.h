// Test helpers: scenarios written inline in text format.
#pragma once

#include <string>

#include "data/dataset.h"
#include "scenario/scenario_loader.h"

namespace petrsim::testing {

inline Scenario ScenarioFromText(const std::string& text) { return LoadScenario(text, "test.pbtxt"); }

inline Scenario ShippedScenario(const std::string& name) {
  return LoadScenarioFile(std::string(PETRSIM_SOURCE_DIR) + "/scenarios/" + name);
}

}  // namespace petrsim::testing
