// Streaming a nuScenes table (nuscenes_table_stream.h): the file in chunks through nlohmann's
// SAX parser, each record's wanted fields kept in the Table.
#include "importers/nuscenes_table_stream.h"
#include "base/chunked_chars.h"
#include "base/input_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

namespace petrsim::nuscenes_internal {
namespace {

// The file in 1 MiB chunks (ChunkedChars' source), each counted by `on_bytes`.
class FileChunks {
 public:
  FileChunks(std::FILE* file, const std::function<void(uint64_t)>& on_bytes)
      : file_(file), buffer_(1 << 20), on_bytes_(on_bytes) {}
  std::string_view Next() {
    const size_t size = std::fread(buffer_.data(), 1, buffer_.size(), file_);
    if (size == 0 && std::ferror(file_)) failed_ = true;
    if (size > 0 && on_bytes_) on_bytes_(size);
    return {buffer_.data(), size};
  }
  bool failed() const { return failed_; }

 private:
  std::FILE* file_;
  std::vector<char> buffer_;
  const std::function<void(uint64_t)>& on_bytes_;
  bool failed_ = false;
};

}  // namespace

class TableSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  TableSax(Table& table, const Table::OnRecord& on_record) : table_(table), on_record_(on_record) {}

  bool null() override {
    return Scalar([](Field& f) { f.kind = Field::Kind::kNull; });
  }
  bool boolean(bool value) override {
    return Scalar([value](Field& f) {
      f.kind = Field::Kind::kBool;
      f.boolean = value;
    });
  }
  bool number_integer(number_integer_t value) override { return Number(static_cast<double>(value), true, value); }
  bool number_unsigned(number_unsigned_t value) override {
    const bool fits = value <= static_cast<uint64_t>(INT64_MAX);
    return Number(static_cast<double>(value), fits, fits ? static_cast<int64_t>(value) : 0);
  }
  bool number_float(number_float_t value, const string_t&) override { return Number(value, false, 0); }
  bool string(string_t& value) override {
    return Scalar([&value](Field& f) {
      f.kind = Field::Kind::kString;
      f.text = std::move(value);
    });
  }
  bool binary(binary_t&) override {
    return Scalar([](Field& f) { f.kind = Field::Kind::kObject; });
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0) return Structure("the top level is an object; expected an array of records");
    if (depth_ == 1) {
      for (auto& field : table_.fields_) field = Field{};
      current_ = -1;
    } else if (depth_ == 2 && current_ >= 0) {
      table_.fields_[current_].kind = Field::Kind::kObject;
    }
    ++depth_;
    return true;
  }
  bool key(string_t& key) override {
    if (depth_ != 2) return true;
    current_ = -1;
    for (size_t k = 0; k < table_.keys_.size(); ++k) {
      if (table_.keys_[k] == key) current_ = static_cast<int>(k);
    }
    return true;
  }
  bool end_object() override {
    --depth_;
    if (depth_ == 1) on_record_(table_, records_++);
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 1) return Structure("a record is an array; expected an object");
    if (depth_ == 2 && current_ >= 0) {
      Field& field = table_.fields_[current_];
      field = Field{};
      field.kind = Field::Kind::kArray;
    }
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line 1, ...".
    const size_t colon = what.find("parse error");
    if (colon != std::string::npos) what = what.substr(colon);
    error_ = fmt::format("{}: invalid JSON at byte {} (near '{}'): {}", table_.path_, position,
                         last_token.substr(0, 40), what);
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  template <typename Set>
  bool Scalar(Set set) {
    if (depth_ == 0) return Structure("the top level is not an array of records");
    if (depth_ == 1) return Structure("a record is not an object");
    if (current_ < 0) return true;
    Field& field = table_.fields_[current_];
    if (depth_ == 2) {
      set(field);
    } else if (field.kind == Field::Kind::kArray) {
      ++field.non_numbers;
    }
    return true;
  }
  bool Number(double value, bool integral, int64_t integer) {
    if (depth_ >= 3 && current_ >= 0 && table_.fields_[current_].kind == Field::Kind::kArray) {
      table_.fields_[current_].numbers.push_back(value);
      return true;
    }
    return Scalar([&](Field& f) {
      f.kind = Field::Kind::kNumber;
      f.number = value;
      f.integral = integral;
      f.integer = integer;
    });
  }
  bool Structure(const std::string& what) {
    error_ = fmt::format("{}: {} (after {} records)", table_.path_, what, records_);
    return false;
  }

  Table& table_;
  const Table::OnRecord& on_record_;
  int depth_ = 0;
  int current_ = -1;
  uint64_t records_ = 0;
  std::string error_;
};

void Table::Read(const std::function<void(uint64_t bytes)>& on_bytes, const OnRecord& on_record) {
  std::FILE* file = std::fopen(path_.c_str(), "rb");
  if (file == nullptr) {
    throw ScenarioError(fmt::format("{}: cannot open nuScenes table: {}", path_, std::strerror(errno)));
  }
  struct Closer {
    std::FILE* file;
    ~Closer() { std::fclose(file); }
  } closer{file};
  NoteInputFile(path_, ::fileno(file));
  FileChunks chunks(file, on_bytes);
  ChunkedChars<FileChunks> chars(chunks);
  TableSax sax(*this, on_record);
  const bool ok = nlohmann::json::sax_parse(chars.begin(), chars.end(), &sax);
  if (chunks.failed()) throw ScenarioError(fmt::format("{}: read error: {}", path_, std::strerror(errno)));
  if (!ok || !sax.error().empty()) {
    throw ScenarioError(sax.error().empty() ? path_ + ": invalid JSON" : sax.error());
  }
}

}  // namespace petrsim::nuscenes_internal
