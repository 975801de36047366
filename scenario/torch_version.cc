// PyTorch releases; see torch_version.h.
#include "scenario/torch_version.h"

#include <cctype>

#include "base/assert.h"

namespace petrsim {
namespace {

constexpr TorchVersion kOldest{1, 9}, kLast1x{1, 13}, kNewest{2, 5};

bool Supported(TorchVersion v) { return (v >= kOldest && v <= kLast1x) || (v >= TorchVersion{2, 0} && v <= kNewest); }

// Reads a decimal number of at most 3 digits at `at`; nothing when there is none.
std::optional<int> Number(std::string_view text, size_t& at) {
  const size_t start = at;
  int value = 0;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) && at - start < 3) {
    value = value * 10 + (text[at] - '0');
    ++at;
  }
  if (at == start || (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])))) return std::nullopt;
  return value;
}

}  // namespace

TorchVersion ScenarioTorchVersion(const Scenario& scenario) {
  const std::optional<TorchVersion> version = ParseTorchVersion(scenario.comm().torch_version());
  PETRSIM_ASSERT(version.has_value());
  return *version;
}

std::optional<TorchVersion> ParseTorchVersion(std::string_view text) {
  size_t at = 0;
  const auto major = Number(text, at);
  if (!major || at >= text.size() || text[at] != '.') return std::nullopt;
  ++at;
  const auto minor = Number(text, at);
  if (!minor) return std::nullopt;
  if (at < text.size() && text[at] == '.') {
    ++at;
    if (!Number(text, at)) return std::nullopt;
  }
  // What may follow: a pre-release or local tail ("a0", "rc1", "+cu111", "+git1234").
  if (at < text.size() && text[at] != '+' && !std::isalpha(static_cast<unsigned char>(text[at]))) return std::nullopt;
  const TorchVersion version{*major, *minor};
  if (!Supported(version)) return std::nullopt;
  return version;
}

std::string SupportedTorchVersions() {
  std::string out;
  for (TorchVersion v = kOldest; v <= kNewest;
       v = v.minor == kLast1x.minor && v.major == 1 ? TorchVersion{2, 0} : TorchVersion{v.major, v.minor + 1}) {
    if (!out.empty()) out += ", ";
    out += v.ToString();
  }
  return out;
}

std::string TorchReleaseText(bool is_set, const std::string& version) {
  if (is_set) return "PyTorch " + version;
  return "PyTorch " + version + " assumed (the reference job's); pass --torch-version";
}

std::optional<LoggedTorchVersion> FindLoggedTorchVersion(std::string_view text) {
  text = text.substr(0, size_t{1} << 16);
  uint64_t number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    ++number;
    start = end + 1;
    for (const std::string_view key : {std::string_view("PyTorch: "), std::string_view("PyTorch version: ")}) {
      const size_t at = line.find(key);
      if (at == std::string_view::npos) continue;
      std::string_view value = line.substr(at + key.size());
      value = value.substr(0, value.find_first_of(" \t\r"));
      if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0]))) continue;
      return LoggedTorchVersion{std::string(value), number};
    }
  }
  return std::nullopt;
}

}  // namespace petrsim
