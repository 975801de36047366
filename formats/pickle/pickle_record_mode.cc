// The pickle machine's record mode (PickleOptions::record_lists, pickle_internal.h): the one
// pass's memo (what it keeps, and the strs a skip stepped over found again), the first pass that
// finds the memo indices read back (PickleOptions::memo_scan_first), the pruning of records and
// the copying collection of the young nodes.
#include "formats/pickle/pickle_internal.h"

#include <atomic>
#include <cstring>
#include <system_error>
#include <thread>

namespace petrsim::pickle_internal {

namespace {

// How the first pass steps over an opcode's argument.
enum class Skip {
  kSized,       // `fixed` bytes, or a little-endian length of `length_bytes` bytes and that many
  kStop,        // STOP: the second pass ends here too
  kBinGet,      // BINGET: its 1-byte memo index is read back
  kLongBinGet,  // LONG_BINGET: its 4-byte memo index is read back
  kGet,         // GET: its decimal memo index line is read back
  kLine,        // a newline-terminated argument
  kTwoLines,    // two of them (GLOBAL, INST)
  kUnsized,     // an opcode the scan cannot size
};
struct Argument {
  Skip skip = Skip::kSized;
  uint64_t fixed = 0;    // argument bytes
  int length_bytes = 0;  // a length prefix of this many bytes, then that many bytes
};

// The opcodes of each kind of argument, as pickle_machine.cc reads them (and the opcodes it
// refuses): one table, so that an opcode is never in two groups by mistake.
struct OpcodeGroup {
  std::string_view ops;
  Argument argument;
};
constexpr OpcodeGroup kOpcodeGroups[] = {
    {".", {Skip::kStop}},
    // No argument: the stack and container opcodes, MEMOIZE, and the refused REDUCE, BUILD,
    // STACK_GLOBAL, NEWOBJ(_EX), OBJ, the sets, the buffers and BINPERSID.
    {"(012})]tldaesuN\x88\x89\x85\x86\x87\x94Rb\x93\x81\x92o\x8f\x90\x91\x97\x98Q", {Skip::kSized}},
    {"\x80Kq\x82", {Skip::kSized, 1}},
    {"h", {Skip::kBinGet, 1}},
    {"M\x83", {Skip::kSized, 2}},
    {"Jr\x84", {Skip::kSized, 4}},
    {"j", {Skip::kLongBinGet, 4}},
    {"G\x95", {Skip::kSized, 8}},
    {"\x8a\x8c"
     "CU",
     {Skip::kSized, 0, 1}},
    {"XBT\x8b", {Skip::kSized, 0, 4}},
    {"\x8d\x8e\x96", {Skip::kSized, 0, 8}},
    {"g", {Skip::kGet}},
    {"pILFSVP", {Skip::kLine}},
    {"ci", {Skip::kTwoLines}},
};

// The groups as a table by opcode, built once: the scan looks up every opcode of the file.
struct ArgumentTable {
  Argument by_op[256];
  constexpr ArgumentTable() {
    for (Argument& argument : by_op) argument = Argument{Skip::kUnsized};
    bool seen[256] = {};
    for (const OpcodeGroup& group : kOpcodeGroups) {
      for (const char op : group.ops) {
        // An opcode in two groups does not compile (a throw in a constant expression).
        if (seen[static_cast<uint8_t>(op)]) throw "an opcode in two groups";
        seen[static_cast<uint8_t>(op)] = true;
        by_op[static_cast<uint8_t>(op)] = group.argument;
      }
    }
  }
};
constexpr ArgumentTable kArguments;

Argument ArgumentOf(uint8_t op) { return kArguments.by_op[op]; }

}  // namespace

namespace {

constexpr uint64_t kUncommon = UINT64_MAX;  // an opcode CommonArgument leaves to the table
constexpr uint64_t kEnd = UINT64_MAX - 1;   // STOP, the end of the data inside an argument, or unsized

uint64_t Little(const uint8_t* at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) value |= uint64_t{at[i]} << (8 * i);
  return value;
}

// What one thread of the first pass finds: the memo indices read back, into `counts` (or, while
// `gets` is set, as (opcode offset, index) pairs: the helper's first opcodes, which count only
// from where the caller's thread meets them), and whether every opcode could be sized.
struct Tally {
  FetchCounts& counts;
  bool complete = true;
  std::vector<std::pair<uint64_t, uint64_t>>* gets = nullptr;
  uint64_t at = 0;  // the offset of the opcode being stepped over
  void Add(uint64_t index) {
    if (gets != nullptr) {
      gets->emplace_back(at, index);
    } else {
      counts.Add(index);
    }
  }
};

// The argument bytes of the opcodes info files are made of, sized inline (the table sizes the
// same way); a BINGET's index is added. `at`: the byte after the opcode, `left` bytes from it.
uint64_t CommonArgument(Tally& tally, uint8_t op, const uint8_t* at, uint64_t left) {
  uint64_t step = 0;
  switch (op) {
    case 'q':  // BINPUT
    case 'K':  // BININT1
      step = 1;
      break;
    case 'M':  // BININT2
      step = 2;
      break;
    case 'r':  // LONG_BINPUT
    case 'J':  // BININT
      step = 4;
      break;
    case 'G':  // BINFLOAT
      step = 8;
      break;
    case 'h':  // BINGET
      if (left < 1) return kEnd;
      tally.Add(at[0]);
      step = 1;
      break;
    case 0x8c:  // SHORT_BINUNICODE
      if (left < 1) return kEnd;
      step = 1 + uint64_t{at[0]};
      break;
    case 'X':  // BINUNICODE
      if (left < 4) return kEnd;
      step = 4 + Little(at, 4);
      break;
    case '(':
    case ')':
    case ']':
    case '}':
    case 'u':
    case 'e':
    case 'a':
    case 's':
    case 't':
    case 'N':
    case 0x85:
    case 0x86:
    case 0x87:
    case 0x88:
    case 0x89:
    case 0x94:
    case 'R':
    case 'b':
    case '0':
      return 0;
    default:
      return kUncommon;
  }
  return step > left ? kEnd : step;  // truncated: the second pass stops there too
}

// The same for every other opcode, by the table.
uint64_t TableArgument(Tally& tally, uint8_t op, const uint8_t* at, uint64_t left) {
  // Skips a newline-terminated argument from `from`; its length with the newline, or kEnd.
  const auto line = [&](uint64_t from) -> uint64_t {
    if (from > left) return kEnd;
    const void* end = std::memchr(at + from, '\n', left - from);
    return end == nullptr ? kEnd : static_cast<uint64_t>(static_cast<const uint8_t*>(end) - at) + 1 - from;
  };
  const Argument argument = ArgumentOf(op);
  uint64_t fixed = argument.fixed;
  switch (argument.skip) {
    case Skip::kSized:
      break;
    case Skip::kStop:
      return kEnd;
    case Skip::kBinGet:
      if (left < 1) return kEnd;
      tally.Add(at[0]);
      break;
    case Skip::kLongBinGet:
      if (left < 4) return kEnd;
      tally.Add(Little(at, 4));
      break;
    case Skip::kGet: {
      const uint64_t length = line(0);
      if (length == kEnd) return kEnd;
      uint64_t index = 0;
      bool digits = length > 1;
      for (uint64_t i = 0; i + 1 < length; ++i) {
        if (at[i] < '0' || at[i] > '9' || index > (uint64_t{1} << 56)) digits = false;
        index = index * 10 + (at[i] - '0');
      }
      if (digits) tally.Add(index);
      return length;
    }
    case Skip::kLine:
      return line(0);
    case Skip::kTwoLines: {
      const uint64_t first = line(0);
      if (first == kEnd) return kEnd;
      const uint64_t second = line(first);
      return second == kEnd ? kEnd : first + second;
    }
    case Skip::kUnsized:
      tally.complete = false;  // keep every memoized value
      return kEnd;
  }
  if (argument.length_bytes > 0) {
    if (left < static_cast<uint64_t>(argument.length_bytes)) return kEnd;
    const uint64_t length = Little(at, argument.length_bytes);
    if (length > left - argument.length_bytes) return kEnd;  // an 8-byte length would wrap the sum
    fixed = argument.length_bytes + length;
  }
  return fixed > left ? kEnd : fixed;  // truncated: the second pass stops there too
}

// A memo PUT right after a value (Python's pickler memoizes every container, str and call it
// writes): its bytes, so that the scan steps over the pair at once. `at` has 5 bytes.
uint64_t PutAfter(const uint8_t* at) {
  if (at[0] == 'r') return 5;  // LONG_BINPUT
  if (at[0] == 'q') return 2;  // BINPUT
  return 0;
}

// Bytes the fast stretch of the scan keeps from the end: every fixed argument and PUT it reads
// unchecked lies inside.
constexpr uint64_t kStretchMargin = 16;

// The opcodes info files are made of, stepped over from `pos` while it is below `stretch` (at
// least kStretchMargin bytes before the end), without a bounds check on their fixed arguments;
// a memo PUT after a value is stepped over with it. Returns where it stopped: at `stretch` or
// past it, or at an opcode the general step takes (CommonArgument, TableArgument), unread.
uint64_t ScanStretch(FetchCounts& counts, const uint8_t* data, uint64_t size, uint64_t pos, uint64_t stretch) {
  while (pos < stretch) {
    const uint8_t* at = data + pos + 1;
    switch (data[pos]) {
      case 'K':  // BININT1, BINPUT
      case 'q':
        pos += 2;
        break;
      case 'M':  // BININT2
        pos += 3;
        break;
      case 'J':  // BININT, LONG_BINPUT
      case 'r':
        pos += 5;
        break;
      case 'G':  // BINFLOAT
        pos += 9;
        break;
      case 'h':  // BINGET
        counts.Add(at[0]);
        pos += 2;
        break;
      case 'j':  // LONG_BINGET
        counts.Add(Little(at, 4));
        pos += 5;
        break;
      case 'X': {  // BINUNICODE, then its PUT
        const uint64_t n = 5 + Little(at, 4);
        if (n > size - pos) return pos;  // truncated: the general step ends the scan
        pos += n;
        if (pos < stretch) pos += PutAfter(data + pos);
        break;
      }
      case 0x8c:  // SHORT_BINUNICODE, LONG1
      case 0x8a:
        if (2 + uint64_t{at[0]} > size - pos) return pos;
        pos += 2 + uint64_t{at[0]};
        break;
      case '}':  // the containers, the tuples and REDUCE, then their PUT
      case ']':
      case ')':
      case 't':
      case 0x85:
      case 0x86:
      case 0x87:
      case 'R':
        pos += 1 + PutAfter(at);
        break;
      case '(':
      case 'u':
      case 'e':
      case 'a':
      case 's':
      case 'N':
      case 0x88:
      case 0x89:
      case 'b':
      case '0':
      case 0x94:
        pos += 1;
        break;
      default:
        return pos;
    }
  }
  return pos;
}

// One opcode at `pos`, by the general step: the offset after it, or kEnd where the pass ends.
uint64_t StepOne(Tally& tally, const uint8_t* data, uint64_t size, uint64_t pos) {
  tally.at = pos;
  const uint8_t op = data[pos];
  uint64_t step = CommonArgument(tally, op, data + pos + 1, size - pos - 1);
  if (step == kUncommon) step = TableArgument(tally, op, data + pos + 1, size - pos - 1);
  return step == kEnd ? kEnd : pos + 1 + step;
}

// The pass from `pos` until `limit` or the end: the offset it stopped at, or kEnd where the pass
// ended (STOP, an argument cut short, an opcode it cannot size). `progress` is called every
// `progress_bytes` with the offset reached; when it returns false, the pass stops there.
uint64_t ScanRange(Tally& tally, const uint8_t* data, uint64_t size, uint64_t pos, uint64_t limit,
                   uint64_t progress_bytes, const std::function<bool(uint64_t)>& progress) {
  const uint64_t stretch_end = size > kStretchMargin ? size - kStretchMargin : 0;
  uint64_t next_progress = pos + progress_bytes;
  while (pos < limit && pos < size) {
    if (pos >= next_progress) {
      if (!progress(pos)) return pos;
      next_progress = pos + progress_bytes;
    }
    const uint64_t stretch = std::min({next_progress, stretch_end, limit});
    if (pos < stretch) {
      pos = ScanStretch(tally.counts, data, size, pos, stretch);
      if (pos >= stretch) continue;
    }
    // An opcode the stretch leaves, or one in the last bytes.
    pos = StepOne(tally, data, size, pos);
    if (pos == kEnd) return kEnd;
  }
  return pos;
}

// A guess's argument line must end within this many bytes (PlausibleStart).
constexpr uint64_t kTrialLineBytes = 4096;
// The work the helper may spend finding where to start: opcodes, and bytes searched / 64.
constexpr uint64_t kTrialWork = uint64_t{1} << 20;

// One opcode of a guess (PlausibleStart): StepOne, except that an argument line must end within
// kTrialLineBytes (a guess inside a long text would search the rest of the file for a newline).
// `work` grows by one and by the bytes searched / 64.
uint64_t TrialStep(Tally& tally, const uint8_t* data, uint64_t size, uint64_t pos, uint64_t& work) {
  ++work;
  const Skip kind = ArgumentOf(data[pos]).skip;
  const int lines = kind == Skip::kTwoLines ? 2 : kind == Skip::kLine || kind == Skip::kGet ? 1 : 0;
  uint64_t from = pos + 1;
  for (int line = 0; line < lines; ++line) {
    const uint64_t window = std::min<uint64_t>(size - from, kTrialLineBytes);
    const void* end = std::memchr(data + from, '\n', window);
    if (end == nullptr) {
      work += window / 64;
      return kEnd;
    }
    const auto at = static_cast<uint64_t>(static_cast<const uint8_t*>(end) - data);
    work += (at - from) / 64;
    from = at + 1;
  }
  return StepOne(tally, data, size, pos);
}

// The second thread of a split first pass (ScanSplit): from a plausible opcode at or after its
// offset to the end, its first opcodes' offsets and reads back kept apart (head, head_gets) for
// the caller's thread to meet. It stops where the caller's thread says `abandon`.
struct Helper {
  Helper(uint64_t dense_max, const ScanSplit& split) : split(split), counts(dense_max), tally{counts} {}
  void Run(const uint8_t* data, uint64_t size, uint64_t from,
           const std::function<void(uint64_t, uint64_t)>& release_range) {
    try {
      Walk(data, size, from, release_range);
    } catch (...) {  // memory for the counts: the caller's thread goes on alone
      failed = true;
      head_ready.store(true, std::memory_order_release);
      head_ready.notify_one();
    }
  }
  void Walk(const uint8_t* data, uint64_t size, uint64_t from,
            const std::function<void(uint64_t, uint64_t)>& release_range) {
    uint64_t pos = PlausibleStart(data, size, from);
    tally.gets = &head_gets;
    for (uint64_t n = 0; n < split.head_opcodes && pos != kEnd && pos < size && !Abandoned(); ++n) {
      head.push_back(pos);
      pos = StepOne(tally, data, size, pos);
    }
    tally.gets = nullptr;
    head_ready.store(true, std::memory_order_release);
    head_ready.notify_one();
    if (pos == kEnd || pos >= size) return;
    uint64_t released = from;
    ScanRange(tally, data, size, pos, size, split.progress_bytes, [&](uint64_t reached) {
      if (Abandoned()) return false;
      if (release_range) release_range(released, reached);
      released = reached;
      return true;
    });
  }
  bool Abandoned() const { return abandon.load(std::memory_order_relaxed); }

