// Streaming one nuScenes table (a JSON array of flat records, e.g. sample_data.json) one record at
// a time, keeping only the wanted keys: internal to the nuScenes importer (nuscenes_tables.h).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"

namespace petrsim::nuscenes_internal {

// One field of a record: its JSON kind and value; an array keeps its numbers (flattened).
struct Field {
  enum class Kind { kAbsent, kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kAbsent;
  bool boolean = false;
  double number = 0;
  bool integral = false;
  int64_t integer = 0;
  std::string text;
  std::vector<double> numbers;
  size_t non_numbers = 0;  // array items that are not numbers

  static const char* KindName(Kind kind) {
    switch (kind) {
      case Kind::kAbsent:
        return "nothing (no such key)";
      case Kind::kNull:
        return "null";
      case Kind::kBool:
        return "a boolean";
      case Kind::kNumber:
        return "a number";
      case Kind::kString:
        return "a string";
      case Kind::kArray:
        return "an array";
      case Kind::kObject:
        return "an object";
    }
    return "?";
  }
};

// A table's records, one at a time: the wanted keys' fields (by index in `keys`).
class Table {
 public:
  using OnRecord = std::function<void(const Table&, uint64_t index)>;

  Table(std::string path, std::vector<std::string> keys) : path_(std::move(path)), keys_(std::move(keys)) {
    fields_.resize(keys_.size());
  }

  // Streams the file, calling `on_record` after each record (and `on_bytes`, when not empty,
  // with the size of each chunk read: a progress bar).
  void Read(const OnRecord& on_record) { Read({}, on_record); }
  void Read(const std::function<void(uint64_t bytes)>& on_bytes, const OnRecord& on_record);

  const std::string& path() const { return path_; }
  // The record's token (for messages) when "token" is a wanted key.
  std::string Where(uint64_t index) const {
    for (size_t k = 0; k < keys_.size(); ++k) {
      if (keys_[k] == "token" && fields_[k].kind == Field::Kind::kString) {
        return fmt::format("record {} (token {})", index, fields_[k].text);
      }
    }
    return fmt::format("record {}", index);
  }
  [[noreturn]] void Fail(uint64_t index, size_t key, const std::string& what) const {
    throw ScenarioError(fmt::format("{}: {}: '{}': {}", path_, Where(index), keys_[key], what));
  }
  const Field& Need(uint64_t index, size_t key, Field::Kind kind) const {
    const Field& field = fields_[key];
    if (field.kind != kind) {
      Fail(index, key, fmt::format("expected {}, found {}", Field::KindName(kind), Field::KindName(field.kind)));
    }
    return field;
  }
  const std::string& String(uint64_t index, size_t key) const { return Need(index, key, Field::Kind::kString).text; }
  int64_t Integer(uint64_t index, size_t key) const {
    const Field& field = Need(index, key, Field::Kind::kNumber);
    if (!field.integral) Fail(index, key, fmt::format("expected an integer, found {}", field.number));
    return field.integer;
  }
  bool Bool(uint64_t index, size_t key) const { return Need(index, key, Field::Kind::kBool).boolean; }
  // An array of exactly n finite numbers.
  const std::vector<double>& Numbers(uint64_t index, size_t key, size_t n) const {
    const Field& field = Need(index, key, Field::Kind::kArray);
    if (field.numbers.size() != n || field.non_numbers != 0) {
      Fail(index, key,
           fmt::format("expected {} numbers, found {} number(s){}", n, field.numbers.size(),
                       field.non_numbers ? fmt::format(" and {} other item(s)", field.non_numbers) : ""));
    }
    for (const double v : field.numbers) {
      if (!std::isfinite(v)) Fail(index, key, "expected finite numbers");
    }
    return field.numbers;
  }

 private:
  friend class TableSax;
  std::string path_;
  std::vector<std::string> keys_;
  std::vector<Field> fields_;
};

}  // namespace petrsim::nuscenes_internal
