// A small, strict reader of Python pickles of plain data: what PyTorch's Flight Recorder
// writes (protocol 2: dicts, lists, tuples, str, int, float, bool, None) and what other
// importers (mmdet3d info files) reuse. It runs the pickle machine for these opcodes only:
//   PROTO FRAME STOP MARK POP POP_MARK DUP EMPTY_DICT EMPTY_LIST EMPTY_TUPLE TUPLE TUPLE1 TUPLE2
//   TUPLE3 LIST DICT APPEND APPENDS SETITEM SETITEMS PUT BINPUT LONG_BINPUT GET BINGET
//   LONG_BINGET MEMOIZE NONE NEWTRUE NEWFALSE INT BININT BININT1 BININT2 LONG1 BINFLOAT
//   BINUNICODE SHORT_BINUNICODE BINUNICODE8 BINBYTES SHORT_BINBYTES BINSTRING SHORT_BINSTRING
// and rejects every other one (GLOBAL, REDUCE, BUILD, ...: the opcodes that import and call
// code) with an error naming the opcode and its byte offset. Nothing is executed.
//
// Limits against hostile files: every length is checked against the bytes left; integers
// wider than 64 bits are refused; values are nodes of one arena (a memo reference shares the
// node, as Python shares the object, and a cycle costs nothing), at most kPickleNodesMax of
// them, so memory stays below about 130 bytes per byte of input and 2 GiB in all. The machine
// itself never recurses. A reader of the tree must not recurse without a limit either: a list
// may contain itself; the Flight Recorder converter reads a fixed shape and charges every value
// it copies to a budget proportional to the file (flight_recorder.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/error.h"

namespace petrsim {

// Bad input: the message names the file, the byte offset and what was wrong.
class PickleError : public ScenarioError {
 public:
  PickleError(const std::string& message, uint64_t offset)
      : ScenarioError(message), offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

inline constexpr int kPickleDepthMax = 64;  // JSON nesting refused beyond this (flight_recorder.cc)
inline constexpr uint64_t kPickleNodesMax = uint64_t{1} << 24;

struct PickleNode {
  enum class Type { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict };
  Type type = Type::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;                 // kString (UTF-8 as stored), kBytes
  std::vector<PickleNode*> items;   // kList, kTuple
  std::vector<std::pair<PickleNode*, PickleNode*>> entries;  // kDict, in insertion order

  // Dict lookup by string key (the last one wins, as in Python); null when absent or not a dict.
  const PickleNode* Get(std::string_view key) const;
  bool is_sequence() const { return type == Type::kList || type == Type::kTuple; }
  std::string TypeName() const;
};

struct PickleDocument {
  const PickleNode* root = nullptr;
  // Set when the stream ended early or went wrong after some values were built: the error
  // (file, byte offset, what), and `root` is what could be salvaged (pending items of open
  // MARKs are added to the container below them), or null when nothing could.
  std::optional<std::string> partial;
  uint64_t partial_offset = 0;
  std::vector<std::unique_ptr<PickleNode>> arena;
};

// Parses `bytes` (the whole file). `display_name` (the path) starts every error message.
// Throws PickleError when nothing usable was read (not a pickle, an unsupported opcode before
// any value, ...). With `salvage`, an error after the first container was opened returns the
// partial document instead of throwing.
PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name,
                           bool salvage = true);

}  // namespace petrsim
