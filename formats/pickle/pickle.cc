// The strict pickle reader (plain data, and numpy arrays when asked); see pickle.h.
#include "formats/pickle/pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "model/assert.h"

namespace petrsim {

const PickleNode* PickleNode::Get(std::string_view key) const {
  if (type != Type::kDict) return nullptr;
  const PickleNode* found = nullptr;
  for (const auto& [k, v] : entries) {
    if (k->type == Type::kString && k->text == key) found = v;
  }
  return found;
}

std::string PickleNode::TypeName() const {
  switch (type) {
    case Type::kNone:
      return "None";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "str";
    case Type::kBytes:
      return "bytes";
    case Type::kList:
      return "list";
    case Type::kTuple:
      return "tuple";
    case Type::kDict:
      return "dict";
    case Type::kNumpyArray:
      return "numpy.ndarray";
    case Type::kNumpyScalar:
      return "numpy scalar";
    case Type::kNumpyDtype:
      return "numpy.dtype";
    case Type::kGlobal:
      return "global " + text;
    case Type::kDropped:
      return "dropped value";
  }
  return "?";
}

std::string NumpyDtype::Name() const {
  switch (kind) {
    case 'b':
      return "|b1";
    case 'O':
      return "|O";
    case 'S':
      return fmt::format("|S{}", itemsize);
    case 'U':
      return fmt::format("<U{}", itemsize / 4);
    case 'i':
    case 'u':
    case 'f':
      return itemsize == 1 ? fmt::format("|{}1", kind) : fmt::format("<{}{}", kind, itemsize);
    default:
      return "(no dtype)";
  }
}

namespace {

// Names of the opcodes petrsim refuses, for the error message.
const char* UnsupportedName(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 'F':
      return "FLOAT";
    case 'L':
      return "LONG";
    case 0x8b:
      return "LONG4";
    case 'S':
      return "STRING";
    case 'V':
      return "UNICODE";
    case 0x8e:
      return "BINBYTES8";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    default:
      return nullptr;
  }
}

// The globals PickleOptions::numpy accepts, each interpreted by petrsim (never imported).
enum Global : int64_t {
  kReconstruct = 1,  // numpy.core.multiarray._reconstruct(ndarray, shape, b'b')
  kNdarray,          // numpy.ndarray, only as _reconstruct's first argument
  kDtypeGlobal,      // numpy.dtype('f8', False, True), then BUILD with its state
  kScalar,           // numpy.core.multiarray.scalar(dtype, bytes)
  kFromBuffer,       // numpy.core.numeric._frombuffer(buffer, dtype, shape, order)
  kCodecsEncode,     // _codecs.encode(str, 'latin1'): protocol 2's bytes
  kBytesGlobal,      // bytes(): protocol 2's empty bytes
};

struct AllowedGlobal {
  std::string_view module, name;
  Global global;
};
constexpr std::array<AllowedGlobal, 11> kAllowedGlobals = {{
    {"numpy.core.multiarray", "_reconstruct", kReconstruct},
    {"numpy._core.multiarray", "_reconstruct", kReconstruct},
    {"numpy", "ndarray", kNdarray},
    {"numpy", "dtype", kDtypeGlobal},
    {"numpy.core.multiarray", "scalar", kScalar},
    {"numpy._core.multiarray", "scalar", kScalar},
    {"numpy.core.numeric", "_frombuffer", kFromBuffer},
    {"numpy._core.numeric", "_frombuffer", kFromBuffer},
    {"_codecs", "encode", kCodecsEncode},
    {"__builtin__", "bytes", kBytesGlobal},
    {"builtins", "bytes", kBytesGlobal},
}};
constexpr const char* kAllowedList =
    "numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype, "
    "numpy.core.multiarray.scalar, numpy.core.numeric._frombuffer (or numpy._core.*), "
    "_codecs.encode(str, 'latin1') and bytes()";

// A name from the file, safe to print: printable ASCII, at most 80 characters.
std::string Printable(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 80)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  if (text.size() > 80) out += "...";
  return out;
}

// A set of memo indices. Python's are dense (0, 1, 2, ...), so a bit per index up to the largest;
// a hand-made file's far indices (a memo entry costs at least a byte) go to a hash set.
class IndexSet {
 public:
  explicit IndexSet(uint64_t dense_max) : dense_max_(dense_max) {}
  // Adds `index`; true when it was not there.
  bool Insert(uint64_t index) {
    if (index <= dense_max_) {
      if (index >= small_.size()) {
        small_.resize(std::max<uint64_t>(index + 1, small_.size() * 2), false);
      }
      if (small_[index]) return false;
      small_[index] = true;
      return true;
    }
    return large_.insert(index).second;
  }
  bool Contains(uint64_t index) const {
    if (index < small_.size()) return small_[index];
    return large_.count(index) != 0;
  }

 private:
  uint64_t dense_max_;
  std::vector<bool> small_;
  std::unordered_set<uint64_t> large_;
};

// Which memo indices the pickle ever reads back (GET, BINGET, LONG_BINGET), found by a first
// pass over the opcodes; record mode stores only those. `complete` is false when the scan met
// an opcode it cannot size: then every memoized value must be kept.
class MemoFetches {
 public:
  explicit MemoFetches(std::string_view bytes) : fetched_(bytes.size()) { Scan(bytes); }
  bool Fetched(uint64_t index) const { return !complete_ || fetched_.Contains(index); }

