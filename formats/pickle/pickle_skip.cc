// Record mode's skip (PickleOptions::skip_dropped, pickle_internal.h): the value under a record
// key the caller drops is stepped over opcode by opcode, its stack effects followed without a
// node, a string or an array being made. Whatever the step cannot follow exactly as the machine
// would run it ends the skip, and the machine parses the value as before (a "fallback"): so a
// file's errors and offsets are the machine's own.
//
// Where a value ends is a prediction: the opcodes after it (the next key, or the record's
// SETITEMS) could still belong to it in a hand-made file (a tuple whose second item is a str).
// So the machine watches the slot of the last value it skipped until the record's SETITEMS: an
// opcode that reaches it before (a TUPLE2 over it, a DUP of it) means the prediction was wrong,
// and the file is parsed again without skipping (SkipMispredicted, pickle.cc).
#include "formats/pickle/pickle_internal.h"

namespace petrsim::pickle_internal {

namespace {

constexpr uint64_t kNoStep = UINT64_MAX;

uint64_t LittleAt(const uint8_t* at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) value |= uint64_t{at[i]} << (8 * i);
  return value;
}

// The argument bytes of an opcode that pushes one plain value (no container, nothing to call),
// or kNoStep when `op` is not one or its argument runs past the `left` bytes.
uint64_t PlainArgument(uint8_t op, const uint8_t* at, uint64_t left) {
  uint64_t n = 0;
  switch (op) {
    case 'N':
    case 0x88:
    case 0x89:
      return 0;
    case 'K':
      n = 1;
      break;
    case 'M':
      n = 2;
      break;
    case 'J':
      n = 4;
      break;
    case 'G':
      n = 8;
      break;
    case 0x8a:  // LONG1: wider than 64 bits is the machine's error
      if (left < 1 || at[0] > 8) return kNoStep;
      n = 1 + uint64_t{at[0]};
      break;
    case 0x8c:  // SHORT_BINUNICODE, SHORT_BINBYTES, SHORT_BINSTRING
    case 'C':
    case 'U':
      if (left < 1) return kNoStep;
      n = 1 + uint64_t{at[0]};
      break;
    case 'T':  // BINSTRING: a negative length is the machine's error
      if (left < 4 || (at[3] & 0x80) != 0) return kNoStep;
      [[fallthrough]];
    case 'X':  // BINUNICODE, BINBYTES
    case 'B':
      if (left < 4) return kNoStep;
      n = 4 + LittleAt(at, 4);
      break;
    case 0x8d:  // BINUNICODE8; BINBYTES8 and BYTEARRAY8 (numpy mode's: ValueSkipper::Step)
    case 0x8e:
    case 0x96:
      if (left < 8 || LittleAt(at, 8) > left - 8) return kNoStep;
      n = 8 + LittleAt(at, 8);
      break;
    default:
      return kNoStep;
  }
  return n > left ? kNoStep : n;
}

// What the skip knows of a stack slot: enough to refuse what the machine would refuse.
enum SkipTag : uint8_t {
  kPlainTag,     // a value nothing is added to and nothing calls
  kListTag,      // APPEND(S) may add to it
  kDictTag,      // SETITEM(S) may add to it
  kTupleTag,     // REDUCE's arguments
  kCallableTag,  // one of the allowed globals (fetched from the memo): REDUCE may call it
  kObjectTag,    // an array or dtype REDUCE made: BUILD may set its state
};

SkipTag TagOf(PickleNode::Type type) {
  switch (type) {
    case PickleNode::Type::kTuple:
      return kTupleTag;
    case PickleNode::Type::kGlobal:
      return kCallableTag;
    default:
      // A list or dict from the memo is shared: adding to it would change what others read, so
      // the skip does not follow that (the machine does). Nor an unbuilt array or an opaque object.
      return kPlainTag;
  }
}

}  // namespace

