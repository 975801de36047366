// Scenario decoding with protobuf's own text, binary and JSON parsers.
#include "scenario/scenario_loader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"
#include "scenario/scenario_validation.h"

namespace petrsim {
namespace {

// Collects the text parser's errors with 1-based line:column positions.
class TextErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit TextErrorCollector(const std::string& file) : file_(file) {}
  void AddError(int line, int column, const std::string& message) override { Add(line, column, message); }
  void AddWarning(int line, int column, const std::string& message) override {
    // Warnings (e.g. deprecated syntax) do not stop the parse; we keep them out of errors.
    (void)line;
    (void)column;
    (void)message;
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  void Add(int line, int column, const std::string& message) {
    std::ostringstream out;
    // protobuf reports 0-based positions; -1 when unknown.
    out << file_ << ":" << (line + 1) << ":" << (column + 1) << ": " << message;
    // protobuf names the token it found; at the end of the file that token is empty.
    if (message.size() >= 5 && message.compare(message.size() - 5, 5, "got: ") == 0) {
      out << "end of file";
    }
    errors_.push_back(out.str());
  }
  std::string file_;
  std::vector<std::string> errors_;
};

// The offset of the first byte that cannot be in a text scenario (not UTF-8, or a control
// character), or bytes.size() when there is none.
size_t FirstNonTextByte(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      // Control characters other than tab, newline, carriage return and form feed never occur
      // in a text-format file, but they start most binary protobuf encodings (field tags).
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') return i;
      if (c == 0x7f) return i;
      ++i;
      continue;
    }
    size_t length = 0;
    if ((c & 0xE0) == 0xC0) {
      length = 2;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
    } else {
      return i;
    }
    if (i + length > bytes.size()) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(bytes[i + k]) & 0xC0) != 0x80) return i;
    }
    i += length;
  }
  return bytes.size();
}

bool IsValidUtf8Text(std::string_view bytes) { return FirstNonTextByte(bytes) == bytes.size(); }

// "line L, column C (byte B): 0xE9, not UTF-8 (a Latin-1 or other 8-bit character?)": where the
// first byte that stops `bytes` from being text is, and what it is.
std::string DescribeNonTextByte(std::string_view bytes, size_t at) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < at; ++i) {
    if (bytes[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const auto c = static_cast<unsigned char>(bytes[at]);
  std::ostringstream out;
  out << "line " << line << ", column " << (at - line_start + 1) << " (byte " << at << ") has 0x" << std::hex
      << static_cast<int>(c) << std::dec;
  if (c == 0) {
    out << ", a NUL byte";
  } else if (c < 0x20 || c == 0x7f) {
    out << ", a control character";
  } else {
    out << ", which does not start a valid UTF-8 character there (a Latin-1 or other 8-bit character?)";
  }
  return out.str();
}

std::string Describe(std::string_view bytes) {
  std::ostringstream out;
  const size_t shown = std::min<size_t>(bytes.size(), 8);
  out << bytes.size() << " bytes starting";
  for (size_t i = 0; i < shown; ++i) {
    out << " " << std::hex << static_cast<int>(static_cast<unsigned char>(bytes[i]));
  }
  return out.str();
}

}  // namespace

ScenarioEncoding DetectScenarioEncoding(std::string_view bytes) {
  // Text first: a binary scenario may start with "\n{" (field 1 tag, a 123-byte name).
  if (!IsValidUtf8Text(bytes)) return ScenarioEncoding::kBinary;
  for (const char c : bytes) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (c == '{') return ScenarioEncoding::kJson;
    break;
  }
  return ScenarioEncoding::kText;
}

Scenario ParseScenario(std::string_view bytes, const std::string& display_name) {
  Scenario scenario;
  switch (DetectScenarioEncoding(bytes)) {
    case ScenarioEncoding::kJson: {
      google::protobuf::util::JsonParseOptions options;
      options.ignore_unknown_fields = false;
      const auto status = google::protobuf::util::JsonStringToMessage(std::string(bytes), &scenario, options);
      if (!status.ok()) {
        throw ScenarioError(display_name +
                            ": invalid scenario in the protobuf JSON mapping: " + std::string(status.message()));
      }
      return scenario;
    }
    case ScenarioEncoding::kText: {
      TextErrorCollector collector(display_name);
      google::protobuf::TextFormat::Parser parser;
      parser.RecordErrorsTo(&collector);
      google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
      if (!parser.Parse(&input, &scenario)) {
        std::string message;
        for (const auto& error : collector.errors()) {
          if (!message.empty()) message += "\n";
          message += error;
        }
        if (message.empty()) message = display_name + ": invalid scenario in text format";
        throw ScenarioError(message);
      }
      return scenario;
    }
    case ScenarioEncoding::kBinary: {
      if (!scenario.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
        // Often a text scenario with one bad byte (saved as Latin-1, a stray NUL): say where.
        throw ScenarioError(display_name + ": not a scenario: as text, " +
                            DescribeNonTextByte(bytes, FirstNonTextByte(bytes)) +
                            " (a text scenario is UTF-8 without control characters); read as a binary "
                            "petrsim.Scenario protobuf instead, it does not parse either (" +
                            Describe(bytes) + ")");
      }
      if (!scenario.unknown_fields().empty()) {
        throw ScenarioError(display_name +
                            ": binary scenario has fields petrsim.Scenario does not define "
                            "(written by a newer petrsim, or not a scenario)");
      }
      return scenario;
    }
  }
  throw ScenarioError(display_name + ": unknown encoding");
}

Scenario LoadScenario(std::string_view bytes, const std::string& display_name) {
  Scenario scenario = ParseScenario(bytes, display_name);
  ValidateScenario(scenario, display_name);
  return scenario;
}

Scenario LoadScenarioFile(const std::string& path) {
  // 1 GiB: protobuf parses no message of 2 GiB or more, and a trainval import is about 120 MB.
  return LoadScenario(ReadRegularFile(path, "scenario file", uint64_t{1} << 30), path);
}

}  // namespace petrsim
