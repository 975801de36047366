// Effective values of scenario fields; see scenario_defaults.h.
#include "scenario/scenario_defaults.h"

namespace petrsim {

const std::vector<std::string>& NuScenesClasses() {
  static const std::vector<std::string> classes = {"car",        "truck",       "construction_vehicle", "bus",
                                                   "trailer",    "barrier",     "motorcycle",           "bicycle",
                                                   "pedestrian", "traffic_cone"};
  return classes;
}

std::vector<std::string> EffectiveClasses(const Filters& filters) {
  if (filters.classes().empty()) return NuScenesClasses();
  return {filters.classes().begin(), filters.classes().end()};
}

bool RejectsEmptyFrames(const Scenario& scenario) {
  return scenario.filters().filter_empty_gt() && scenario.resample().policy() != Resample::keep_empty;
}

std::string SubDatasetName(const Scenario& scenario, int index) {
  const auto& subdataset = scenario.dataset().subdatasets(index);
  if (subdataset.has_name() && !subdataset.name().empty()) return subdataset.name();
  return "subdataset" + std::to_string(index);
}

std::string PolicyName(Resample::Policy policy) { return Resample::Policy_Name(policy); }

std::string SamplerKindName(Sampler::Kind kind) { return Sampler::Kind_Name(kind); }

}  // namespace petrsim