// After a string is pushed (or memoized): when it is a record's key whose value the caller drops,
// steps over that value and pushes what Prune would make of it.
void Machine::MaybeSkipRecordValue() {
  if (pos_ >= bytes_.size()) return;
  const auto next = static_cast<uint8_t>(bytes_[pos_]);
  if (next == 'q' || next == 'r' || next == 0x94 || next == 'p') return;  // the key's own PUT first
  const size_t mark = marks_.back();
  if (mark == 0 || stack_.size() <= mark || (stack_.size() - mark) % 2 != 1 ||
      stack_[mark - 1]->type != PickleNode::Type::kDict || record_lists_.empty()) {
    return;
  }
  // The dict below the key's MARK is a record: an item of a record list, right above it (APPEND)
  // or above the list's own MARK (APPENDS).
  const size_t at = mark - 1;
  const bool record = (at >= 1 && IsRecordList(stack_[at - 1])) ||
                      (marks_.size() >= 2 && marks_[marks_.size() - 2] >= 1 && marks_[marks_.size() - 2] <= at &&
                       IsRecordList(stack_[marks_[marks_.size() - 2] - 1]));
  if (!record) return;
  const std::string& key = stack_.back()->text;
  const auto is = [&](const std::vector<std::string>& keys) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  if (is(options_.record_keys)) return;
  const bool length_only = is(options_.record_length_keys);
  SkipRun run;
  if (!SkipValue(run, length_only)) {
    // A file whose dropped values the skip mostly cannot follow is parsed without trying.
    ++doc_.skip_fallbacks;
    skip_off_ = doc_.skip_fallbacks > kSkipFallbacksTolerated && doc_.skip_fallbacks > doc_.skipped_values;
    keep_all_ = one_pass_;
    return;
  }
  if (one_pass_ && run.puts != 0) AddUnbuilt(memo_count_, run.puts, pos_, run.end - pos_, length_only);
  for (uint64_t i = 0; i < run.puts; ++i) {
    memo_indices_.Insert(memo_count_);
    ++memo_count_;
  }
  pos_ = run.end;
  ++doc_.skipped_values;
  watch_slot_ = stack_.size();  // where the value goes
  watch_mark_ = mark;
  if (!length_only) {
    Push(dropped_);
    return;
  }
  ChargeCopy(run.length * sizeof(PickleNode*), "a sweeps list's length");
  PickleNode* length = New(PickleNode::Type::kList);
  length->items.assign(run.length, dropped_);
  Push(length);
}

namespace {

// Follows one value's opcodes from an offset: the skip's own small stack machine, on tags
// (SkipTag) instead of values. Everything it cannot follow exactly as the machine runs it ends
// the skip (false), and the machine parses the value instead.
class ValueSkipper {
 public:
  ValueSkipper(std::string_view bytes, bool numpy, Machine& machine, const IndexSet& stored, uint64_t memo_count,
               const MemoFetches* fetches, std::vector<SkipSlot>& slots, std::vector<size_t>& marks)
      : data_(reinterpret_cast<const uint8_t*>(bytes.data())),
        size_(bytes.size()),
        numpy_(numpy),
        machine_(machine),
        stored_(stored),
        memo_count_(memo_count),
        fetches_(fetches),
        slots_(slots),
        marks_(marks) {
    if (slots_.size() < 256) slots_.resize(256);
    marks_.clear();
  }

  // Steps over the value starting at `from`; with `length_only`, it must be a list or tuple
  // (else the machine keeps it as it is, so its caller can say what it is).
  bool Run(uint64_t from, bool length_only, SkipRun& run) {
    end_ = from;
    length_only_ = length_only;
    for (;;) {
      if (end_ >= size_) return false;
      const uint8_t op = data_[end_];
      if (top_ == 1 && marks_.empty() && Ends(op)) break;
      ++end_;
      if (!Step(op)) return false;
    }
    if (length_only && slots_[0].tag != kListTag && slots_[0].tag != kTupleTag) return false;
    // The fresh indices it stored, none stored before (a hand-made file's explicit index) nor, with
    // the memo scan, read back: checked for all at once (Put checks each is the next). The one pass
    // keeps none of them: a read back outside a skip reads the file again (MemoNotKept).
    const uint64_t puts_end = memo_count_ + puts_;
    if (stored_.AnyIn(memo_count_, puts_end) || (fetches_ != nullptr && fetches_->AnyFetched(memo_count_, puts_end))) {
      return false;
    }
    run = SkipRun{end_, puts_, length_};
    return true;
  }

