// The strict plain-data pickle reader; see pickle.h.
#include "replay/pickle.h"


#include <bit>
#include <unordered_map>

#include <fmt/format.h>

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
    case Type::kNone: return "None";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kBytes: return "bytes";
    case Type::kList: return "list";
    case Type::kTuple: return "tuple";
    case Type::kDict: return "dict";
  }
  return "?";
}

namespace {

// Names of the opcodes petrsim refuses, for the error message.
const char* UnsupportedName(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 'F': return "FLOAT";
    case 'L': return "LONG";
    case 0x8b: return "LONG4";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

class Machine {
 public:
  Machine(std::string_view bytes, const std::string& name, PickleDocument& doc)
      : bytes_(bytes), name_(name), doc_(doc) {}

  // Runs to STOP; returns the root.
  PickleNode* Run() {
    for (;;) {
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
            Fail(fmt::format("STOP with {} values and {} open MARKs on the stack (expected 1 and 0)",
                             stack_.size(), marks_.size()));
          }
          return stack_.back();
        }
        case '(': marks_.push_back(stack_.size()); break;
        case '0': Pop(); break;
        case '1': stack_.resize(PopMark()); break;
        case '2': Push(Top()); break;
        case '}': Push(New(PickleNode::Type::kDict)); break;
        case ']': Push(New(PickleNode::Type::kList)); break;
        case ')': Push(New(PickleNode::Type::kTuple)); break;
        case 't': case 'l': {  // TUPLE, LIST
          const size_t mark = PopMark();
          PickleNode* node = New(op == 't' ? PickleNode::Type::kTuple : PickleNode::Type::kList);
          node->items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
          stack_.resize(mark);
          Push(node);
          break;
        }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1-3
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
          Container(Top(), PickleNode::Type::kList, "APPEND")->items.push_back(value);
          break;
        }
        case 'e': {  // APPENDS
          const size_t mark = PopMark();
          if (mark == 0 || mark <= Base()) Fail("APPENDS without a list below its MARK");
          PickleNode* list = Container(stack_[mark - 1], PickleNode::Type::kList, "APPENDS");
          list->items.insert(list->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
          stack_.resize(mark);
          break;
        }
        case 's': {  // SETITEM
          PickleNode* value = Pop();
          PickleNode* key = Pop();
          Container(Top(), PickleNode::Type::kDict, "SETITEM")->entries.emplace_back(key, value);
          break;
        }
        case 'u': {  // SETITEMS
          const size_t mark = PopMark();
          if (mark == 0 || mark <= Base()) Fail("SETITEMS without a dict below its MARK");
          AddPairs(Container(stack_[mark - 1], PickleNode::Type::kDict, "SETITEMS"), mark);
          break;
        }
        case 'p': memo_[DecimalLine()] = Top(); break;             // PUT
        case 'q': memo_[U8()] = Top(); break;                      // BINPUT
        case 'r': memo_[U32()] = Top(); break;                     // LONG_BINPUT
        case 0x94: memo_[memo_.size()] = Top(); break;             // MEMOIZE
        case 'g': Push(Memo(DecimalLine())); break;                // GET
        case 'h': Push(Memo(U8())); break;                         // BINGET
        case 'j': Push(Memo(U32())); break;                        // LONG_BINGET
        case 'N': Push(New(PickleNode::Type::kNone)); break;
        case 0x88: case 0x89: {
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
        case 'J': Push(Int(static_cast<int32_t>(U32()))); break;  // BININT
        case 'K': Push(Int(U8())); break;                          // BININT1
        case 'M': Push(Int(U16())); break;                         // BININT2
        case 0x8a: {                                               // LONG1
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
        case 'X': Push(Str(PickleNode::Type::kString, U32())); break;   // BINUNICODE
        case 0x8c: Push(Str(PickleNode::Type::kString, U8())); break;   // SHORT_BINUNICODE
        case 0x8d: Push(Str(PickleNode::Type::kString, U64())); break;  // BINUNICODE8
        case 'B': Push(Str(PickleNode::Type::kBytes, U32())); break;    // BINBYTES
        case 'C': Push(Str(PickleNode::Type::kBytes, U8())); break;     // SHORT_BINBYTES
        case 'T': {                                                     // BINSTRING
          const int32_t n = static_cast<int32_t>(U32());
          if (n < 0) Fail(fmt::format("BINSTRING of negative length {}", n));
          Push(Str(PickleNode::Type::kString, static_cast<uint64_t>(n)));
          break;
        }
        case 'U': Push(Str(PickleNode::Type::kString, U8())); break;    // SHORT_BINSTRING
        default: {
          const char* unsupported = UnsupportedName(op);
          if (unsupported != nullptr) {
            Fail(fmt::format("unsupported pickle opcode {} (0x{:02x}): petrsim reads plain data "
                             "(dict, list, tuple, str, int, float, bool, None) and never imports "
                             "or calls code", unsupported, op));
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
      Fail(fmt::format("truncated: the opcode needs {} more bytes, {} remain (file of {} bytes)", n,
                       Left(), bytes_.size()));
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
    if (line.empty() || line.size() > 20) Fail(fmt::format("bad decimal '{}'", line));
    size_t i = line[0] == '-' ? 1 : 0;
    if (i == line.size()) Fail(fmt::format("bad decimal '{}'", line));
    __int128 value = 0;
    for (; i < line.size(); ++i) {
      if (line[i] < '0' || line[i] > '9') Fail(fmt::format("bad decimal '{}'", line));
      value = value * 10 + (line[i] - '0');
      if (value > (__int128{1} << 63)) Fail(fmt::format("decimal '{}' wider than 64 bits", line));
    }
    if (line[0] == '-') value = -value;
    if (value > INT64_MAX) Fail(fmt::format("decimal '{}' wider than 64 bits", line));
    return static_cast<int64_t>(value);
  }
  uint64_t DecimalLine() {
    const int64_t value = ParseDecimal(Line());
    if (value < 0) Fail("negative memo index");
    return static_cast<uint64_t>(value);
  }

  PickleNode* New(PickleNode::Type type) {
    if (doc_.arena.size() >= kPickleNodesMax) {
      Fail(fmt::format("more than {} values: petrsim's limit for one pickle", kPickleNodesMax));
    }
    doc_.arena.push_back(std::make_unique<PickleNode>());
    doc_.arena.back()->type = type;
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
  void Push(PickleNode* node) { stack_.push_back(node); }
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
  PickleNode* Memo(uint64_t index) const {
    const auto it = memo_.find(index);
    if (it == memo_.end()) Fail(fmt::format("memo index {} was never stored", index));
    return it->second;
  }

  std::string_view bytes_;
  const std::string& name_;
  PickleDocument& doc_;
  uint64_t pos_ = 0;
  uint64_t op_offset_ = 0;
  std::vector<PickleNode*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PickleNode*> memo_;
};

}  // namespace

PickleDocument ParsePickle(std::string_view bytes, const std::string& display_name, bool salvage) {
  PickleDocument doc;
  Machine machine(bytes, display_name, doc);
  try {
    doc.root = machine.Run();
  } catch (const PickleError& error) {
    PickleNode* root = salvage ? machine.Salvage() : nullptr;
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
