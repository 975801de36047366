// libFuzzer target: arbitrary bytes as a scenario file (text, binary or JSON: the loader detects
// which) and, after a line "#--set", one `--set field=value` override per line, then the
// validation `petrsim` runs after --set. Any input must end in a scenario or a ScenarioError: no
// crash, no hang, no unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> sets;
  constexpr std::string_view kMarker = "\n#--set\n";
  if (const size_t at = bytes.find(kMarker); at != std::string_view::npos) {
    std::string_view rest = bytes.substr(at + kMarker.size());
    bytes = bytes.substr(0, at + 1);
    while (!rest.empty() && sets.size() < 16) {
      const size_t end = rest.find('\n');
      sets.emplace_back(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    }
  }
  try {
    petrsim::Scenario scenario = petrsim::LoadScenario(bytes, "fuzz");
    if (!sets.empty()) {
      petrsim::ApplyOverrides(scenario, sets);
      petrsim::ValidateScenario(scenario, "fuzz (after --set)");
    }
  } catch (const petrsim::ScenarioError&) {
  }
  return 0;
}