 private:
  // One opcode, in one dispatch (the opcodes info files are made of first). A memo PUT right
  // after a value is followed with it (PutAfter): what the loop would do next, as Ends is false
  // at a PUT.
  bool Step(uint8_t op) {
    switch (op) {
      case 'h':  // BINGET, LONG_BINGET
      case 'j':
        return Get(op);
      case 'q':  // BINPUT, LONG_BINPUT, MEMOIZE
      case 'r':
      case 0x94:
        return Put(op);
      case 'K':  // BININT1
        return Plain(1);
      case 'G':  // BINFLOAT
        return Plain(8);
      case 'N':  // NONE, NEWTRUE, NEWFALSE
      case 0x88:
      case 0x89:
        return Plain(0);
      case '(':  // MARK
        marks_.push_back(top_);
        return true;
      case 'R':
        return Reduce() && PutAfter();
      case 'b':
        return Build();
      case 'X':  // BINUNICODE
        return Sized(op) && PutAfter();
      case 0x85:  // TUPLE1-3
      case 0x86:
      case 0x87:
        return TupleOf(op - 0x84u) && PutAfter();
      case 't':  // TUPLE, LIST
      case 'l':
        return FromMark(op) && PutAfter();
      case '}':  // EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE
      case ']':
      case ')':
        return Empty(op) && PutAfter();
      case 'a':
        return Append();
      case 's':
        return SetItem();
      case 'e':  // APPENDS, SETITEMS
      case 'u':
        return AddFromMark(op);
      case '0':  // POP
        if (top_ <= Base()) return false;
        --top_;
        return true;
      case 0x95:  // FRAME
        if (size_ - end_ < 8 || LittleAt(data_ + end_, 8) > size_ - end_ - 8) return false;
        end_ += 8;
        return true;
      default:
        return Sized(op);
    }
  }

  // With the value whole on the stack: whether `op` starts what comes after it, the next key (a
  // str) or the record's SETITEMS. A callable, an object not yet built or an empty list or dict is
  // not whole yet: REDUCE, BUILD or APPEND(S) and SETITEM(S) may follow.
  bool Ends(uint8_t op) const {
    const SkipSlot& value = slots_[0];
    if (value.tag == kCallableTag || value.tag == kObjectTag || value.empty) return false;
    const uint64_t left = size_ - end_ - 1;
    switch (op) {
      case 'u':
      case 'X':
      case 0x8c:
      case 0x8d:
        return true;
      case 'h':
      case 'j': {
        if (left < (op == 'h' ? 1u : 4u)) return false;
        const MemoMap::Slot* slot = machine_.MemoSlot(op == 'h' ? data_[end_ + 1] : LittleAt(data_ + end_ + 1, 4));
        return slot != nullptr && slot->type == PickleNode::Type::kString;
      }
      default:
        return false;
    }
  }

