// Record mode's first pass (MemoFetches, PickleOptions::memo_scan_first; pickle_internal.h): which
// memo indices the pickle reads back, found by stepping over its opcodes, in one thread or split
// between two; and the sizing of one opcode it shares with the one pass (SizedOpcodeBytes).
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

// The argument bytes of a kSized opcode (fixed, or a length prefix and that many), or kEnd when
// they run past the `left` bytes (the second pass stops there too).
uint64_t SizedArgument(const Argument& argument, const uint8_t* at, uint64_t left) {
  uint64_t bytes = argument.fixed;
  if (argument.length_bytes > 0) {
    if (left < static_cast<uint64_t>(argument.length_bytes)) return kEnd;
    const uint64_t length = Little(at, argument.length_bytes);
    if (length > left - argument.length_bytes) return kEnd;  // an 8-byte length would wrap the sum
    bytes = argument.length_bytes + length;
  }
  return bytes > left ? kEnd : bytes;
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
  return SizedArgument(argument, at, left);
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

uint64_t SizedOpcodeBytes(const uint8_t* data, uint64_t size, uint64_t pos) {
  const Argument argument = ArgumentOf(data[pos]);
  if (argument.skip != Skip::kSized && argument.skip != Skip::kBinGet && argument.skip != Skip::kLongBinGet) return 0;
  const uint64_t bytes = SizedArgument(argument, data + pos + 1, size - pos - 1);
  return bytes == kEnd ? 0 : 1 + bytes;
}

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

}  // namespace petrsim::pickle_internal
