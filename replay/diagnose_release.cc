// `diagnose --scenario`: the PyTorch release the recordings name against the scenario's; see diagnose.h.
#include <fmt/format.h>

#include "replay/diagnose.h"
#include "scenario/torch_version.h"

namespace petrsim {

std::vector<std::string> ReconcileRelease(const Diagnosis& diagnosis, Scenario& scenario, bool release_given) {
  // What the recordings say, the most exact first: a log's environment block, a probe trace's header or a dump's
  // version fields, then the one release a log's watchdog-line format fits.
  std::string said, from;
  if (diagnosis.log && !diagnosis.log->torch_version.empty()) {
    said = diagnosis.log->torch_version;
    from = diagnosis.log->torch_version_from;
  } else if (!diagnosis.torch_version.empty()) {
    said = diagnosis.torch_version;
    from = diagnosis.torch_version_from;
  } else if (diagnosis.log && ParseTorchVersion(diagnosis.log->torch_release)) {
    said = diagnosis.log->torch_release;
    from = "the format of its watchdog lines";
  }
  Comm& comm = *scenario.mutable_comm();
  const std::string scenario_text =
      comm.has_torch_version()
          ? fmt::format("the scenario's comm.torch_version {}", comm.torch_version())
          : fmt::format("the scenario sets none ({} assumed, the reference job's)", comm.torch_version());
  if (said.empty()) {
    // A Flight Recorder format several releases write: said beside the scenario's release, which stays.
    const std::string range = diagnosis.torch_version_from.empty()
                                  ? std::string("the recordings name none")
                                  : fmt::format("the recordings say {}", diagnosis.torch_version_from);
    return {fmt::format("release: {} ({}{})", TorchReleaseText(comm.has_torch_version(), comm.torch_version()), range,
                        comm.has_torch_version() ? "" : "; give --torch-version")};
  }
  const auto artifact = ParseTorchVersion(said);
  const auto current = ParseTorchVersion(comm.torch_version());
  if (!artifact) {
    return {fmt::format(
        "release: the recordings say PyTorch {} ({}), which petrsim does not model ({}): the "
        "scenario's is kept, {}",
        said, from, SupportedTorchVersions(), TorchReleaseText(comm.has_torch_version(), comm.torch_version()))};
  }
  if (current && *current == *artifact) {
    const std::string line =
        fmt::format("release: PyTorch {} ({}; {})", artifact->ToString(), from,
                    comm.has_torch_version() ? "the scenario's too" : "the scenario sets none: 1.9 assumed, the same");
    if (!comm.has_torch_version()) comm.set_torch_version(artifact->ToString());
    return {line};
  }
  if (release_given) {
    return {fmt::format("release: the recordings say PyTorch {} ({}), --torch-version/--set says {}: {} is used", said,
                        from, comm.torch_version(), comm.torch_version())};
  }
  const std::string line = fmt::format("release: the recordings say PyTorch {} ({}), {}: PyTorch {} is used", said,
                                       from, scenario_text, artifact->ToString());
  comm.set_torch_version(artifact->ToString());
  return {line};
}

}  // namespace petrsim