  void Push(SkipSlot slot) {
    if (top_ == slots_.size()) slots_.resize(2 * slots_.size());
    slots_[top_++] = slot;
  }
  size_t Base() const { return marks_.empty() ? 0 : marks_.back(); }
  bool PopMark(size_t& mark) {
    if (marks_.empty()) return false;
    mark = marks_.back();
    marks_.pop_back();
    return true;
  }
  // The items slot 0 gains, which is what a sweeps list keeps.
  void Counted(size_t slot, uint64_t n) {
    if (slot == 0 && length_only_) length_ += n;
  }
  // A plain value with an argument of `n` bytes.
  bool Plain(uint64_t n) {
    if (size_ - end_ < n) return false;
    Push({kPlainTag, false, 0});
    end_ += n;
    return true;
  }
  // Any other plain value (PlainArgument), or false for an opcode the skip does not follow.
  bool Sized(uint8_t op) {
    if ((op == 0x8e || op == 0x96) && !numpy_) return false;  // refused by the machine
    const uint64_t argument = PlainArgument(op, data_ + end_, size_ - end_);
    if (argument == kNoStep) return false;
    Push({kPlainTag, false, 0});
    end_ += argument;
    return true;
  }
  bool PutAfter() {
    if (end_ >= size_ || (data_[end_] != 'r' && data_[end_] != 'q')) return true;
    return Put(data_[end_++]);
  }
  bool Empty(uint8_t op);
  bool TupleOf(size_t n);
  bool FromMark(uint8_t op);
  bool Append();
  bool SetItem();
  bool AddFromMark(uint8_t op);
  bool Put(uint8_t op);
  bool Get(uint8_t op);
  bool Reduce();
  bool Build() {
    // The state of an array or dtype REDUCE made in this value.
    if (top_ < Base() + 2 || slots_[top_ - 2].tag != kObjectTag) return false;
    --top_;
    slots_[top_ - 1].tag = kPlainTag;  // built: a second BUILD is the machine's error
    return true;
  }

