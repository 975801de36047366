// The pickle machine's opcodes (pickle_internal.h): the plain-data ones it runs, the names of
// those it refuses, and the salvage of a broken stream.
#include "formats/pickle/pickle_internal.h"

#include <algorithm>
#include <bit>
#include <cstddef>

namespace petrsim::pickle_internal {

std::string DescribeFileStart(std::string_view bytes, std::string_view name) {
  const auto starts = [&](std::string_view prefix) { return bytes.substr(0, prefix.size()) == prefix; };
  if (starts("\x1f\x8b")) return "a gzip file (decompress it first)";
  if (starts("PK\x03\x04")) return "a zip archive (torch.save's default format; petrsim reads plain pickles)";
  if (name.ends_with(".pb") || name.ends_with(".pbtrace")) {
    return "a protobuf file, such as a petrsim scenario (.pb) or trace (.pbtrace)";
  }
  const std::string_view head = bytes.substr(0, 40);
  const bool text = !head.empty() && std::all_of(head.begin(), head.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\n' || u == '\r' || u == '\t' || (u >= 0x20 && u < 0x7f) || u >= 0x80;
  });
  if (text && (starts("{") || starts("["))) return "JSON text";
  if (text) return fmt::format("text, starting \"{}\"", head.substr(0, head.find_first_of("\r\n")));
  return fmt::format("binary data starting with 0x{:02x}", static_cast<unsigned char>(bytes.empty() ? 0 : bytes[0]));
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

}  // namespace

// Runs to STOP; returns the root.
PickleNode* Machine::Run() {
  for (;;) {
    if (pos_ >= stop_at_) return nullptr;  // the end of a value replayed (Machine::Replay)
    if (record_mode_ && (collect_pending_ || slab_used_ + kSlabMargin >= slab_.size())) Collect();
    if (pos_ >= next_progress_) {
      if (options_.progress) options_.progress(pos_, bytes_.size());
      if (options_.release) options_.release(pos_);
      next_progress_ = pos_ + kPickleProgressBytes;
    }
    op_offset_ = pos_;
    const uint8_t op = U8();
    if (watch_slot_ != kNoWatch) CheckWatch(op);
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
        AddItems(list, &value, &value + 1);
        break;
      }
      case 'e': {  // APPENDS
        const size_t mark = PopMark();
        if (mark == 0 || mark <= Base()) Fail("APPENDS without a list below its MARK");
        PickleNode* list = Container(stack_[mark - 1], PickleNode::Type::kList, "APPENDS");
        AddItems(list, stack_.data() + mark, stack_.data() + stack_.size());
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
          if (one_pass_) EndRecordOnePass();
        }
        Changed(dict);
        AddPairs(dict, mark);
        break;
      }
      case 'p':
        Put(DecimalLine());
        AfterString();
        break;  // PUT
      case 'q':
        Put(U8());
        AfterString();
        break;  // BINPUT
      case 'r':
        Put(U32());
        AfterString();
        break;  // LONG_BINPUT
      case 0x94:
        Put(memo_count_);  // Python: memo[len(memo)] = the top
        AfterString();
        break;  // MEMOIZE
      case 'g':
        Push(Fetch(DecimalLine()));
        AfterString();
        break;  // GET
      case 'h':
        Push(Fetch(U8()));
        AfterString();
        break;  // BINGET
      case 'j':
        Push(Fetch(U32()));
        AfterString();
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
        AfterString();
        break;  // BINUNICODE
      case 0x8c:
        Push(Str(PickleNode::Type::kString, U8()));
        AfterString();
        break;  // SHORT_BINUNICODE
      case 0x8d:
        Push(Str(PickleNode::Type::kString, U64()));
        AfterString();
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
                         op_offset_ == 0 ? fmt::format(" (not a pickle, which starts with 0x80, the PROTO opcode: this "
                                                       "file looks like {})",
                                                       DescribeFileStart(bytes_, name_))
                                         : std::string()));
      }
    }
  }
}

// After an error: adds the items of every open MARK to the container below it, innermost
// first, and returns the bottom of the stack (null if empty). In record mode a record list's items
// are handed over (AddItems) and a half-built record is pruned, as the machine would have.
PickleNode* Machine::Salvage() {
  while (!marks_.empty()) {
    const size_t mark = marks_.back();
    marks_.pop_back();
    if (mark > 0 && mark <= stack_.size()) {
      PickleNode* below = stack_[mark - 1];
      if (below->type == PickleNode::Type::kList) {
        AddItems(below, stack_.data() + mark, stack_.data() + stack_.size());
      } else if (below->type == PickleNode::Type::kDict) {
        const bool record = IsRecordPosition(mark - 1);
        Changed(below);
        for (size_t i = mark; i + 1 < stack_.size(); i += 2) {
          below->entries.emplace_back(stack_[i], record ? Prune(stack_[i], stack_[i + 1]) : stack_[i + 1]);
        }
      }
    }
    stack_.resize(std::min(mark, stack_.size()));
  }
  return stack_.empty() ? nullptr : stack_.front();
}

}  // namespace petrsim::pickle_internal