  // The first offset from `from` where `trial_opcodes` opcodes follow one another (or run to the
  // end): a guess at where an opcode starts (an offset inside a str or an array's bytes mostly
  // meets a byte that is no opcode within a few). kEnd when none is found within kTrialWork (a
  // hand-made file can make every guess fail late), so that the caller's thread, which waits
  // for the helper's first opcodes, waits milliseconds at most.
  uint64_t PlausibleStart(const uint8_t* data, uint64_t size, uint64_t from) {
    std::vector<std::pair<uint64_t, uint64_t>> scratch;
    FetchCounts none(0);
    uint64_t work = 0;
    for (uint64_t start = from; start < size && work < kTrialWork && !Abandoned(); ++start) {
      Tally trial{none};
      trial.gets = &scratch;
      uint64_t pos = start;
      uint64_t n = 0;
      for (; n < split.trial_opcodes && pos != kEnd && pos < size; ++n) pos = TrialStep(trial, data, size, pos, work);
      scratch.clear();
      if (pos == size || (pos != kEnd && n == split.trial_opcodes)) return start;
    }
    return kEnd;
  }

  const ScanSplit& split;
  FetchCounts counts;
  Tally tally;
  std::vector<uint64_t> head;
  std::vector<std::pair<uint64_t, uint64_t>> head_gets;
  std::atomic<bool> head_ready{false};
  std::atomic<bool> abandon{false};
  bool failed = false;  // set before head_ready, or read after the join
};

}  // namespace