  const uint8_t* data_;
  uint64_t size_;
  const bool numpy_;  // PickleOptions::numpy
  Machine& machine_;  // its memo (Machine::MemoSlot)
  const IndexSet& stored_;
  const uint64_t memo_count_;
  const MemoFetches* fetches_;  // null: the one pass (PickleOptions::memo_scan_first off)
  std::vector<SkipSlot>& slots_;
  std::vector<size_t>& marks_;
  size_t top_ = 0;
  uint64_t end_ = 0;
  bool length_only_ = false;
  uint64_t puts_ = 0;
  uint64_t length_ = 0;
};

// The container opcodes; false when the machine would refuse (or reach below the value's start,
// where the record's key is).
bool ValueSkipper::Empty(uint8_t op) {
  Push({op == '}' ? kDictTag : op == ']' ? kListTag : kTupleTag, op != ')', 0});
  if (top_ == 1) length_ = 0;
  return true;
}

bool ValueSkipper::TupleOf(size_t n) {
  if (top_ < Base() + n) return false;
  top_ -= n;
  if (top_ == 0) length_ = n;
  Push({kTupleTag, false, 0});
  return true;
}

bool ValueSkipper::FromMark(uint8_t op) {
  size_t mark = 0;
  if (!PopMark(mark)) return false;
  if (mark == 0) length_ = top_;
  top_ = mark;
  Push({op == 't' ? kTupleTag : kListTag, false, 0});
  return true;
}

// APPEND(S) and SETITEM(S): to a list or dict made in this value (one from the memo is shared).
bool ValueSkipper::Append() {
  if (top_ < Base() + 2 || slots_[top_ - 2].tag != kListTag) return false;
  --top_;
  slots_[top_ - 1].empty = false;
  Counted(top_ - 1, 1);
  return true;
}

bool ValueSkipper::SetItem() {
  if (top_ < Base() + 3 || slots_[top_ - 3].tag != kDictTag) return false;
  top_ -= 2;
  slots_[top_ - 1].empty = false;
  return true;
}

bool ValueSkipper::AddFromMark(uint8_t op) {
  size_t mark = 0;
  if (!PopMark(mark)) return false;
  const SkipTag container = op == 'e' ? kListTag : kDictTag;
  if (mark == 0 || mark <= Base() || slots_[mark - 1].tag != container) return false;
  if (op == 'u' && (top_ - mark) % 2 != 0) return false;
  if (op == 'e') Counted(mark - 1, top_ - mark);
  top_ = mark;
  slots_[top_ - 1].empty = false;
  return true;
}

// PUT of the fresh index Python's pickler writes next (Run checks that no GET reads it back).
bool ValueSkipper::Put(uint8_t op) {
  const uint64_t argument = op == 'q' ? 1 : op == 'r' ? 4 : 0;
  if (size_ - end_ < argument || top_ <= Base()) return false;
  const uint8_t* at = data_ + end_;
  const uint64_t index = op == 'q' ? at[0] : op == 'r' ? LittleAt(at, 4) : memo_count_ + puts_;
  if (index != memo_count_ + puts_) return false;
  ++puts_;
  end_ += argument;
  return true;
}

// GET of a stored value. The one pass also steps over a GET of a value it did not keep, stored
// before or earlier in this value (a scene's calibration list, shared by its frames' dropped
// cameras): as a plain value, which nothing adds to or calls (the machine then reads it, and the
// file is read again).
bool ValueSkipper::Get(uint8_t op) {
  const uint64_t argument = op == 'h' ? 1 : 4;
  if (size_ - end_ < argument) return false;
  const uint8_t* at = data_ + end_;
  const uint64_t index = op == 'h' ? at[0] : LittleAt(at, 4);
  const MemoMap::Slot* slot = machine_.MemoSlot(index);
  if (slot == nullptr || (slot->node == nullptr && slot->type != PickleNode::Type::kString)) {
    const bool stored = (index >= memo_count_ && index - memo_count_ < puts_) || stored_.Contains(index);
    if (fetches_ != nullptr || !stored || (top_ == 0 && length_only_)) return false;
    Push({kPlainTag, false, 0});
    end_ += argument;
    return true;
  }
  if (top_ == 0 && length_only_) {
    length_ = slot->node == nullptr ? 0 : slot->node->items.size();  // a tuple's, when a sweeps value is one
  }
  Push({TagOf(slot->type), false, slot->type == PickleNode::Type::kGlobal ? slot->node->integer : 0});
  end_ += argument;
  return true;
}

// REDUCE of an allowed global with a tuple of arguments: what it makes, by the global. The
// arguments themselves (an array's shape against its data, a dtype's name, Latin-1 text) are
// not read: that is the work a dropped value does not need.
bool ValueSkipper::Reduce() {
  if (top_ < Base() + 2 || slots_[top_ - 1].tag != kTupleTag || slots_[top_ - 2].tag != kCallableTag) return false;
  SkipTag made = kPlainTag;
  switch (GlobalKind(slots_[top_ - 2].global)) {
    case GlobalMakes::kBuildable:
      made = kObjectTag;
      break;
    case GlobalMakes::kDict:
      made = kDictTag;
      break;
    case GlobalMakes::kPlain:
      break;
    case GlobalMakes::kNotFollowed:
      return false;
  }
  --top_;
  slots_[top_ - 1] = {made, made == kDictTag, 0};
  return true;
}

}  // namespace

// Steps from pos_ over one value. False, with nothing changed, when the value is not one the skip
// follows exactly; else `run` holds where it ends, the fresh memo indices it stored (none read
// back) and, with `length_only`, the number of items of the list or tuple it is.
bool Machine::SkipValue(SkipRun& run, bool length_only) {
  ValueSkipper skipper(bytes_, options_.numpy, *this, memo_indices_, memo_count_, fetches_ ? &*fetches_ : nullptr,
                       skip_stack_, skip_marks_);
  return skipper.Run(pos_, length_only, run);
}

// An opcode reached the slot of the last value skipped (CheckWatch): the record's SETITEMS, which
// prunes it as the value it is, or a wrong prediction of where a value ended.
void Machine::WatchedSlotTouched(uint8_t op) {
  if (op == 'u' && !marks_.empty() && marks_.back() == watch_mark_) {
    watch_slot_ = kNoWatch;
    return;
  }
  throw SkipMispredicted{};
}

}  // namespace petrsim::pickle_internal
