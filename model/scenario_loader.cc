// Scenario decoding with protobuf's own text, binary and JSON parsers.
#include "model/scenario_loader.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "model/error.h"
#include "model/file_io.h"
#include "model/scenario_validation.h"

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

bool IsValidUtf8Text(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      // Control characters other than tab, newline, carriage return and form feed never occur
      // in a text-format file, but they start most binary protobuf encodings (field tags).
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') return false;
      if (c == 0x7f) return false;
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
      return false;
    }
    if (i + length > bytes.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(bytes[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
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
        throw ScenarioError(display_name +
                            ": not a scenario: the content is not text, so it was read as a "
                            "binary petrsim.Scenario protobuf, and that parse failed (" +
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
