// The output checks of `petrsim import` (import_output.h).
#include "importers/import_output.h"

#include <fmt/format.h>

#include <cstdint>
#include <fstream>

#include "base/error.h"
#include "base/input_files.h"
#include "base/utf8.h"

namespace petrsim {
namespace {

constexpr size_t kOpeningBytes = 64 * 1024;

bool StartsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// A length-delimited field `tag` at `at` of a binary message: its value, or null when the bytes there are not one.
std::optional<std::string_view> LengthDelimited(std::string_view bytes, size_t& at, uint8_t tag) {
  if (at >= bytes.size() || static_cast<uint8_t>(bytes[at]) != tag) return std::nullopt;
  ++at;
  uint64_t length = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (at >= bytes.size()) return std::nullopt;
    const auto byte = static_cast<uint8_t>(bytes[at++]);
    length |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) {
      if (length > bytes.size() - at) return std::nullopt;
      const std::string_view value = bytes.substr(at, length);
      at += length;
      return value;
    }
  }
  return std::nullopt;
}

bool SameFile(const FileIdentity& a, const FileIdentity& b) { return a.device == b.device && a.inode == b.inode; }

[[noreturn]] void RefuseInput(const std::string& output, const std::string& input) {
  throw ScenarioError(
      fmt::format("-o {}: is the input {}: the import would overwrite what it reads; write the "
                  "scenario elsewhere (e.g. -o scenario.pb)",
                  EscapedBytes(output), EscapedBytes(input)));
}

}  // namespace

bool IsImportOutput(std::string_view opening) {
  if (opening.empty()) return true;
  if (StartsWith(opening, "# A petrsim scenario written by `petrsim import"))
    return true;  // `petrsim import` or `... probe-trace`
  // Binary: field 1 (name) then field 2 (description), protobuf's order of fields by number.
  size_t at = 0;
  if (const auto name = LengthDelimited(opening, at, 0x0a);
      name && (StartsWith(*name, "imported") || *name == "probe_trace")) {
    const auto description = LengthDelimited(opening, at, 0x12);
    if (description && StartsWith(*description, "petrsim import")) return true;
  }
  // JSON (MessageToJsonString with whitespace): {"name": "...", "description": "petrsim import ...
  return StartsWith(opening, "{") && opening.find("\n \"description\": \"petrsim import") != std::string_view::npos &&
         (opening.find("\n \"name\": \"imported") != std::string_view::npos ||
          opening.find("\n \"name\": \"probe_trace\"") != std::string_view::npos);
}

void CheckImportOutput(const std::string& output, const std::vector<std::string>& inputs) {
  const std::optional<FileIdentity> existing = IdentifyFile(output);
  if (!existing) return;  // missing (or not a regular file: the write says why)
  for (const std::string& input : inputs) {
    const std::optional<FileIdentity> identity = IdentifyFile(input);
    if (identity && SameFile(*identity, *existing)) RefuseInput(output, input);
  }
  std::string opening(kOpeningBytes, '\0');
  std::ifstream in(output, std::ios::binary);
  in.read(opening.data(), static_cast<std::streamsize>(opening.size()));
  opening.resize(static_cast<size_t>(in.gcount()));
  if (!IsImportOutput(opening)) {
    throw ScenarioError(fmt::format(
        "-o {}: exists and is not a scenario petrsim import wrote (its text opens with \"# A petrsim scenario "
        "written by `petrsim import`\"; a .pb or .json holds the description \"petrsim import ...\"): refusing to "
        "overwrite it; remove it first or write elsewhere",
        EscapedBytes(output)));
  }
}

void CheckImportOutputAgainstInputsRead(const std::string& output) {
  const std::optional<FileIdentity> existing = IdentifyFile(output);
  if (!existing) return;
  for (const InputFile& input : InputFilesRead()) {
    if (SameFile(input.identity, *existing)) RefuseInput(output, input.path);
  }
}

}  // namespace petrsim
