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

namespace {

// Whether `tail` (what follows MAJOR.MINOR[.PATCH]) is PEP 440's: [{a|b|rc}N][.postN][.devN][+LOCAL].
bool ReleaseTail(std::string_view tail) {
  const auto digits = [&](size_t& at) {
    const size_t from = at;
    while (at < tail.size() && std::isdigit(static_cast<unsigned char>(tail[at]))) ++at;
    return at > from;
  };
  const auto word = [&](size_t& at, std::string_view prefix) {
    if (tail.substr(at, prefix.size()) != prefix) return false;
    size_t end = at + prefix.size();
    if (!digits(end)) return false;
    at = end;
    return true;
  };
  size_t at = 0;
  if (!word(at, "rc")) (void)(word(at, "a") || word(at, "b"));
  (void)word(at, ".post");
  (void)word(at, ".dev");
  if (at == tail.size()) return true;
  if (tail[at] != '+' || at + 1 == tail.size()) return false;
  for (size_t k = at + 1; k < tail.size(); ++k) {
    const char c = tail[k];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

}  // namespace

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
  // What may follow, as PEP 440 spells it: a pre-release ("a0", "b1", "rc1"), ".postN", ".devN",
  // then a local tail ("+cu111", "+git1234"); anything else ("1.10abc") is not a release.
  if (!ReleaseTail(text.substr(at))) return std::nullopt;
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
