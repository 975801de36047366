// Record mode's one pass (PickleOptions::memo_scan_first off; pickle_internal.h): what its memo
// keeps of a memoized value, and how a value read back is found again (a str made from its bytes,
// a dropped value the skip stepped over run again), or the file read again with the scan.
#include "formats/pickle/pickle_internal.h"

#include <algorithm>
#include <iterator>

namespace petrsim::pickle_internal {

namespace {
constexpr uint64_t kNoStr = UINT64_MAX;  // StrBeforePut: the PUT keeps something else
}  // namespace

// The one pass keeps a memoized str as the offset of the opcode that made it, and what costs a node
// or two (a global, a dtype, a number) as it is. A container, an array, bytes or a str dtype could
// hold a record or its data alive, or be many, and Python's info files read none of them back
// outside what is dropped: a GET of one reads the file again with the memo scan first (MemoNotKept).
void Machine::KeepOnePass(uint64_t index, PickleNode* top, bool fresh) {
  if (top == last_str_ && top->type == PickleNode::Type::kString) {
    if (!fresh || !AddUnbuilt(index, 1, last_str_offset_, 0)) {
      memo_.SetUnbuilt(index, PickleNode::Type::kString, last_str_offset_);
    }
    return;
  }
  bool keep = false;
  switch (top->type) {
    case PickleNode::Type::kNone:
    case PickleNode::Type::kBool:
    case PickleNode::Type::kInt:
    case PickleNode::Type::kFloat:
    case PickleNode::Type::kString:  // one read back already (so kept), memoized again
    case PickleNode::Type::kGlobal:
      keep = true;
      break;
    case PickleNode::Type::kNumpyDtype:
      // numpy's dtypes of a fixed size are singletons, read back by every array of theirs; a str
      // or bytes dtype ('<U12') is made for its array.
      keep = top->dtype.kind != 'U' && top->dtype.kind != 'S';
      break;
    case PickleNode::Type::kBytes:
      // CPython's bytes of length 0 and 1 are singletons (numpy's b'b' in every array's reduce);
      // an array's data is a fresh object each time.
      keep = top->text.size() <= 1;
      break;
    default:
      break;
  }
  if (keep_all_ && !keep) {
    // A replay's values stay (a second replay would make them again); a record's, to its end.
    const MemoMap::Slot* slot = memo_.Lookup(index);
    if (replaying_ && slot != nullptr && slot->node != nullptr) return;
    if (!replaying_) kept_for_record_.push_back(index);
    keep = true;
  }
  if (keep) {
    if (streaming_ && IsPool(top)) pool_escaped_ = true;  // the memo outlives the pool's batch (Collect)
    memo_.Set(index, top);
    if (IsYoung(top)) young_memo_.push_back(index);
  } else if (!fresh) {
    memo_.SetUnbuilt(index, PickleNode::Type::kDropped, 0);  // over what the index held before
  }
}

// At a record's SETITEMS: what was kept for a dropped value the skip could not follow is let go (a
// later record reading one back reads the file again), so that memory follows the records' kept
// values even where every record has such a value.
void Machine::EndRecordOnePass() {
  for (const uint64_t index : kept_for_record_) memo_.SetUnbuilt(index, PickleNode::Type::kDropped, 0);
  kept_for_record_.clear();
  keep_all_ = false;
}

PickleNode* Machine::FetchOnePass(uint64_t index) {
  const MemoMap::Slot* slot = MemoSlot(index);
  if (slot != nullptr && slot->node != nullptr) return slot->node;
  if (slot != nullptr && slot->type == PickleNode::Type::kString) {
    PickleNode* node = StrAt(slot->offset);
    memo_.Set(index, node);  // made once: later reads share it, as Python's do
    if (IsYoung(node)) young_memo_.push_back(index);
    return node;
  }
  if (const Unbuilt* skipped = UnbuiltAt(index); skipped != nullptr && skipped->length != 0) {
    Replay(*skipped);
    if (const MemoMap::Slot* replayed = memo_.Lookup(index); replayed != nullptr && replayed->node != nullptr) {
      return replayed->node;
    }
  }
  if (memo_indices_.Contains(index)) throw MemoNotKept{};
  return Memo(index);  // never stored: the machine's error
}

// False (nothing kept: a read back reads the file again) for a hand-made file's indices out of
// order, or a value of 2 GiB or more.
bool Machine::AddUnbuilt(uint64_t first, uint64_t puts, uint64_t from, uint64_t length, bool length_only) {
  if (puts > UINT32_MAX || length >= (uint64_t{1} << 31)) return false;
  if (!unbuilt_.empty() && first < unbuilt_.back().first + unbuilt_.back().puts) return false;
  unbuilt_.push_back({first, from, static_cast<uint32_t>(puts), static_cast<uint32_t>(length), length_only});
  return true;
}

const Machine::Unbuilt* Machine::UnbuiltAt(uint64_t index) const {
  const auto after = std::upper_bound(unbuilt_.begin(), unbuilt_.end(), index,
                                      [](uint64_t i, const Unbuilt& unbuilt) { return i < unbuilt.first; });
  if (after == unbuilt_.begin()) return nullptr;
  const Unbuilt& unbuilt = *std::prev(after);
  return index - unbuilt.first < unbuilt.puts ? &unbuilt : nullptr;
}

// Runs a value the skip stepped over again, as the machine would have run it there, keeping all
// it memoizes, then drops it: a dtype or numpy's b'b' first made in a dropped value, a list
// two dropped values share. Its reads back are the same values (Python shares them; the skip
// follows no change of one made before it), unless an index was stored twice (a hand-made file).
// Whatever goes wrong (an error in the content the skip did not read) reads the file again.
// (`skipped` is an element of unbuilt_, which a replay does not change: its PUTs are not fresh.)
void Machine::Replay(const Unbuilt& skipped) {
  if (memo_stored_again_ || replay_depth_ >= 16) throw MemoNotKept{};
  const uint64_t pos = pos_, op_offset = op_offset_, memo_count = memo_count_, stop_at = stop_at_;
  const uint64_t next_progress = next_progress_;
  const size_t watch_slot = watch_slot_, stack = stack_.size(), marks = marks_.size();
  const bool skip_off = skip_off_, keep_all = keep_all_, replaying = replaying_;
  marks_.push_back(stack);  // nothing below it is reached
  pos_ = skipped.from;
  memo_count_ = skipped.first;
  stop_at_ = skipped.from + skipped.length;
  next_progress_ = UINT64_MAX;
  watch_slot_ = kNoWatch;
  skip_off_ = keep_all_ = replaying_ = true;
  ++replay_depth_;
  try {
    Run();
  } catch (const PickleError&) {
    throw MemoNotKept{};
  }
  --replay_depth_;
  // The value as the skip stepped over it: one value, ending where the skip's did.
  if (pos_ != stop_at_ || stack_.size() != stack + 1 || marks_.size() != marks + 1 || marks_.back() != stack) {
    throw MemoNotKept{};
  }
  // A record keeps a length-only value's length as the skip counted it: one added to later (before
  // the record's SETITEMS, in a hand-made file) would be longer. So that value itself is not kept.
  if (skipped.length_only) {
    for (uint64_t index = skipped.first; index < skipped.first + skipped.puts; ++index) {
      const MemoMap::Slot* slot = memo_.Lookup(index);
      if (slot != nullptr && slot->node == stack_.back()) memo_.SetUnbuilt(index, PickleNode::Type::kDropped, 0);
    }
  }
  stack_.resize(stack);
  marks_.pop_back();
  pos_ = pos;
  op_offset_ = op_offset;
  memo_count_ = memo_count;
  stop_at_ = stop_at;
  next_progress_ = next_progress;
  watch_slot_ = watch_slot;
  skip_off_ = skip_off;
  keep_all_ = keep_all;
  replaying_ = replaying;
}

// A memo index without a slot (MemoSlot): found in unbuilt_ once, then a slot: a str as its offset,
// anything else as not kept (a read back replays it).
const MemoMap::Slot* Machine::LookupOnePass(uint64_t index) {
  const Unbuilt* unbuilt = UnbuiltAt(index);
  if (unbuilt == nullptr) return nullptr;
  const uint64_t at = unbuilt->length == 0 ? unbuilt->from : StrBeforePut(unbuilt->from, index - unbuilt->first);
  if (at == kNoStr) {
    memo_.SetUnbuilt(index, PickleNode::Type::kDropped, 0);
  } else {
    memo_.SetUnbuilt(index, PickleNode::Type::kString, at);
  }
  return memo_.Lookup(index);
}

// The offset of the str opcode right before the `put`th PUT (0: the first) of the value a skip
// stepped over from `from`, or kNoStr when another opcode is (the PUT keeps something else).
uint64_t Machine::StrBeforePut(uint64_t from, uint64_t put) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes_.data());
  uint64_t before = kNoStr;
  for (uint64_t pos = from, puts = 0;;) {
    // The skip stepped over these opcodes (sized, within the file) and their PUTs.
    PETRSIM_ASSERT(pos < bytes_.size());
    const uint8_t op = data[pos];
    if ((op == 'q' || op == 'r' || op == 0x94) && puts++ == put) {
      const uint8_t str = before == kNoStr ? 0 : data[before];
      return str == 'X' || str == 0x8c || str == 0x8d || str == 'T' || str == 'U' ? before : kNoStr;
    }
    const uint64_t step = SizedOpcodeBytes(data, bytes_.size(), pos);
    PETRSIM_ASSERT(step != 0);
    // Each value's PUTs are found again once (then kept as a slot), but a hand-made file could
    // read far into one long value many times: bounded as copies are (ChargeCopy).
    skipped_walked_ += step;
    if (skipped_walked_ > kCopyBytesPerInputByte * bytes_.size() + kCopyBytesSlack) throw MemoNotKept{};
    if (op != 0x95) before = pos;  // a FRAME may stand between a str and its MEMOIZE (protocol 4)
    pos += step;
  }
}