void MemoFetches::Scan(std::string_view bytes, const std::function<void(uint64_t)>& release,
                       const std::function<void(uint64_t, uint64_t)>& release_range, const ScanSplit& split) {
  const uint64_t at = split.at != 0 ? split.at : bytes.size() / 2;
  const bool two = bytes.size() >= split.from_bytes && at > 0 && at < bytes.size() &&
                   (split.from_bytes == 0 || std::thread::hardware_concurrency() > 1);
  const std::function<bool(uint64_t)> progress = [&](uint64_t reached) {
    if (release) release(reached);
    return true;
  };
  if (two && ScanWithHelper(bytes, progress, release_range, split, at)) return;
  Tally tally{counts_};
  ScanRange(tally, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0, bytes.size(), split.progress_bytes,
            progress);
  complete_ = tally.complete;
}

// The split pass; false, with nothing counted, when no second thread could be started.
bool MemoFetches::ScanWithHelper(std::string_view bytes, const std::function<bool(uint64_t)>& progress,
                                 const std::function<void(uint64_t, uint64_t)>& release_range, const ScanSplit& split,
                                 uint64_t at) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint64_t size = bytes.size();
  Helper helper(size, split);
  std::thread thread;
  try {
    thread = std::thread([&] { helper.Run(data, size, at, release_range); });
  } catch (const std::system_error&) {
    return false;
  }
  // Whatever happens here (an allocation that fails), the helper is stopped and joined.
  struct Joiner {
    Helper& helper;
    std::thread& thread;
    ~Joiner() {
      if (!thread.joinable()) return;
      helper.abandon.store(true, std::memory_order_relaxed);
      thread.join();
    }
  } joiner{helper, thread};
  Tally tally{counts_};
  uint64_t pos = ScanRange(tally, data, size, 0, at, split.progress_bytes, progress);
  // Step on until an opcode the helper stepped on, or past its first ones (not waiting for them
  // when the pass ended before the split).
  bool met = false;
  if (pos != kEnd && pos < size) {
    helper.head_ready.wait(false, std::memory_order_acquire);
    size_t i = 0;
    while (pos != kEnd && pos < size) {
      while (i < helper.head.size() && helper.head[i] < pos) ++i;
      if (i == helper.head.size()) break;
      if (helper.head[i] == pos) {
        met = true;
        break;
      }
      pos = StepOne(tally, data, size, pos);
    }
  }
  if (!met) helper.abandon.store(true, std::memory_order_relaxed);
  thread.join();
  if (met && !helper.failed) {
    counts_.Merge(helper.counts);
    for (const auto& [offset, index] : helper.head_gets) {
      if (offset >= pos) counts_.Add(index);
    }
    complete_ = tally.complete && helper.tally.complete;
    split_ = true;
    return true;
  }
  if (pos != kEnd && pos < size) pos = ScanRange(tally, data, size, pos, size, split.progress_bytes, progress);
  complete_ = tally.complete;
  return true;
}

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
    if (replaying_ && memo_.Lookup(index) != nullptr && memo_.Lookup(index)->node != nullptr) return;
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
  if (at == kEnd) {
    memo_.SetUnbuilt(index, PickleNode::Type::kDropped, 0);
  } else {
    memo_.SetUnbuilt(index, PickleNode::Type::kString, at);
  }
  return memo_.Lookup(index);
}

