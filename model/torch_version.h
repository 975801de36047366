// The PyTorch release a job runs (comm.torch_version): what DDP issues and what the NCCL watchdog
// prints differ release by release (docs/research/ddp_collectives.md, nccl_watchdog_lines.md).
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

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

// The supported releases, for messages: "1.9, 1.10, ..., 2.5".
std::string SupportedTorchVersions();

}  // namespace petrsim