PickleNode* Machine::StrAt(uint64_t offset) {
  const uint64_t pos = pos_;
  const uint64_t op_offset = op_offset_;
  pos_ = offset;
  op_offset_ = offset;
  uint64_t n = 0;
  switch (U8()) {
    case 'X':  // BINUNICODE, BINSTRING
    case 'T':
      n = U32();
      break;
    case 0x8c:  // SHORT_BINUNICODE, SHORT_BINSTRING
    case 'U':
      n = U8();
      break;
    case 0x8d:  // BINUNICODE8
      n = U64();
      break;
    default:
      PETRSIM_ASSERT(false);  // only these make a str (KeepOnePass, StrBeforePut)
  }
  // One a skip stepped over was never checked: a str Python would refuse is the error of the read
  // with the memo scan first, which builds it where it is (and salvages from there).
  const auto* raw = reinterpret_cast<const uint8_t*>(bytes_.data() + pos_);
  if (n > Left() || (!IsLatin1Utf8(raw, n) && FirstInvalidUtf8(bytes_.substr(pos_, n)))) throw MemoNotKept{};
  PickleNode* node = Str(PickleNode::Type::kString, n);
  pos_ = pos;
  op_offset_ = op_offset;
  return node;
}

}  // namespace petrsim::pickle_internal