 private:
  void Add(uint64_t index) { fetched_.Insert(index); }
  void Scan(std::string_view bytes) {
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    const uint64_t size = bytes.size();
    uint64_t pos = 0;
    auto left = [&] { return size - pos; };
    auto little = [&](int n) {
      uint64_t value = 0;
      for (int i = 0; i < n; ++i) value |= uint64_t{data[pos + i]} << (8 * i);
      return value;
    };
    // Skips a newline-terminated argument; false at the end of the data.
    auto skip_line = [&]() -> bool {
      const void* end = std::memchr(data + pos, '\n', left());
      if (end == nullptr) return false;
      pos = static_cast<const uint8_t*>(end) - data + 1;
      return true;
    };
    while (pos < size) {
      const uint8_t op = data[pos++];
      uint64_t fixed = 0;    // argument bytes
      int length_bytes = 0;  // a length prefix of this many bytes, then that many bytes
      switch (op) {
        case '.':
          return;  // STOP: the second pass ends here too
        case '(':
        case '0':
        case '1':
        case '2':
        case '}':
        case ')':
        case ']':
        case 't':
        case 'l':
        case 'd':
        case 'a':
        case 'e':
        case 's':
        case 'u':
        case 'N':
        case 0x88:
        case 0x89:
        case 0x85:
        case 0x86:
        case 0x87:
        case 0x94:
        case 'R':
        case 'b':
        case 0x93:
        case 0x81:
        case 0x92:
        case 'o':
        case 0x8f:
        case 0x90:
        case 0x91:
        case 0x97:
        case 0x98:
        case 'Q':
          break;
        case 0x80:
        case 'K':
        case 'q':
        case 0x82:
          fixed = 1;
          break;
        case 'h':
          if (left() < 1) return;
          Add(data[pos]);
          fixed = 1;
          break;
        case 'M':
        case 0x83:
          fixed = 2;
          break;
        case 'J':
        case 'r':
        case 0x84:
          fixed = 4;
          break;
        case 'j':
          if (left() < 4) return;
          Add(little(4));
          fixed = 4;
          break;
        case 'G':
        case 0x95:
          fixed = 8;
          break;
        case 0x8a:
        case 0x8c:
        case 'C':
        case 'U':
          length_bytes = 1;
          break;
        case 'X':
        case 'B':
        case 'T':
        case 0x8b:
          length_bytes = 4;
          break;
        case 0x8d:
        case 0x8e:
        case 0x96:
          length_bytes = 8;
          break;
        case 'g': {
          const uint64_t start = pos;
          if (!skip_line()) return;
          uint64_t index = 0;
          bool digits = pos - 1 > start;
          for (uint64_t i = start; i + 1 < pos; ++i) {
            if (data[i] < '0' || data[i] > '9' || index > (uint64_t{1} << 56)) digits = false;
            index = index * 10 + (data[i] - '0');
          }
          if (digits) Add(index);
          break;
        }
        case 'p':
        case 'I':
        case 'L':
        case 'F':
        case 'S':
        case 'V':
        case 'P':
          if (!skip_line()) return;
          break;
        case 'c':
        case 'i':
          if (!skip_line() || !skip_line()) return;
          break;
        default:
          complete_ = false;  // an opcode the scan cannot size: keep every memoized value
          return;
      }
      if (length_bytes > 0) {
        if (left() < static_cast<uint64_t>(length_bytes)) return;
        fixed = length_bytes + little(length_bytes);
      }
      if (fixed > left()) return;  // truncated: the second pass stops here too
      pos += fixed;
    }
  }

  IndexSet fetched_;
  bool complete_ = true;
};

// Record mode keeps memory to what the caller keeps with a copying young generation: new nodes
// come from a small slab that is reused; after each record (and whenever the slab is full) the
// young nodes reachable from the stack, the memo and the old containers that gained children
// (APPEND(S), SETITEM(S), BUILD) are copied to the document's arena, and the slab starts over.
// A record's dropped values never leave the slab, and the slab's strings and vectors keep their
// capacity, so most values cost no allocation. Old nodes are never collected: what becomes
// garbage after it was copied (parts of a record in flight when the slab filled) stays small.
constexpr size_t kSlabNodes = size_t{1} << 16;
// ChargeCopy's budget: this many bytes per byte of input, plus the slack.
constexpr uint64_t kCopyBytesPerInputByte = 4;
constexpr uint64_t kCopyBytesSlack = uint64_t{1} << 20;
constexpr size_t kSlabMargin = 64;  // an opcode allocates at most a few nodes

class Machine {
 public:
  Machine(std::string_view bytes, const std::string& name, PickleDocument& doc, const PickleOptions& options)
      : bytes_(bytes),
        name_(name),
        doc_(doc),
        options_(options),
        record_mode_(!options.record_lists.empty()),
        memo_indices_(bytes.size()),
        copy_budget_(kCopyBytesPerInputByte * bytes.size() + kCopyBytesSlack) {
    if (record_mode_) {
      fetches_.emplace(bytes);
      dropped_ = New(PickleNode::Type::kDropped);  // before the slab: an old node
      slab_.resize(kSlabNodes);
      forwarded_.assign(kSlabNodes, nullptr);
    }
  }

