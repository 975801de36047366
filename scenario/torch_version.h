// The PyTorch release a job runs (comm.torch_version): what DDP issues and what the NCCL watchdog
// prints differ release by release (docs/research/ddp_collectives.md, nccl_watchdog_lines.md).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proto/scenario.pb.h"

namespace petrsim {

struct TorchVersion {
  int major = 1;
  int minor = 9;
  auto operator<=>(const TorchVersion&) const = default;
  std::string ToString() const {
    std::string text = std::to_string(major);
    text += '.';
    text += std::to_string(minor);
    return text;
  }
};

// "1.13", "1.13.1", "1.9.0+cu111", "2.1.0a0+git1234": MAJOR.MINOR, then optionally .PATCH and a
// local/pre-release tail, which are ignored. Nothing when the text is not of that form or the
// release is not supported (1.9 to 1.13, 2.0 to 2.5).
std::optional<TorchVersion> ParseTorchVersion(std::string_view text);

// The release of a validated scenario's comm.torch_version ("1.9" when unset). ValidateScenario
// refuses one that does not parse, so this asserts instead of guessing.
TorchVersion ScenarioTorchVersion(const Scenario& scenario);

// The supported releases, for messages: "1.9, 1.10, ..., 2.5".
std::string SupportedTorchVersions();

// The release a report names for a scenario's comm.torch_version: "PyTorch 1.13" when the scenario sets it, else
// "PyTorch 1.9 assumed (the reference job's); pass --torch-version" (`is_set`: comm.has_torch_version()).
std::string TorchReleaseText(bool is_set, const std::string& version);

// The release a training log's environment block names, within its first 64 KiB (where mmcv's and mmengine's
// `Environment info` and torch.utils.collect_env print it): `PyTorch: 1.13.1+cu117` (mmcv's collect_env; mmengine
// indents it) or `PyTorch version: 1.13.1` (torch's collect_env). The text as printed and its line (from 1).
struct LoggedTorchVersion {
  std::string text;
  uint64_t line = 0;
};
std::optional<LoggedTorchVersion> FindLoggedTorchVersion(std::string_view log_text);

}  // namespace petrsim