// The offset of the str opcode right before the `put`th PUT (0: the first) of the value a skip
// stepped over from `from`, or kEnd when another opcode is (the PUT keeps something else).
uint64_t Machine::StrBeforePut(uint64_t from, uint64_t put) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes_.data());
  uint64_t before = kEnd;
  for (uint64_t pos = from, puts = 0;;) {
    // The skip stepped over these opcodes (sized, within the file) and their PUTs.
    PETRSIM_ASSERT(pos < bytes_.size());
    const uint8_t op = data[pos];
    if (op == 'q' || op == 'r' || op == 0x94) {
      if (puts++ == put) {
        const uint8_t str = before == kEnd ? 0 : data[before];
        return str == 'X' || str == 0x8c || str == 0x8d || str == 'T' || str == 'U' ? before : kEnd;
      }
    }
    if (op == 0x95) {  // FRAME, between a str and its MEMOIZE in protocol 4
      pos += 9;
      continue;
    }
    const Argument argument = ArgumentOf(op);
    uint64_t step = 1 + argument.fixed;
    if (argument.length_bytes != 0) step += argument.length_bytes + Little(data + pos + 1, argument.length_bytes);
    PETRSIM_ASSERT(argument.skip != Skip::kLine && argument.skip != Skip::kTwoLines && argument.skip != Skip::kGet &&
                   argument.skip != Skip::kUnsized);
    // Each value's PUTs are found again once (then kept as a slot), but a hand-made file could
    // read far into one long value many times: bounded as copies are (ChargeCopy).
    skipped_walked_ += step;
    if (skipped_walked_ > kCopyBytesPerInputByte * bytes_.size() + kCopyBytesSlack) throw MemoNotKept{};
    before = pos;
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

// At EMPTY_LIST: whether the new list is the value of a record_lists key of the top-level dict
// (stack: the dict, then its MARK and keys and values, the key last; or the dict and the key),
// or, with record_top_list, the top-level value itself.
bool Machine::IsRecordListKey() const {
  if (replaying_) return false;  // a dropped value, inside a record where it was (Replay)
  if (options_.record_top_list && stack_.empty() && marks_.empty()) return true;  // the top-level list
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
bool Machine::IsRecordList(const PickleNode* node) const {
  return std::find(record_lists_.begin(), record_lists_.end(), node) != record_lists_.end();
}
// Whether the dict at stack position `at` is an item being added to a record list: right above
// the list (APPEND), or anywhere above the list's MARK (APPENDS).
bool Machine::IsRecordPosition(size_t at) const {
  if (replaying_) return false;  // a dropped value holds no record (Replay)
  if (record_lists_.empty() || stack_[at]->type != PickleNode::Type::kDict) return false;
  if (at >= 1 && IsRecordList(stack_[at - 1])) return true;
  return !marks_.empty() && marks_.back() >= 1 && marks_.back() <= at && IsRecordList(stack_[marks_.back() - 1]);
}
// The value a record keeps for `key`.
PickleNode* Machine::Prune(PickleNode* key, PickleNode* value) {
  if (key->type != PickleNode::Type::kString) return dropped_;
  const auto is = [&](const std::vector<std::string>& keys) {
    return std::find(keys.begin(), keys.end(), key->text) != keys.end();
  };
  if (is(options_.record_keys)) return value;
  if (is(options_.record_length_keys)) {
    if (!value->is_sequence()) return value;  // kept as it is, so the caller can say what it is
    if (value->type == PickleNode::Type::kList && (value->items.empty() || value->items[0] == dropped_)) {
      return value;  // already its length only (the skip made it)
    }
    ChargeCopy(value->items.size() * sizeof(PickleNode*), "a sweeps list's length");
    PickleNode* length_only = New(PickleNode::Type::kList);
    length_only->items.assign(value->items.size(), dropped_);
    return length_only;
  }
  return dropped_;
}
// APPEND and APPENDS.
void Machine::AddItems(PickleNode* list, PickleNode* const* first, PickleNode* const* last) {
  Changed(list);
  if (!streaming_ || !IsRecordList(list)) {
    list->items.insert(list->items.end(), first, last);
    CheckRecordCount(list);
    return;
  }
  // The limit before any of these records is handed over (an error halfway would leave the stack half added).
  CheckRecordCount(list, static_cast<uint64_t>(last - first));
  for (; first != last; ++first) {
    const uint64_t index = list->items.size();
    list->items.push_back(dropped_);  // the list keeps its length, not the record
    CheckRecordCount(list);           // before the caller reads a record beyond the limit
    options_.on_record(**first, index);
    MarkHanded(*first);
  }
  collect_pending_ = true;  // the records handed over are garbage now, and the pool free again
}
// Every node of a handed record is marked, once (shared values and cycles are met again, marked).
void Machine::MarkHanded(PickleNode* record) {
  std::vector<PickleNode*> to_mark{record};
  while (!to_mark.empty()) {
    PickleNode* node = to_mark.back();
    to_mark.pop_back();
    // A kept value may lead back to the record list itself (a cycle): the list still grows, it is not the record's.
    if (node->handed || node == dropped_ || IsRecordList(node)) continue;
    node->handed = true;
    to_mark.insert(to_mark.end(), node->items.begin(), node->items.end());
    for (const auto& [key, value] : node->entries) {
      to_mark.push_back(key);
      to_mark.push_back(value);
    }
  }
}
// The values above the lowest record list on the stack are its records to come (or parts of them).
size_t Machine::RecordRegion() const {
  for (size_t i = 1; i < stack_.size(); ++i) {
    if (IsRecordList(stack_[i - 1])) return i;
  }
  return stack_.size();
}
// No record waits on the stack: the pool's nodes are garbage, unless something else points to them.
void Machine::ReleasePool() {
  if (pool_escaped_) {
    for (size_t i = 0; i < pool_used_; ++i) {
      pool_set_.erase(pool_[i].get());
      doc_.arena.push_back(std::move(pool_[i]));
    }
    pool_.erase(pool_.begin(), pool_.begin() + static_cast<std::ptrdiff_t>(pool_used_));
    pool_escaped_ = false;
  }
  pool_used_ = 0;
}
// The old copy of a young node (made once, in the pool or the document's arena), or the node
// itself when old. A reference from outside the pool into it marks the pool escaped.
void Machine::Forward(PickleNode*& node, bool to_pool) {
  if (!IsYoung(node)) {
    if (streaming_ && !to_pool && IsPool(node)) pool_escaped_ = true;
    return;
  }
  const size_t index = static_cast<size_t>(node - slab_.data());
  PETRSIM_ASSERT(index < slab_used_);  // a young node reachable now was made since the last collection
  if (forwarded_[index] == nullptr) {
    PickleNode* old = to_pool ? PoolNode() : OldNode();
    *old = *node;  // a copy: the slab node keeps its capacity for reuse
    forwarded_[index] = old;
    (to_pool ? pool_scan_ : to_scan_).push_back(old);
  } else if (streaming_ && !to_pool && IsPool(forwarded_[index])) {
    pool_escaped_ = true;
  }
  node = forwarded_[index];
  PETRSIM_ASSERT(!IsYoung(node));
}
// The children old containers gained since the last collection: those of the pool's or of the arena's.
void Machine::ForwardChanged(bool pool) {
  for (const Remembered& changed : remembered_) {
    if (streaming_ && IsPool(changed.node) != pool) continue;
    for (size_t i = changed.items_from; i < changed.node->items.size(); ++i) Forward(changed.node->items[i], pool);
    for (size_t i = changed.entries_from; i < changed.node->entries.size(); ++i) {
      Forward(changed.node->entries[i].first, pool);
      Forward(changed.node->entries[i].second, pool);
    }
  }
  std::vector<PickleNode*>& scan = pool ? pool_scan_ : to_scan_;
  while (!scan.empty()) {
    PickleNode* node = scan.back();
    scan.pop_back();
    for (PickleNode*& item : node->items) Forward(item, pool);
    for (auto& [key, value] : node->entries) {
      Forward(key, pool);
      Forward(value, pool);
    }
  }
}
// Between opcodes (nothing is held outside the stack and the memo then).
void Machine::Collect() {
  collecting_ = true;
  // Only what changed since the last collection can point into the slab: the stack above the
  // part that stayed, the memo entries stored since, the containers that gained children. The
  // arena's roots first, so that what they share with a waiting record is the arena's.
  const size_t region = streaming_ ? RecordRegion() : stack_.size();
  const size_t stayed = std::min(stack_old_, stack_.size());
  for (const uint64_t index : young_memo_) {
    PickleNode** node = memo_.Find(index);
    if (node != nullptr && *node != nullptr) Forward(*node);  // (a value not kept since: none)
  }
  young_memo_.clear();
  last_str_ = nullptr;  // its slab slot is reused from here
  for (PickleNode*& node : record_lists_) Forward(node);
  for (size_t i = stayed; i < std::min(region, stack_.size()); ++i) Forward(stack_[i]);
  ForwardChanged(false);
  if (streaming_) {
    for (size_t i = std::max(stayed, region); i < stack_.size(); ++i) Forward(stack_[i], true);
    ForwardChanged(true);
    if (region >= stack_.size()) ReleasePool();
  }
  stack_old_ = stack_.size();
  std::fill(forwarded_.begin(), forwarded_.begin() + static_cast<std::ptrdiff_t>(slab_used_), nullptr);
  slab_used_ = 0;
  remembered_.clear();
  collect_pending_ = false;
  collecting_ = false;
}
// Machine::Salvage with records: the records waiting for their APPENDS are handed over and a half-built record
// pruned (Salvage does both in record mode), then the young nodes the document keeps are forwarded (the slab dies with
// the machine).
PickleNode* Machine::SalvageRecords() {
  if (collecting_ || stack_.empty()) return nullptr;
  Salvage();
  if (stack_.empty()) return nullptr;
  stack_.erase(stack_.begin() + 1, stack_.end());  // what Salvage returns; the rest dies with the machine
  stack_old_ = 0;
  Collect();
  return stack_.front();
}

}  // namespace petrsim::pickle_internal