  // Runs to STOP; returns the root.
  PickleNode* Run() {
    for (;;) {
      if (record_mode_ && (collect_pending_ || slab_used_ + kSlabMargin >= slab_.size())) Collect();
      op_offset_ = pos_;
      const uint8_t op = U8();
      switch (op) {
        case 0x80: {  // PROTO
          const uint8_t version = U8();
          if (version < 2 || version > 5) Fail(fmt::format("pickle protocol {} (petrsim reads 2-5)", version));
          break;
        }
        case 0x95:  // FRAME: a length hint only
          if (U64() > Left()) Fail("FRAME longer than the rest of the file");
          break;
        case '.': {  // STOP
          if (stack_.size() != Base() + 1 || !marks_.empty()) {
            Fail(fmt::format("STOP with {} values and {} open MARKs on the stack (expected 1 and 0)", stack_.size(),
                             marks_.size()));
          }
          if (record_mode_) Collect();  // the slab dies with the machine
          return stack_.back();
        }
        case '(':
          marks_.push_back(stack_.size());
          break;
        case '0':
          Pop();
          break;
        case '1':
          stack_.resize(PopMark());
          break;
        case '2':
          Push(Top());
          break;
        case '}':
          Push(New(PickleNode::Type::kDict));
          break;
        case ']': {
          PickleNode* list = New(PickleNode::Type::kList);
          if (record_mode_ && IsRecordListKey()) record_lists_.push_back(list);
          Push(list);
          break;
        }
        case ')':
          Push(New(PickleNode::Type::kTuple));
          break;
        case 't':
        case 'l': {  // TUPLE, LIST
          const size_t mark = PopMark();
          PickleNode* node = New(op == 't' ? PickleNode::Type::kTuple : PickleNode::Type::kList);
          node->items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
          stack_.resize(mark);
          Push(node);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1-3
          const size_t n = op - 0x84u;
          if (stack_.size() < Base() + n) Fail(fmt::format("TUPLE{} needs {} values on the stack", n, n));
          PickleNode* node = New(PickleNode::Type::kTuple);
          node->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          Push(node);
          break;
        }
        case 'd': {  // DICT
          const size_t mark = PopMark();
          PickleNode* node = New(PickleNode::Type::kDict);
          AddPairs(node, mark);
          Push(node);
          break;
        }
        case 'a': {  // APPEND
          PickleNode* value = Pop();
          PickleNode* list = Container(Top(), PickleNode::Type::kList, "APPEND");
          Changed(list);
          list->items.push_back(value);
          break;
        }
        case 'e': {  // APPENDS
          const size_t mark = PopMark();
          if (mark == 0 || mark <= Base()) Fail("APPENDS without a list below its MARK");
          PickleNode* list = Container(stack_[mark - 1], PickleNode::Type::kList, "APPENDS");
          Changed(list);
          list->items.insert(list->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
          stack_.resize(mark);
          break;
        }
        case 's': {  // SETITEM
          PickleNode* value = Pop();
          PickleNode* key = Pop();
          PickleNode* dict = Container(Top(), PickleNode::Type::kDict, "SETITEM");
          if (record_mode_ && IsRecordPosition(stack_.size() - 1)) {
            value = Prune(key, value);
            collect_pending_ = true;
          }
          Changed(dict);
          dict->entries.emplace_back(key, value);
          break;
        }
        case 'u': {  // SETITEMS
          const size_t mark = PopMark();
          if (mark == 0 || mark <= Base()) Fail("SETITEMS without a dict below its MARK");
          PickleNode* dict = Container(stack_[mark - 1], PickleNode::Type::kDict, "SETITEMS");
          if (record_mode_ && IsRecordPosition(mark - 1)) {
            if ((stack_.size() - mark) % 2 != 0) Fail("an odd number of values for a dict's keys and values");
            for (size_t i = mark; i < stack_.size(); i += 2) stack_[i + 1] = Prune(stack_[i], stack_[i + 1]);
            collect_pending_ = true;  // the record is complete: what it dropped is garbage now
          }
          Changed(dict);
          AddPairs(dict, mark);
          break;
        }
        case 'p':
          Put(DecimalLine());
          break;  // PUT
        case 'q':
          Put(U8());
          break;  // BINPUT
        case 'r':
          Put(U32());
          break;  // LONG_BINPUT
        case 0x94:
          Put(memo_count_);  // Python: memo[len(memo)] = the top
          break;             // MEMOIZE
        case 'g':
          Push(Memo(DecimalLine()));
          break;  // GET
        case 'h':
          Push(Memo(U8()));
          break;  // BINGET
        case 'j':
          Push(Memo(U32()));
          break;  // LONG_BINGET
        case 'N':
          Push(New(PickleNode::Type::kNone));
          break;
        case 0x88:
        case 0x89: {
          PickleNode* node = New(PickleNode::Type::kBool);
          node->boolean = op == 0x88;
          Push(node);
          break;
        }
        case 'I': {  // INT (protocol 0): "01"/"00" are True/False
          const std::string line = Line();
          PickleNode* node;
          if (line == "01" || line == "00") {
            node = New(PickleNode::Type::kBool);
            node->boolean = line == "01";
          } else {
            node = Int(ParseDecimal(line));
          }
          Push(node);
          break;
        }
        case 'J':
          Push(Int(static_cast<int32_t>(U32())));
          break;  // BININT
        case 'K':
          Push(Int(U8()));
          break;  // BININT1
        case 'M':
          Push(Int(U16()));
          break;      // BININT2
        case 0x8a: {  // LONG1
          const uint8_t n = U8();
          if (n > 8) Fail(fmt::format("LONG1 of {} bytes: integers wider than 64 bits are not supported", n));
          const std::string_view raw = Take(n);
          uint64_t value = 0;
          for (size_t i = 0; i < n; ++i) value |= uint64_t{static_cast<uint8_t>(raw[i])} << (8 * i);
          if (n > 0 && n < 8 && (static_cast<uint8_t>(raw[n - 1]) & 0x80)) value |= ~uint64_t{0} << (8 * n);
          Push(Int(static_cast<int64_t>(value)));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          const std::string_view raw = Take(8);
          uint64_t bits = 0;
          for (size_t i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(raw[i]);
          PickleNode* node = New(PickleNode::Type::kFloat);
          node->real = std::bit_cast<double>(bits);
          Push(node);
          break;
        }
        case 'X':
          Push(Str(PickleNode::Type::kString, U32()));
          break;  // BINUNICODE
        case 0x8c:
          Push(Str(PickleNode::Type::kString, U8()));
          break;  // SHORT_BINUNICODE
        case 0x8d:
          Push(Str(PickleNode::Type::kString, U64()));
          break;  // BINUNICODE8
        case 'B':
          Push(Str(PickleNode::Type::kBytes, U32()));
          break;  // BINBYTES
        case 'C':
          Push(Str(PickleNode::Type::kBytes, U8()));
          break;     // SHORT_BINBYTES
        case 'T': {  // BINSTRING
          const int32_t n = static_cast<int32_t>(U32());
          if (n < 0) Fail(fmt::format("BINSTRING of negative length {}", n));
          Push(Str(PickleNode::Type::kString, static_cast<uint64_t>(n)));
          break;
        }
        case 'U':
          Push(Str(PickleNode::Type::kString, U8()));
          break;  // SHORT_BINSTRING
        default: {
          if (options_.numpy && RunNumpyOpcode(op)) break;
          const char* unsupported = UnsupportedName(op);
          if (unsupported != nullptr) {
            Fail(
                fmt::format("unsupported pickle opcode {} (0x{:02x}): petrsim reads plain data "
                            "(dict, list, tuple, str, int, float, bool, None){} and never imports "
                            "or calls code",
                            unsupported, op, options_.numpy ? " and numpy arrays" : ""));
          }
          Fail(fmt::format("unknown pickle opcode 0x{:02x}{}", op,
                           op_offset_ == 0 ? " (not a pickle: it starts with 0x80, the PROTO opcode)" : ""));
        }
      }
    }
  }

  // After an error: adds the items of every open MARK to the container below it, innermost
  // first, and returns the bottom of the stack (null if empty).
  PickleNode* Salvage() {
    while (!marks_.empty()) {
      const size_t mark = marks_.back();
      marks_.pop_back();
      if (mark > 0 && mark <= stack_.size()) {
        PickleNode* below = stack_[mark - 1];
        if (below->type == PickleNode::Type::kList) {
          below->items.insert(below->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        } else if (below->type == PickleNode::Type::kDict) {
          for (size_t i = mark; i + 1 < stack_.size(); i += 2) below->entries.emplace_back(stack_[i], stack_[i + 1]);
        }
      }
      stack_.resize(std::min(mark, stack_.size()));
    }
    return stack_.empty() ? nullptr : stack_.front();
  }

  uint64_t op_offset() const { return op_offset_; }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw PickleError(fmt::format("{}: byte {}: {}", name_, op_offset_, what), op_offset_);
  }
  uint64_t Left() const { return bytes_.size() - pos_; }
  std::string_view Take(uint64_t n) {
    if (n > Left()) {
      Fail(fmt::format("truncated: the opcode needs {} more bytes, {} remain (file of {} bytes)", n, Left(),
                       bytes_.size()));
    }
    const std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint8_t U8() {
    if (Left() < 1) {
      op_offset_ = pos_;
      Fail(fmt::format("truncated: the pickle ends without STOP (file of {} bytes)", bytes_.size()));
    }
    return static_cast<uint8_t>(bytes_[pos_++]);
  }
  uint64_t LittleEndian(size_t n) {
    const std::string_view raw = Take(n);
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i) value |= uint64_t{static_cast<uint8_t>(raw[i])} << (8 * i);
    return value;
  }
  uint16_t U16() { return static_cast<uint16_t>(LittleEndian(2)); }
  uint32_t U32() { return static_cast<uint32_t>(LittleEndian(4)); }
  uint64_t U64() { return LittleEndian(8); }
  std::string Line() {
    const size_t end = bytes_.find('\n', pos_);
    if (end == std::string_view::npos) Fail("truncated: a text argument without its newline");
    std::string line(bytes_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return line;
  }
  int64_t ParseDecimal(const std::string& line) const {
    if (line.empty() || line.size() > 20) Fail(fmt::format("bad decimal '{}'", Printable(line)));
    size_t i = line[0] == '-' ? 1 : 0;
    if (i == line.size()) Fail(fmt::format("bad decimal '{}'", Printable(line)));
    __int128 value = 0;
    for (; i < line.size(); ++i) {
      if (line[i] < '0' || line[i] > '9') Fail(fmt::format("bad decimal '{}'", Printable(line)));
      value = value * 10 + (line[i] - '0');
      if (value > (__int128{1} << 63)) Fail(fmt::format("decimal '{}' wider than 64 bits", line));
    }
    if (line[0] == '-') value = -value;
    if (value > INT64_MAX) Fail(fmt::format("decimal '{}' wider than 64 bits", line));
    return static_cast<int64_t>(value);
  }
  // Values derived from others (an array's data from its bytes, a sweeps list's length) are
  // copies, and a memoized value can be fetched again for every copy: a few file bytes each.
  // Every copied byte is charged to a budget proportional to the file, so memory still follows the
  // input (a file whose values each appear once copies each at most about twice).
  void ChargeCopy(uint64_t n, const char* what) {
    if (n > copy_budget_ - copied_) {
      Fail(
          fmt::format("numpy data copies exceed {} bytes for a {}-byte file: shared buffers? ({} "
                      "of {} bytes after {} bytes copied; petrsim copies a memoized buffer or "
                      "state each time it is used again)",
                      copy_budget_, bytes_.size(), what, n, copied_));
    }
    copied_ += n;
  }
  uint64_t DecimalLine() {
    const int64_t value = ParseDecimal(Line());
    if (value < 0) Fail("negative memo index");
    return static_cast<uint64_t>(value);
  }

  PickleNode* New(PickleNode::Type type) {
    PickleNode* node;
    if (slab_used_ < slab_.size()) {
      // A reused young node: its strings and vectors keep their capacity.
      node = &slab_[slab_used_++];
      node->boolean = false;
      node->built = false;
      node->integer = 0;
      node->real = 0;
      node->text.clear();
      node->items.clear();
      node->entries.clear();
      node->dtype = NumpyDtype{};
      node->shape.clear();
    } else {
      node = OldNode();
    }
    node->type = type;
    return node;
  }
  PickleNode* OldNode() {
    if (doc_.arena.size() >= kPickleNodesMax) {
      Fail(fmt::format("more than {} values: petrsim's limit for one pickle", kPickleNodesMax));
    }
    doc_.arena.push_back(std::make_unique<PickleNode>());
    return doc_.arena.back().get();
  }
  PickleNode* Int(int64_t value) {
    PickleNode* node = New(PickleNode::Type::kInt);
    node->integer = value;
    return node;
  }
  PickleNode* Str(PickleNode::Type type, uint64_t n) {
    const std::string_view raw = Take(n);
    PickleNode* node = New(type);
    node->text.assign(raw);
    return node;
  }
  size_t Base() const { return marks_.empty() ? 0 : marks_.back(); }
  void Push(PickleNode* node) {
    stack_old_ = std::min(stack_old_, stack_.size());
    stack_.push_back(node);
  }
  PickleNode* Top() const {
    if (stack_.size() <= Base()) Fail("the stack is empty (at its MARK)");
    return stack_.back();
  }
  PickleNode* Pop() {
    PickleNode* node = Top();
    stack_.pop_back();
    return node;
  }
  size_t PopMark() {
    if (marks_.empty()) Fail("no MARK to pop");
    const size_t mark = marks_.back();
    marks_.pop_back();
    return mark;
  }
  PickleNode* Container(PickleNode* node, PickleNode::Type type, const char* op) const {
    if (node->type != type) {
      Fail(fmt::format("{} on a {} (expected a {})", op, node->TypeName(),
                       type == PickleNode::Type::kList ? "list" : "dict"));
    }
    return node;
  }
  void AddPairs(PickleNode* dict, size_t mark) {
    if ((stack_.size() - mark) % 2 != 0) Fail("an odd number of values for a dict's keys and values");
    for (size_t i = mark; i < stack_.size(); i += 2) dict->entries.emplace_back(stack_[i], stack_[i + 1]);
    stack_.resize(mark);
  }
  void Put(uint64_t index) {
    PickleNode* top = Top();
    // len(memo) in Python: the distinct indices stored (PUT may overwrite one, or skip some).
    if (memo_indices_.Insert(index)) ++memo_count_;
    if (record_mode_) {
      // Never read back (so never stored either): keeping it would keep its value alive.
      if (!fetches_->Fetched(index)) return;
    }
    memo_[index] = top;
    if (record_mode_ && IsYoung(top)) young_memo_.push_back(index);
  }
  PickleNode* Memo(uint64_t index) const {
    const auto it = memo_.find(index);
    if (it == memo_.end()) Fail(fmt::format("memo index {} was never stored", index));
    return it->second;
  }

  // --- Record mode ---------------------------------------------------------------------------

  // At EMPTY_LIST: whether the new list is the value of a record_lists key of the top-level dict
  // (stack: the dict, then its MARK and keys and values, the key last; or the dict and the key).
  bool IsRecordListKey() const {
    if (stack_.size() < 2 || stack_[0]->type != PickleNode::Type::kDict) return false;
    const PickleNode* key = stack_.back();
    if (key->type != PickleNode::Type::kString) return false;
    const size_t key_at = stack_.size() - 1;
    const bool key_position =
        (marks_.empty() && key_at == 1) || (marks_.size() == 1 && marks_[0] == 1 && (key_at - 1) % 2 == 0);
    if (!key_position) return false;
    return std::find(options_.record_lists.begin(), options_.record_lists.end(), key->text) !=
           options_.record_lists.end();
  }
  bool IsRecordList(const PickleNode* node) const {
    return std::find(record_lists_.begin(), record_lists_.end(), node) != record_lists_.end();
  }
  // Whether the dict at stack position `at` is an item being added to a record list: right above
  // the list (APPEND), or anywhere above the list's MARK (APPENDS).
  bool IsRecordPosition(size_t at) const {
    if (record_lists_.empty() || stack_[at]->type != PickleNode::Type::kDict) return false;
    if (at >= 1 && IsRecordList(stack_[at - 1])) return true;
    return !marks_.empty() && marks_.back() >= 1 && marks_.back() <= at && IsRecordList(stack_[marks_.back() - 1]);
  }
  // The value a record keeps for `key`.
  PickleNode* Prune(PickleNode* key, PickleNode* value) {
    if (key->type != PickleNode::Type::kString) return dropped_;
    const auto is = [&](const std::vector<std::string>& keys) {
      return std::find(keys.begin(), keys.end(), key->text) != keys.end();
    };
    if (is(options_.record_keys)) return value;
    if (is(options_.record_length_keys)) {
      if (!value->is_sequence()) return value;  // kept as it is, so the caller can say what it is
      ChargeCopy(value->items.size() * sizeof(PickleNode*), "a sweeps list's length");
      PickleNode* length_only = New(PickleNode::Type::kList);
      length_only->items.assign(value->items.size(), dropped_);
      return length_only;
    }
    return dropped_;
  }
  bool IsYoung(const PickleNode* node) const {
    const auto at = reinterpret_cast<uintptr_t>(node);
    return at >= reinterpret_cast<uintptr_t>(slab_.data()) &&
           at < reinterpret_cast<uintptr_t>(slab_.data() + slab_.size());
  }
  // Called before an old container gains children (or an array its items): the new ones are
  // roots of the next collection.
  void Changed(PickleNode* node) {
    if (record_mode_ && !IsYoung(node)) remembered_.push_back({node, node->items.size(), node->entries.size()});
  }
  // The old copy of a young node (made once), or the node itself when old.
  void Forward(PickleNode*& node) {
    if (!IsYoung(node)) return;
    const size_t index = static_cast<size_t>(node - slab_.data());
    if (forwarded_[index] == nullptr) {
      PickleNode* old = OldNode();
      *old = *node;  // a copy: the slab node keeps its capacity for reuse
      forwarded_[index] = old;
      to_scan_.push_back(old);
    }
    node = forwarded_[index];
  }
  // Between opcodes (nothing is held outside the stack and the memo then).
  void Collect() {
    // Only what changed since the last collection can point into the slab: the stack above the
    // part that stayed, the memo entries stored since, the containers that gained children.
    for (size_t i = std::min(stack_old_, stack_.size()); i < stack_.size(); ++i) Forward(stack_[i]);
    stack_old_ = stack_.size();
    for (const uint64_t index : young_memo_) {
      const auto it = memo_.find(index);
      if (it != memo_.end()) Forward(it->second);
    }
    young_memo_.clear();
    for (PickleNode*& node : record_lists_) Forward(node);
    for (const Remembered& changed : remembered_) {
      for (size_t i = changed.items_from; i < changed.node->items.size(); ++i) Forward(changed.node->items[i]);
      for (size_t i = changed.entries_from; i < changed.node->entries.size(); ++i) {
        Forward(changed.node->entries[i].first);
        Forward(changed.node->entries[i].second);
      }
    }
    while (!to_scan_.empty()) {
      PickleNode* node = to_scan_.back();
      to_scan_.pop_back();
      for (PickleNode*& item : node->items) Forward(item);
      for (auto& [key, value] : node->entries) {
        Forward(key);
        Forward(value);
      }
    }
    std::fill(forwarded_.begin(), forwarded_.begin() + static_cast<std::ptrdiff_t>(slab_used_), nullptr);
    slab_used_ = 0;
    remembered_.clear();
    collect_pending_ = false;
  }

  // --- numpy ---------------------------------------------------------------------------------

  bool RunNumpyOpcode(uint8_t op) {
    switch (op) {
      case 'c': {  // GLOBAL
        const std::string module = Line();
        const std::string name = Line();
        Push(GlobalNode(module, name));
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        const PickleNode* name = Pop();
        const PickleNode* module = Pop();
        if (module->type != PickleNode::Type::kString || name->type != PickleNode::Type::kString) {
          Fail(fmt::format("STACK_GLOBAL on a {} and a {} (expected two str)", module->TypeName(), name->TypeName()));
        }
        Push(GlobalNode(module->text, name->text));
        return true;
      }
      case 'R': {  // REDUCE
        PickleNode* args = Pop();
        PickleNode* callable = Pop();
        Push(Reduce(callable, args));
        return true;
      }
      case 'b': {  // BUILD
        PickleNode* state = Pop();
        Build(Top(), state);
        return true;
      }
      case 0x8e:
        Push(Str(PickleNode::Type::kBytes, U64()));
        return true;  // BINBYTES8
      case 0x96:
        Push(Str(PickleNode::Type::kBytes, U64()));
        return true;  // BYTEARRAY8
      default:
        return false;
    }
  }

  PickleNode* GlobalNode(const std::string& module, const std::string& name) {
    for (const auto& allowed : kAllowedGlobals) {
      if (allowed.module == module && allowed.name == name) {
        PickleNode* node = New(PickleNode::Type::kGlobal);
        node->integer = allowed.global;
        node->text = module + "." + name;
        return node;
      }
    }
    Fail(
        fmt::format("refused global {}.{}: petrsim never imports or calls code from a pickle; "
                    "it rebuilds numpy arrays with {} only",
                    Printable(module), Printable(name), kAllowedList));
  }

  const PickleNode& Arg(const PickleNode& args, size_t i, PickleNode::Type type, const char* what,
                        const char* function) const {
    const PickleNode& arg = *args.items[i];
    if (arg.type != type) {
      Fail(fmt::format("{}: argument {} ({}) is a {}", function, i + 1, what, arg.TypeName()));
    }
    return arg;
  }
  void ArgCount(const PickleNode& args, size_t n, const char* function) const {
    if (args.items.size() != n) {
      Fail(fmt::format("{} with {} arguments (expected {})", function, args.items.size(), n));
    }
  }

  PickleNode* Reduce(PickleNode* callable, PickleNode* args) {
    if (callable->type != PickleNode::Type::kGlobal) {
      Fail(fmt::format("REDUCE calls a {} (only the allowed numpy globals are interpreted)", callable->TypeName()));
    }
    if (args->type != PickleNode::Type::kTuple) {
      Fail(fmt::format("REDUCE of {} with a {} of arguments (expected a tuple)", callable->text, args->TypeName()));
    }
    switch (static_cast<Global>(callable->integer)) {
      case kReconstruct: {
        ArgCount(*args, 3, "numpy _reconstruct");
        const PickleNode& cls = Arg(*args, 0, PickleNode::Type::kGlobal, "the class", "numpy _reconstruct");
        if (cls.integer != kNdarray) {
          Fail(fmt::format("numpy _reconstruct of {} (expected numpy.ndarray)", cls.text));
        }
        Arg(*args, 1, PickleNode::Type::kTuple, "the shape", "numpy _reconstruct");
        Arg(*args, 2, PickleNode::Type::kBytes, "the type code", "numpy _reconstruct");
        return New(PickleNode::Type::kNumpyArray);  // BUILD sets dtype, shape and data
      }
      case kNdarray:
        Fail("numpy.ndarray is called directly (petrsim reads it only as _reconstruct's argument)");
      case kDtypeGlobal: {
        ArgCount(*args, 3, "numpy.dtype");
        const PickleNode& spec = Arg(*args, 0, PickleNode::Type::kString, "the type", "numpy.dtype");
        PickleNode* node = New(PickleNode::Type::kNumpyDtype);
        node->dtype = ParseDtype(spec.text);
        return node;
      }
      case kScalar: {
        ArgCount(*args, 2, "numpy scalar");
        const PickleNode& dtype = Arg(*args, 0, PickleNode::Type::kNumpyDtype, "the dtype", "numpy scalar");
        if (dtype.dtype.kind == 'O') Fail("a numpy object scalar (petrsim reads numeric, bool and str scalars)");
        const PickleNode& raw = Arg(*args, 1, PickleNode::Type::kBytes, "the value's bytes", "numpy scalar");
        if (raw.text.size() != dtype.dtype.itemsize) {
          Fail(fmt::format("numpy scalar of dtype {} with {} bytes (expected {})", dtype.dtype.Name(), raw.text.size(),
                           dtype.dtype.itemsize));
        }
        ChargeCopy(raw.text.size(), "a numpy scalar's bytes");
        PickleNode* node = New(PickleNode::Type::kNumpyScalar);
        node->dtype = dtype.dtype;
        node->text.assign(raw.text);
        return node;
      }
      case kFromBuffer: {
        ArgCount(*args, 4, "numpy _frombuffer");
        const PickleNode& buffer = Arg(*args, 0, PickleNode::Type::kBytes, "the buffer", "numpy _frombuffer");
        const PickleNode& dtype = Arg(*args, 1, PickleNode::Type::kNumpyDtype, "the dtype", "numpy _frombuffer");
        const PickleNode& shape = Arg(*args, 2, PickleNode::Type::kTuple, "the shape", "numpy _frombuffer");
        const PickleNode& order = Arg(*args, 3, PickleNode::Type::kString, "the order", "numpy _frombuffer");
        if (order.text != "C" && order.text != "F") {
          Fail(fmt::format("numpy _frombuffer with order '{}' (expected 'C' or 'F')", Printable(order.text)));
        }
        if (dtype.dtype.kind == 'O') Fail("numpy _frombuffer of an object dtype");
        PickleNode* node = New(PickleNode::Type::kNumpyArray);
        SetArray(*node, dtype.dtype, shape);
        ChargeCopy(buffer.text.size(), "numpy _frombuffer's buffer");
        node->text.assign(buffer.text);
        CheckDataLength(*node);
        if (order.text == "F") ToCOrder(*node);
        node->built = true;
        return node;
      }
      case kCodecsEncode: {
        ArgCount(*args, 2, "_codecs.encode");
        const PickleNode& text = Arg(*args, 0, PickleNode::Type::kString, "the text", "_codecs.encode");
        const PickleNode& encoding = Arg(*args, 1, PickleNode::Type::kString, "the encoding", "_codecs.encode");
        if (encoding.text != "latin1") {
          Fail(fmt::format("_codecs.encode with encoding '{}' (petrsim reads protocol 2's 'latin1' bytes only)",
                           Printable(encoding.text)));
        }
        ChargeCopy(text.text.size(), "_codecs.encode's bytes");
        PickleNode* node = New(PickleNode::Type::kBytes);
        Latin1(text.text, node->text);
        return node;
      }
      case kBytesGlobal:
        if (!args->items.empty()) Fail("bytes() with arguments (petrsim reads protocol 2's empty bytes only)");
        return New(PickleNode::Type::kBytes);
    }
    Fail(fmt::format("REDUCE of {} (not interpreted)", callable->text));
  }

  // 'f8', 'i8', 'b1', 'U10', 'O8', ... as numpy.dtype's first argument.
  NumpyDtype ParseDtype(std::string_view spec) const {
    const std::string original(spec);
    auto refuse = [&](const char* why) {
      Fail(
          fmt::format("numpy dtype '{}': {} (petrsim reads bool, int, uint, float32, float64, str, "
                      "bytes and object arrays)",
                      Printable(original), why));
    };
    if (!spec.empty() && (spec[0] == '<' || spec[0] == '|' || spec[0] == '=')) spec.remove_prefix(1);
    if (!spec.empty() && spec[0] == '>') refuse("big-endian");
    if (spec.empty()) refuse("empty");
    NumpyDtype dtype;
    dtype.kind = spec[0];
    uint64_t size = 0;
    if (spec.size() < 2 || spec.size() > 11) refuse("not a kind and a size");
    for (const char c : spec.substr(1)) {
      if (c < '0' || c > '9') refuse("not a kind and a size");
      size = size * 10 + (c - '0');
    }
    if (size > (uint64_t{1} << 30)) refuse("too large");
    switch (dtype.kind) {
      case 'b':
        if (size != 1) refuse("bool of another size");
        break;
      case 'i':
      case 'u':
        if (size != 1 && size != 2 && size != 4 && size != 8) refuse("integer size");
        break;
      case 'f':
        if (size != 4 && size != 8) refuse("float of that size");
        break;
      case 'U':
        size *= 4;
        break;
      case 'S':
        break;
      case 'O':
        if (size != 8 && size != 4) refuse("object size");
        size = 8;
        break;
      default:
        refuse("unsupported kind");
    }
    dtype.itemsize = static_cast<uint32_t>(size);
    return dtype;
  }

  void Build(PickleNode* object, PickleNode* state) {
    if (object->type == PickleNode::Type::kNumpyDtype && !object->built) {
      BuildDtype(*object, *state);
    } else if (object->type == PickleNode::Type::kNumpyArray && !object->built) {
      Changed(object);
      BuildArray(*object, *state);
    } else {
      Fail(fmt::format("BUILD on a {} (petrsim sets the state of new numpy arrays and dtypes only)",
                       object->TypeName()));
    }
    object->built = true;
  }

  // numpy.dtype.__setstate__: (3, byteorder, subarray, names, fields, elsize, alignment, flags)
  // or version 4 with metadata last.
  void BuildDtype(PickleNode& node, const PickleNode& state) {
    const std::string name = node.dtype.Name();
    if (state.type != PickleNode::Type::kTuple || state.items.size() < 8 || state.items.size() > 9) {
      Fail(fmt::format("numpy dtype {}: state is a {} of {} items (expected a tuple of 8 or 9)", name, state.TypeName(),
                       state.items.size()));
    }
    const auto& s = state.items;
    if (s[0]->type != PickleNode::Type::kInt || (s[0]->integer != 3 && s[0]->integer != 4)) {
      Fail(fmt::format("numpy dtype {}: state version {} (expected 3 or 4)", name, DescribePickleValue(*s[0])));
    }
    if (s[1]->type != PickleNode::Type::kString)
      Fail(fmt::format("numpy dtype {}: byte order is a {}", name, s[1]->TypeName()));
    const std::string& order = s[1]->text;
    if (order == ">" && node.dtype.itemsize > 1 && node.dtype.kind != 'S') {
      Fail(fmt::format("numpy dtype {}: big-endian data (petrsim reads little-endian arrays)", name));
    }
    if (order != "<" && order != "|" && order != "=" && order != ">") {
      Fail(fmt::format("numpy dtype {}: byte order '{}'", name, Printable(order)));
    }
    for (size_t i = 2; i <= 4; ++i) {
      if (s[i]->type != PickleNode::Type::kNone) {
        Fail(fmt::format("numpy dtype {}: a structured or sub-array dtype (petrsim reads plain arrays)", name));
      }
    }
    if (s[5]->type != PickleNode::Type::kInt)
      Fail(fmt::format("numpy dtype {}: element size is a {}", name, s[5]->TypeName()));
    if ((node.dtype.kind == 'U' || node.dtype.kind == 'S') && s[5]->integer >= 0) {
      const int64_t elsize = s[5]->integer;
      if (elsize > (int64_t{1} << 32) - 4 || (node.dtype.kind == 'U' && elsize % 4 != 0)) {
        Fail(fmt::format("numpy dtype {}: element size {}", name, elsize));
      }
      node.dtype.itemsize = static_cast<uint32_t>(elsize);
    }
    if (s.size() == 9 && s[8]->type != PickleNode::Type::kNone) {
      Fail(fmt::format("numpy dtype {}: dtype metadata (datetime or user types are not read)", name));
    }
  }

  // ndarray.__setstate__: (version, shape, dtype, is_fortran, data) or without the version.
  void BuildArray(PickleNode& node, const PickleNode& state) {
    if (state.type != PickleNode::Type::kTuple || (state.items.size() != 5 && state.items.size() != 4)) {
      Fail(fmt::format("numpy array state is a {} of {} items (expected a tuple of 5)", state.TypeName(),
                       state.items.size()));
    }
    const size_t first = state.items.size() == 5 ? 1 : 0;
    if (first == 1 && (state.items[0]->type != PickleNode::Type::kInt || state.items[0]->integer != 1)) {
      Fail(fmt::format("numpy array state version {} (expected 1)", DescribePickleValue(*state.items[0])));
    }
    const PickleNode& shape = *state.items[first];
    const PickleNode& dtype = *state.items[first + 1];
    const PickleNode& fortran = *state.items[first + 2];
    const PickleNode& data = *state.items[first + 3];
    if (shape.type != PickleNode::Type::kTuple) Fail(fmt::format("numpy array shape is a {}", shape.TypeName()));
    if (dtype.type != PickleNode::Type::kNumpyDtype) Fail(fmt::format("numpy array dtype is a {}", dtype.TypeName()));
    if (fortran.type != PickleNode::Type::kBool)
      Fail(fmt::format("numpy array order flag is a {}", fortran.TypeName()));
    SetArray(node, dtype.dtype, shape);
    if (dtype.dtype.kind == 'O') {
      if (data.type != PickleNode::Type::kList) {
        Fail(fmt::format("numpy object array data is a {} (expected a list)", data.TypeName()));
      }
      if (data.items.size() != NumpyCount(node)) {
        Fail(fmt::format("numpy object array of shape {} with {} items", ShapeText(node.shape), data.items.size()));
      }
      ChargeCopy(data.items.size() * sizeof(PickleNode*), "a numpy object array's items");
      node.items = data.items;
    } else {
      if (data.type != PickleNode::Type::kBytes) {
        Fail(fmt::format("numpy array data is a {} (expected bytes)", data.TypeName()));
      }
      ChargeCopy(data.text.size(), "a numpy array's data");
      node.text.assign(data.text);
      CheckDataLength(node);
    }
    if (fortran.boolean) ToCOrder(node);
  }

  void SetArray(PickleNode& node, const NumpyDtype& dtype, const PickleNode& shape) {
    if (dtype.kind == 0 || dtype.itemsize == 0) {
      Fail(fmt::format("numpy array of dtype {} (element size 0)", dtype.Name()));
    }
    if (shape.items.size() > kNumpyDimsMax) {
      Fail(fmt::format("numpy array of {} dimensions (at most {})", shape.items.size(), kNumpyDimsMax));
    }
    node.dtype = dtype;
    node.shape.clear();
    uint64_t count = 1;
    for (const PickleNode* dim : shape.items) {
      if (dim->type != PickleNode::Type::kInt || dim->integer < 0) {
        Fail(fmt::format("numpy array shape has a {} (expected non-negative int)", DescribePickleValue(*dim)));
      }
      const auto n = static_cast<uint64_t>(dim->integer);
      // No array holds more elements than the file has bytes (an element costs at least one).
      if (n > 0 && count > (bytes_.size() + 1) / n) {
        Fail(fmt::format("numpy array shape {} has more elements than the file has bytes", ShapeText(shape)));
      }
      count *= n;
      node.shape.push_back(dim->integer);
    }
  }
  static std::string ShapeText(const std::vector<int64_t>& shape) {
    std::string out = "(";
    for (size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", shape[i]);
    return out + (shape.size() == 1 ? ",)" : ")");
  }
  static std::string ShapeText(const PickleNode& shape) {
    std::vector<int64_t> dims;
    for (const PickleNode* dim : shape.items) dims.push_back(dim->integer);
    return ShapeText(dims);
  }
  void CheckDataLength(const PickleNode& node) const {
    const unsigned __int128 expected = static_cast<unsigned __int128>(NumpyCount(node)) * node.dtype.itemsize;
    if (expected != node.text.size()) {
      Fail(fmt::format(
          "numpy array of dtype {} and shape {}: {} elements x {} bytes, but the data "
          "holds {} bytes",
          node.dtype.Name(), ShapeText(node.shape), NumpyCount(node), node.dtype.itemsize, node.text.size()));
    }
  }
  // Reorders a Fortran-order array's elements (or items) into C order.
  static void ToCOrder(PickleNode& node) {
    const size_t dims = node.shape.size();
    const uint64_t count = NumpyCount(node);
    if (dims < 2 || count < 2) return;
    std::vector<uint64_t> fortran_stride(dims, 1);
    for (size_t k = 1; k < dims; ++k) fortran_stride[k] = fortran_stride[k - 1] * node.shape[k - 1];
    std::vector<int64_t> index(dims, 0);
    const bool objects = node.dtype.kind == 'O';
    const size_t itemsize = node.dtype.itemsize;
    std::string data(objects ? 0 : node.text.size(), '\0');
    std::vector<PickleNode*> items(objects ? count : 0);
    uint64_t from = 0;  // Fortran offset of `index`
    for (uint64_t c = 0; c < count; ++c) {
      if (objects) {
        items[c] = node.items[from];
      } else {
        std::memcpy(data.data() + c * itemsize, node.text.data() + from * itemsize, itemsize);
      }
      // Odometer, last dimension fastest (C order).
      for (size_t k = dims; k-- > 0;) {
        if (++index[k] < node.shape[k]) {
          from += fortran_stride[k];
          break;
        }
        from -= fortran_stride[k] * (node.shape[k] - 1);
        index[k] = 0;
      }
    }
    if (objects) {
      node.items = std::move(items);
    } else {
      node.text = std::move(data);
    }
  }
  // Protocol 2 writes bytes as the str of their latin-1 code points; back to bytes.
  void Latin1(const std::string& utf8, std::string& out) const {
    out.resize(utf8.size());
    const auto* in = reinterpret_cast<const unsigned char*>(utf8.data());
    const size_t n = utf8.size();
    size_t length = 0;
    for (size_t i = 0; i < n;) {
      const unsigned char c = in[i];
      if (c < 0x80) {
        out[length++] = static_cast<char>(c);
        ++i;
      } else if ((c == 0xC2 || c == 0xC3) && i + 1 < n && (in[i + 1] & 0xC0) == 0x80) {
        out[length++] = static_cast<char>(((c & 0x03) << 6) | (in[i + 1] & 0x3F));
        i += 2;
      } else {
        Fail(
            "_codecs.encode of a str with characters beyond latin-1 (not bytes written by protocol "
            "2)");
      }
    }
    out.resize(length);
  }

  std::string_view bytes_;
  const std::string& name_;
  PickleDocument& doc_;
  const PickleOptions& options_;
  const bool record_mode_;
  uint64_t pos_ = 0;
  uint64_t op_offset_ = 0;
  std::vector<PickleNode*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleNode*> memo_;
  IndexSet memo_indices_;       // the indices PUT, BINPUT, LONG_BINPUT and MEMOIZE stored at
  uint64_t memo_count_ = 0;     // len(memo) in Python (record mode may not keep them all)
  const uint64_t copy_budget_;  // ChargeCopy
  uint64_t copied_ = 0;
  // Record mode.
  std::optional<MemoFetches> fetches_;
  PickleNode* dropped_ = nullptr;
  std::vector<PickleNode*> record_lists_;
  struct Remembered {
    PickleNode* node;
    size_t items_from, entries_from;
  };
  std::vector<PickleNode> slab_;  // young nodes (record mode)
  size_t slab_used_ = 0;
  std::vector<PickleNode*> forwarded_;  // per slab node: its old copy during a collection
  std::vector<PickleNode*> to_scan_;
  std::vector<Remembered> remembered_;
  bool collect_pending_ = false;
  size_t stack_old_ = 0;              // stack_[0, stack_old_) holds no young node
  std::vector<uint64_t> young_memo_;  // memo indices stored since the last collection
};

}  // namespace

uint64_t NumpyCount(const PickleNode& array) {
  if (array.type == PickleNode::Type::kNumpyScalar) return 1;
  uint64_t count = 1;
  for (const int64_t dim : array.shape) count *= static_cast<uint64_t>(dim);
  return count;
}

namespace {
template <typename T>
T Load(const PickleNode& node, uint64_t index) {
  T value;
  std::memcpy(&value, node.text.data() + index * sizeof(T), sizeof(T));
  return value;
}
}  // namespace

double NumpyFloat(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  const uint32_t size = node.dtype.itemsize;
  switch (node.dtype.kind) {
    case 'f':
      return size == 4 ? Load<float>(node, index) : Load<double>(node, index);
    case 'i':
    case 'u':
    case 'b': {
      if (node.dtype.kind == 'u' && size == 8) return static_cast<double>(Load<uint64_t>(node, index));
      return static_cast<double>(NumpyInt(node, index));
    }
    default:
      PETRSIM_ASSERT(false && "NumpyFloat of a non-numeric dtype");
  }
  return 0;
}

int64_t NumpyInt(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  const uint32_t size = node.dtype.itemsize;
  switch (node.dtype.kind) {
    case 'b':
      return Load<uint8_t>(node, index) != 0;
    case 'i':
      switch (size) {
        case 1:
          return Load<int8_t>(node, index);
        case 2:
          return Load<int16_t>(node, index);
        case 4:
          return Load<int32_t>(node, index);
        default:
          return Load<int64_t>(node, index);
      }
    case 'u':
      switch (size) {
        case 1:
          return Load<uint8_t>(node, index);
        case 2:
          return Load<uint16_t>(node, index);
        case 4:
          return Load<uint32_t>(node, index);
        default: {
          const uint64_t value = Load<uint64_t>(node, index);
          return value > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(value);
        }
      }
    default:
      PETRSIM_ASSERT(false && "NumpyInt of a non-integer dtype");
  }
  return 0;
}

bool NumpyIntFits(const PickleNode& node, uint64_t index) {
  return !(node.dtype.kind == 'u' && node.dtype.itemsize == 8) ||
         NumpyUint64(node, index) <= static_cast<uint64_t>(INT64_MAX);
}

uint64_t NumpyUint64(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  PETRSIM_ASSERT(node.dtype.kind == 'u' && "NumpyUint64 of a non-unsigned dtype");
  if (node.dtype.itemsize == 8) return Load<uint64_t>(node, index);
  return static_cast<uint64_t>(NumpyInt(node, index));
}

std::string NumpyString(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  const uint32_t size = node.dtype.itemsize;
  const char* raw = node.text.data() + index * size;
  std::string out;
  if (node.dtype.kind == 'S') {
    size_t n = size;
    while (n > 0 && raw[n - 1] == '\0') --n;
    return std::string(raw, n);
  }
  PETRSIM_ASSERT(node.dtype.kind == 'U');
  size_t n = size / 4;
  auto code_point = [&](size_t i) {
    uint32_t c;
    std::memcpy(&c, raw + 4 * i, 4);
    return c;
  };
  while (n > 0 && code_point(n - 1) == 0) --n;
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = code_point(i);
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

std::string DescribePickleValue(const PickleNode& node) {
  auto dtype_name = [](const NumpyDtype& dtype) -> std::string {
    switch (dtype.kind) {
      case 'b':
        return "bool";
      case 'i':
        return fmt::format("int{}", dtype.itemsize * 8);
      case 'u':
        return fmt::format("uint{}", dtype.itemsize * 8);
      case 'f':
        return fmt::format("float{}", dtype.itemsize * 8);
      case 'U':
        return fmt::format("str (<U{})", dtype.itemsize / 4);
      case 'S':
        return fmt::format("bytes (|S{})", dtype.itemsize);
      case 'O':
        return "object";
      default:
        return "untyped";
    }
  };
  switch (node.type) {
    case PickleNode::Type::kNumpyArray: {
      std::string shape = "(";
      for (size_t i = 0; i < node.shape.size(); ++i) shape += fmt::format("{}{}", i ? ", " : "", node.shape[i]);
      shape += node.shape.size() == 1 ? ",)" : ")";
      return fmt::format("{} array of shape {}", dtype_name(node.dtype), shape);
    }
    case PickleNode::Type::kNumpyScalar:
      return fmt::format("numpy {} scalar", dtype_name(node.dtype));
    case PickleNode::Type::kInt:
      return fmt::format("int {}", node.integer);
    case PickleNode::Type::kString:
      return fmt::format("str '{}'", Printable(node.text));
    case PickleNode::Type::kList:
      return fmt::format("list of {} items", node.items.size());
    case PickleNode::Type::kTuple:
      return fmt::format("tuple of {} items", node.items.size());
    default:
      return node.TypeName();
  }
}

PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name, bool salvage) {
  PickleOptions options;
  options.salvage = salvage;
  return ParsePickle(bytes, display_name, options);
}

PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name, const PickleOptions& options) {
  PickleDocument doc;
  Machine machine(bytes, display_name, doc, options);
  try {
    doc.root = machine.Run();

  } catch (const PickleError& error) {
    // Record mode's young nodes die with the machine: nothing is salvaged there.
    PickleNode* root = options.salvage && options.record_lists.empty() ? machine.Salvage() : nullptr;
    if (root == nullptr || (root->type != PickleNode::Type::kDict && root->type != PickleNode::Type::kList)) {
      throw;
    }
    doc.root = root;
    doc.partial = error.what();
    doc.partial_offset = error.offset();
  }
  return doc;
}

}  // namespace petrsim
