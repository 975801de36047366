// Helpers of the pickle reader's tests (pickle_test.cc, pickle_torch_test.cc): hand-made pickle
// bytes, the options they parse with, and what a parse says.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>

#include "formats/pickle/pickle.h"

namespace petrsim {

inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file) << path;
  std::ostringstream out;
  out << file.rdbuf();
  return out.str();
}

inline std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// SHORT_BINUNICODE of `text`.
inline std::string Str(const std::string& text) { return Bytes({0x8c, static_cast<int>(text.size())}) + text; }

inline PickleOptions Numpy() {
  PickleOptions options;
  options.numpy = true;
  options.salvage = false;
  return options;
}

// Record mode as the info importer uses it: the records of "infos", five keys kept, the sweeps'
// length only; `skip`: PickleOptions::skip_dropped.
inline PickleOptions Records(bool skip = true) {
  PickleOptions options = Numpy();
  options.record_lists = {"infos"};
  options.record_keys = {"token", "timestamp", "gt_boxes", "gt_names", "num_lidar_pts"};
  options.record_length_keys = {"sweeps"};
  options.skip_dropped = skip;
  return options;
}

// Record mode as a Flight Recorder reader would use it: a few kept keys, the frames' length only.
inline PickleOptions FlightRecorder(bool skip = true) {
  PickleOptions options;
  options.salvage = false;
  options.record_lists = {"entries"};
  options.record_keys = {"record_id", "process_group", "profiling_name", "state", "input_sizes", "duration_ms"};
  options.record_length_keys = {"frames"};
  options.skip_dropped = skip;
  return options;
}

// The error ParsePickle throws for `bytes`, or "" when it does not throw.
inline std::string ErrorOf(const std::string& bytes, const PickleOptions& options, uint64_t* offset = nullptr) {
  try {
    ParsePickle(bytes, "t.pkl", options);
  } catch (const PickleError& error) {
    if (offset != nullptr) *offset = error.offset();
    return error.what();
  }
  return "";
}

inline std::string DtypeName(const PickleNode& node) {
  switch (node.dtype.kind) {
    case 'f':
      return node.dtype.itemsize == 4 ? "float32" : "float64";
    case 'i':
      return "int" + std::to_string(node.dtype.itemsize * 8);
    case 'u':
      return "uint" + std::to_string(node.dtype.itemsize * 8);
    case 'b':
      return "bool";
    case 'U':
      return "str";
    case 'S':
      return "bytes";
    default:
      return "?";
  }
}

// Whether two parsed values are the same value (type, text, integer, numpy shape and dtype, items).
inline bool SameValue(const PickleNode& a, const PickleNode& b) {
  if (a.type != b.type || a.text != b.text || a.integer != b.integer || a.shape != b.shape ||
      a.dtype.kind != b.dtype.kind || a.dtype.itemsize != b.dtype.itemsize || a.items.size() != b.items.size()) {
    return false;
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!SameValue(*a.items[i], *b.items[i])) return false;
  }
  return true;
}

// Whether two parsed trees are the same, everything compared: SameValue, plus booleans, floats (by
// their bits), dict entries in order and `built`. For acyclic trees (the test files).
inline bool SameTree(const PickleNode& a, const PickleNode& b) {
  if (!SameValue(a, b) || a.boolean != b.boolean || a.built != b.built ||
      std::bit_cast<uint64_t>(a.real) != std::bit_cast<uint64_t>(b.real) || a.entries.size() != b.entries.size()) {
    return false;
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (!SameTree(*a.items[i], *b.items[i])) return false;
  }
  for (size_t i = 0; i < a.entries.size(); ++i) {
    if (!SameTree(*a.entries[i].first, *b.entries[i].first) || !SameTree(*a.entries[i].second, *b.entries[i].second)) {
      return false;
    }
  }
  return true;
}

}  // namespace petrsim
