// Internals of the pickle reader (pickle.h), shared by its files and by nothing else: the pickle
// machine (pickle_machine.cc runs its opcodes, pickle_record_mode.cc holds record mode, its memo
// pickle_one_pass.cc and the first pass pickle_memo_scan.cc, pickle_numpy_globals.cc the numpy
// globals), its memo index sets and Printable.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/assert.h"
#include "base/utf8.h"
#include "formats/pickle/latin1.h"
#include "formats/pickle/pickle.h"

namespace petrsim::pickle_internal {

// A name from the file, safe to print: printable ASCII, at most 80 characters.
std::string Printable(std::string_view text);

// Whether any index in [from, to) is marked: in `words` up to `dense_max`, `kBits` bits per index
// whose lowest is the mark, a word at a time; above, in the hash container `far`.
template <unsigned kBits, typename Far>
bool AnyMarkedIn(const std::vector<uint64_t>& words, uint64_t dense_max, const Far& far, uint64_t from, uint64_t to) {
  constexpr uint64_t kPerWord = 64 / kBits;
  constexpr uint64_t kMarks = kBits == 1 ? ~uint64_t{0} : 0x5555555555555555ull;
  static_assert(kBits == 1 || kBits == 2);
  for (uint64_t index = from; index < to;) {
    if (index > dense_max) {
      if (far.empty()) return false;
      if (far.count(index++) != 0) return true;
      continue;
    }
    const uint64_t word = index / kPerWord;
    if (word >= words.size()) {
      index = dense_max + 1;  // no dense index from here on is marked
      continue;
    }
    const uint64_t last = std::min({to, (word + 1) * kPerWord, dense_max + 1});
    const uint64_t bits = (last - index) * kBits;
    const uint64_t span = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    if ((words[word] & (span << (index % kPerWord * kBits)) & kMarks) != 0) return true;
    index = last;
  }
  return false;
}

// A set of memo indices. Python's are dense (0, 1, 2, ...), so a bit per index up to the largest,
// in words the set tests and sets without a branch on the bit (the first pass adds one for every
// GET of the file, the machine one for every PUT); a hand-made file's far indices (a memo entry
// costs at least a byte) go to a hash set.
class IndexSet {
 public:
  explicit IndexSet(uint64_t dense_max) : dense_max_(dense_max) {}
  // Adds `index`; true when it was not there.
  bool Insert(uint64_t index) {
    if (index > dense_max_) return large_.insert(index).second;
    const uint64_t word = index >> 6;
    if (word >= words_.size()) {
      words_.resize(std::min(std::max<uint64_t>(word + 1, words_.size() * 2), (dense_max_ >> 6) + 1), 0);
    }
    const uint64_t bit = uint64_t{1} << (index & 63);
    const bool fresh = (words_[word] & bit) == 0;
    words_[word] |= bit;
    return fresh;
  }
  bool Contains(uint64_t index) const {
    const uint64_t word = index >> 6;
    if (word < words_.size() && index <= dense_max_) return (words_[word] >> (index & 63)) & 1;
    return index > dense_max_ && large_.count(index) != 0;
  }
  // Whether any index in [from, to) is in the set.
  bool AnyIn(uint64_t from, uint64_t to) const { return AnyMarkedIn<1>(words_, dense_max_, large_, from, to); }

 private:
  uint64_t dense_max_;
  std::vector<uint64_t> words_;
  std::unordered_set<uint64_t> large_;
};

// The memo: index -> value (and its type, so that record mode's skip reads it without the node). Open addressing with
// linear probing in a power-of-two table (a Python memo holds millions of entries, and record mode looks one up for
// every key it reads).
class MemoMap {
 public:
  // The stored value's slot, or null when `index` was never stored. Record mode's one pass
  // (PickleOptions::memo_scan_first off) keeps a str as its opcode's offset (`node` null, `type`
  // kString), and marks an index whose value it does not keep (stored over a kept one, found among
  // a skip's, let go at its record's end) with `node` null and `type` kDropped.
  struct Slot {
    uint64_t index = kEmpty;
    PickleNode* node = nullptr;
    PickleNode::Type type = PickleNode::Type::kNone;  // the node's (a type never changes), read without it
    uint64_t offset = 0;                              // a str kept as its opcode's offset
  };
  // The stored value's slot, or null when nothing is kept for `index`.
  const Slot* Lookup(uint64_t index) const {
    if (slots_.empty()) return nullptr;
    for (size_t at = Home(index);; at = (at + 1) & (slots_.size() - 1)) {
      if (slots_[at].index == index) return &slots_[at];
      if (slots_[at].index == kEmpty) return nullptr;
    }
  }
  PickleNode** Find(uint64_t index) {
    const Slot* slot = Lookup(index);
    return slot == nullptr ? nullptr : &const_cast<Slot*>(slot)->node;
  }
  void Set(uint64_t index, PickleNode* node) { Set(index, node, node->type, 0); }
  // A value kept without its node (see Slot).
  void SetUnbuilt(uint64_t index, PickleNode::Type type, uint64_t offset) { Set(index, nullptr, type, offset); }
  void Set(uint64_t index, PickleNode* node, PickleNode::Type type, uint64_t offset) {
    PETRSIM_ASSERT(index != kEmpty);  // indices are below 2^63 (ParseDecimal, 32-bit opcodes, len(memo))
    if (const Slot* slot = Lookup(index)) {
      *const_cast<Slot*>(slot) = {index, node, type, offset};
      return;
    }
    if ((used_ + 1) * 4 > slots_.size() * 3) Grow();
    size_t at = Home(index);
    while (slots_[at].index != kEmpty) at = (at + 1) & (slots_.size() - 1);
    slots_[at] = {index, node, type, offset};
    ++used_;
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  size_t Home(uint64_t index) const { return (index * 0x9E3779B97F4A7C15ull) >> shift_; }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    shift_ = 64 - std::countr_zero(slots_.size());
    used_ = 0;
    for (const Slot& slot : old) {
      if (slot.index != kEmpty) Set(slot.index, slot.node, slot.type, slot.offset);
    }
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
  int shift_ = 64;
};

// How often each memo index is read back (GET, BINGET, LONG_BINGET): never, once, or more. Two
// bits per index up to the largest, counted without a branch (the first pass counts every GET of
// the file); a hand-made file's far indices go to a hash map.
class FetchCounts {
 public:
  explicit FetchCounts(uint64_t dense_max) : dense_max_(dense_max) {}
  void Add(uint64_t index) {
    if (index > dense_max_) {
      ++far_[index];
      return;
    }
    const uint64_t word = index >> 5;
    if (word >= words_.size()) {
      words_.resize(std::min(std::max<uint64_t>(word + 1, words_.size() * 2), (dense_max_ >> 5) + 1), 0);
    }
    // Bit 2i: read back; bit 2i + 1: read back before (set from bit 2i as it was).
    const unsigned shift = static_cast<unsigned>(index & 31) * 2;
    uint64_t& bits = words_[word];
    bits |= (((bits >> shift) & 1) << (shift + 1)) | (uint64_t{1} << shift);
  }
  // Whether any index in [from, to) is read back.
  bool AnyIn(uint64_t from, uint64_t to) const { return AnyMarkedIn<2>(words_, dense_max_, far_, from, to); }
  // Adds another count's reads back (of the same file's other part).
  void Merge(const FetchCounts& other) {
    if (words_.size() < other.words_.size()) words_.resize(other.words_.size(), 0);
    for (size_t w = 0; w < other.words_.size(); ++w) {
      const uint64_t a = words_[w];
      const uint64_t b = other.words_[w];
      // Read back: in either; more than once: in either more than once, or once in each.
      words_[w] = a | b | ((a & b & 0x5555555555555555ull) << 1);
    }
    for (const auto& [index, count] : other.far_) far_[index] += count;
  }
  // 0, 1, or 2 for more than once.
  unsigned Count(uint64_t index) const {
    if (index > dense_max_) {
      const auto found = far_.find(index);
      return found == far_.end() ? 0 : static_cast<unsigned>(std::min<uint64_t>(found->second, 2));
    }
    const uint64_t word = index >> 5;
    if (word >= words_.size()) return 0;
    const uint64_t bits = (words_[word] >> (static_cast<unsigned>(index & 31) * 2)) & 3;
    return bits == 0 ? 0 : bits == 1 ? 1 : 2;
  }

 private:
  uint64_t dense_max_;
  std::vector<uint64_t> words_;
  std::unordered_map<uint64_t, uint64_t> far_;
};

// How record mode's first pass (MemoFetches) is split between two threads: a file of
// `from_bytes` or more is scanned by a helper from a plausible opcode at or after `at` (0: the
// middle; one where `trial_opcodes` opcodes follow one another) to the end, and by the caller's
// thread from the start until it steps on one of the first `head_opcodes` opcodes the helper
// stepped on (then the rest is the helper's, and the counts are the same as one pass would make)
// or past them (then the helper's counts are dropped and the caller's thread goes on alone).
// `progress_bytes`: how often each thread releases what it has passed. The defaults are the
// reader's; tests pick small ones.
struct ScanSplit {
  uint64_t from_bytes = uint64_t{64} << 20;
  uint64_t at = 0;
  uint64_t head_opcodes = 4096;
  uint64_t trial_opcodes = 256;
  uint64_t progress_bytes = kPickleProgressBytes;
};

// Which memo indices the pickle ever reads back, found by a first pass over the opcodes; record
// mode with PickleOptions::memo_scan_first (a file the one pass reads again) stores only those. `complete` is false
// when the scan met an opcode it cannot size: then every memoized value must be kept.
class MemoFetches {
 public:
  // `release`: PickleOptions::release, called as the scan moves on; `release_range`:
  // PickleOptions::release_range, called by the helper (ScanSplit).
  MemoFetches(std::string_view bytes, const std::function<void(uint64_t)>& release,
              const std::function<void(uint64_t, uint64_t)>& release_range, const ScanSplit& split = {})
      : counts_(bytes.size()) {
    Scan(bytes, release, release_range, split);
  }
  bool Fetched(uint64_t index) const { return !complete_ || counts_.Count(index) != 0; }
  // Whether any index in [from, to) is read back.
  bool AnyFetched(uint64_t from, uint64_t to) const { return from < to && (!complete_ || counts_.AnyIn(from, to)); }
  // Read back by exactly one GET of the file: after it, nothing reads the value through the memo.
  bool FetchedOnce(uint64_t index) const { return complete_ && counts_.Count(index) == 1; }
  // Whether the last scan was split between two threads (the helper's counts kept).
  bool split() const { return split_; }

 private:
  // pickle_memo_scan.cc: the pass, alone or with the helper.
  void Scan(std::string_view bytes, const std::function<void(uint64_t)>& release,
            const std::function<void(uint64_t, uint64_t)>& release_range, const ScanSplit& split);
  // `progress`: the caller's thread's release, as ScanRange calls it.
  bool ScanWithHelper(std::string_view bytes, const std::function<bool(uint64_t)>& progress,
                      const std::function<void(uint64_t, uint64_t)>& release_range, const ScanSplit& split,
                      uint64_t at);

  FetchCounts counts_;
  bool complete_ = true;
  bool split_ = false;
};

// Record mode keeps memory to what the caller keeps with a copying young generation: new nodes
// come from a small slab that is reused; after each record (and whenever the slab is full) the
// young nodes reachable from the stack, the memo and the old containers that gained children
// (APPEND(S), SETITEM(S), BUILD) are copied to the document's arena, and the slab starts over.
// A record's dropped values never leave the slab, and the slab's strings and vectors keep their
// capacity, so most values cost no allocation. Old nodes are never collected: what becomes
// garbage after it was copied (parts of a record in flight when the slab filled) stays small.
// With PickleOptions::on_record, the records waiting on the stack for their APPENDS are copied to a
// pool instead, reused once they were handed over (Machine::pool_).
constexpr size_t kSlabNodes = size_t{1} << 16;
// ChargeCopy's budget: this many bytes per byte of input, plus the slack.
constexpr uint64_t kCopyBytesPerInputByte = 4;
constexpr uint64_t kCopyBytesSlack = uint64_t{1} << 20;
constexpr size_t kSlabMargin = 64;  // an opcode allocates at most a few nodes

// Record mode's skip of dropped values (pickle_skip.cc) stops trying after this many values it
// could not follow, when they outnumber those it skipped.
constexpr uint64_t kSkipFallbacksTolerated = 256;

// The bytes of the opcode at `pos` with its argument, when its argument is fixed or length-prefixed
// (as the first pass sizes it, pickle_memo_scan.cc); 0 for another (a line, STOP) or one cut short.
uint64_t SizedOpcodeBytes(const uint8_t* data, uint64_t size, uint64_t pos);

// Record mode's skip (pickle_skip.cc): a value stepped over, and a slot of the skip's stack.
struct SkipRun {
  uint64_t end = 0;     // the offset after the value
  uint64_t puts = 0;    // fresh memo indices it stored, from the machine's len(memo) on
  uint64_t length = 0;  // items of the list or tuple it is (record_length_keys)
};
struct SkipSlot {
  uint8_t tag;     // SkipTag (pickle_skip.cc)
  bool empty;      // a list or dict nothing was added to yet
  int64_t global;  // which allowed global, for a callable
};

// Thrown when record mode's skip predicted a value's end wrongly (pickle_skip.cc): ParsePickle
// parses the file again without skipping.
struct SkipMispredicted {};
// Thrown when record mode's one pass (PickleOptions::memo_scan_first off) meets a read back of a
// memoized value it did not keep: ParsePickle reads the file again with the memo scan first.
struct MemoNotKept {};

// How many stack slots below the top each opcode reads or removes; kTouchesMark: those from the
// innermost MARK (or the container below it) up.
constexpr uint8_t kTouchesMark = 0xff;
struct TouchDepthTable {
  uint8_t depth[256] = {};
  constexpr TouchDepthTable() {
    for (const char op : std::string_view("pqr\x94"
                                          "20\x85Q"))
      depth[static_cast<uint8_t>(op)] = 1;
    for (const char op : std::string_view("a\x86Rb\x93\x81")) depth[static_cast<uint8_t>(op)] = 2;
    for (const char op : std::string_view("s\x87\x92")) depth[static_cast<uint8_t>(op)] = 3;
    for (const char op : std::string_view("tlde1uo\x90\x91")) depth[static_cast<uint8_t>(op)] = kTouchesMark;
    depth[static_cast<uint8_t>('.')] = 0xfe;  // STOP: the whole stack
  }
};
inline constexpr TouchDepthTable kTouchDepth;

// What REDUCE of an allowed global makes, as the skip follows it (pickle_numpy_globals.cc).
enum class GlobalMakes {
  kBuildable,    // an array or dtype BUILD sets the state of
  kDict,         // an empty dict SETITEM(S) fills (OrderedDict)
  kPlain,        // a value nothing is added to (bytes, a scalar, an array from a buffer)
  kNotFollowed,  // the machine's business (torch, a refused call)
};
GlobalMakes GlobalKind(int64_t global);

// What a file that is not a pickle looks like ("a gzip file", "JSON text", ...), for the error.
std::string DescribeFileStart(std::string_view bytes, std::string_view name);

class Machine {
 public:
  Machine(std::string_view bytes, const std::string& name, PickleDocument& doc, const PickleOptions& options)
      : bytes_(bytes),
        name_(name),
        doc_(doc),
        options_(options),
        record_mode_(!options.record_lists.empty()),
        one_pass_(record_mode_ && options.skip_dropped && !options.memo_scan_first),
        memo_indices_(bytes.size()),
        copy_budget_(kCopyBytesPerInputByte * bytes.size() + kCopyBytesSlack),
        streaming_(record_mode_ && static_cast<bool>(options.on_record)) {
    if (record_mode_) {
      if (!one_pass_) fetches_.emplace(bytes, options.release, options.release_range);
      dropped_ = New(PickleNode::Type::kDropped);  // before the slab: an old node
      slab_.resize(kSlabNodes);
      forwarded_.assign(kSlabNodes, nullptr);
    }
  }

  PickleNode* Run();
  PickleNode* Salvage();
  // The memo's slot of `index` as record mode's skip reads it (null: none). With the one pass, a
  // value kept without a node is found too (LookupOnePass), and has a slot from then on.
  const MemoMap::Slot* MemoSlot(uint64_t index) {
    const MemoMap::Slot* slot = memo_.Lookup(index);
    return slot != nullptr || !one_pass_ ? slot : LookupOnePass(index);
  }
  // Salvage for record mode with PickleOptions::on_record (null when nothing can be salvaged).
  PickleNode* SalvageRecords();

  uint64_t op_offset() const { return op_offset_; }
  uint64_t end_offset() const { return pos_; }  // after Run: the byte after its STOP
  // The machine reads one pickle of a legacy torch.save stream (pickle_torch.cc): torch.*Storage
  // globals and BINPERSID, whose persistent id (a tuple) is pushed as it is.
  void ReadTorchStream() { torch_stream_ = true; }

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
      node->latin1 = false;
      node->handed = false;
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
    // Python decodes a str strictly: bytes that are not UTF-8 (surrogates included) fail its load,
    // and would fail every JSON and protobuf writer after this one.
    // Protocol 2's array data is Latin-1 text (latin1.h), a subset of UTF-8 checked branch-free and
    // vectorised: that check first, the general one only where it fails.
    const bool latin1 =
        type == PickleNode::Type::kString && IsLatin1Utf8(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
    if (type == PickleNode::Type::kString && !latin1) {
      if (const std::optional<size_t> bad = FirstInvalidUtf8(raw)) {
        Fail(fmt::format("a str that is not valid UTF-8 (Python refuses to load it): {}, at byte {} of the file",
                         InvalidUtf8Detail(raw, *bad), pos_ - raw.size() + *bad));
      }
    }
    PickleNode* node = New(type);
    node->text.assign(raw);
    node->latin1 = latin1;  // so that _codecs.encode does not check it again (Latin1)
    if (type == PickleNode::Type::kString) {
      last_str_ = node;  // a PUT of it keeps its opcode's offset (KeepOnePass)
      last_str_offset_ = op_offset_;
    }
    return node;
  }
  // The str the opcode at `offset` made (a memoized one kept as its offset): made again.
  PickleNode* StrAt(uint64_t offset);
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
    PETRSIM_ASSERT(stack_.size() >= Base());  // Top refuses to pop below the innermost MARK
    return node;
  }
  size_t PopMark() {
    if (marks_.empty()) Fail("no MARK to pop");
    const size_t mark = marks_.back();
    marks_.pop_back();
    // Marks are pushed at the stack's size and the stack never shrinks below the innermost one,
    // so every open mark is at or below the top, and each at or above the one before it.
    PETRSIM_ASSERT(mark <= stack_.size());
    PETRSIM_ASSERT(marks_.empty() || marks_.back() <= mark);
    return mark;
  }
  PickleNode* Container(PickleNode* node, PickleNode::Type type, const char* op) const {
    if (node->type != type) {
      Fail(fmt::format("{} on a {} (expected a {})", op, node->TypeName(),
                       type == PickleNode::Type::kList ? "list" : "dict"));
    }
    Unhanded(node, op);
    return node;
  }
  // A value of a record already handed to on_record cannot change: the caller has read it (Python never writes a
  // pickle that changes an object after another one refers to it; a hand-made one could).
  void Unhanded(const PickleNode* node, const char* op) const {
    if (node->handed) {
      Fail(fmt::format("{} {} (petrsim reads each record as it is added; Python never writes that)", op,
                       kRecordChangedAfterHandOver));
    }
  }
  // Marks a record handed over, all of it (MarkHanded in pickle_record_mode.cc).
  void MarkHanded(PickleNode* record);
  void AddPairs(PickleNode* dict, size_t mark) {
    if ((stack_.size() - mark) % 2 != 0) Fail("an odd number of values for a dict's keys and values");
    for (size_t i = mark; i < stack_.size(); i += 2) dict->entries.emplace_back(stack_[i], stack_[i + 1]);
    stack_.resize(mark);
  }
  void Put(uint64_t index) {
    PickleNode* top = Top();
    // len(memo) in Python: the distinct indices stored (PUT may overwrite one, or skip some).
    const bool fresh = memo_indices_.Insert(index);
    // A replay stores again what the skip counted, in its order (MEMOIZE's len(memo)).
    if (fresh || replaying_) ++memo_count_;
    memo_stored_again_ = memo_stored_again_ || (!fresh && !replaying_);
    PETRSIM_ASSERT(memo_indices_.Contains(index));
    if (one_pass_) {
      KeepOnePass(index, top, fresh);
      return;
    }
    if (record_mode_) {
      // Never read back (so never stored either): keeping it would keep its value alive.
      if (!fetches_->Fetched(index)) return;
      // The memo outlives the batch of records the pool holds (Collect).
      if (streaming_ && IsPool(top)) pool_escaped_ = true;
    }
    memo_.Set(index, top);
    if (record_mode_ && IsYoung(top)) young_memo_.push_back(index);
  }
  PickleNode* Memo(uint64_t index) const {
    const MemoMap::Slot* slot = memo_.Lookup(index);
    if (slot == nullptr) Fail(fmt::format("memo index {} was never stored", index));
    return slot->node;
  }
  // GET, BINGET, LONG_BINGET. With on_record, a value read back once is let go at that read, so that
  // the memo does not keep a record (or a value inside one) alive after it was handed over.
  PickleNode* Fetch(uint64_t index) {
    if (one_pass_) return FetchOnePass(index);
    PickleNode* node = Memo(index);
    if (streaming_ && fetches_->FetchedOnce(index)) *memo_.Find(index) = dropped_;
    return node;
  }

  // --- Record mode (pickle_record_mode.cc; its memo: pickle_one_pass.cc) -----------------------------

  // The one pass's memo (PickleOptions::memo_scan_first off): what a PUT keeps, what a GET reads.
  void KeepOnePass(uint64_t index, PickleNode* top, bool fresh);
  void EndRecordOnePass();
  PickleNode* FetchOnePass(uint64_t index);
  const MemoMap::Slot* LookupOnePass(uint64_t index);
  uint64_t StrBeforePut(uint64_t from, uint64_t put);
  struct Unbuilt;
  bool AddUnbuilt(uint64_t first, uint64_t puts, uint64_t from, uint64_t length, bool length_only = false);
  const Unbuilt* UnbuiltAt(uint64_t index) const;
  void Replay(const Unbuilt& skipped);
  bool IsRecordListKey() const;
  bool IsRecordList(const PickleNode* node) const;
  // Fails when `list`, a record list, holds (after `adding` more) more than PickleOptions::record_items_max records.
  void CheckRecordCount(const PickleNode* list, uint64_t adding = 0) const {
    if (options_.record_items_max == 0 || list->items.size() + adding <= options_.record_items_max) return;
    if (!record_mode_ || !IsRecordList(list)) return;
    Fail(fmt::format("a list of more than {} records{}", options_.record_items_max, options_.record_items_why));
  }
  bool IsRecordPosition(size_t at) const;
  PickleNode* Prune(PickleNode* key, PickleNode* value);
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
  // Appends [first, last) to `list` (APPEND, APPENDS); the items of a record list go to PickleOptions::on_record.
  void AddItems(PickleNode* list, PickleNode* const* first, PickleNode* const* last);
  // With on_record: the stack slot from which values are records waiting to be added to a record list (or items
  // of them); the stack's size when there is none.
  size_t RecordRegion() const;
  bool IsPool(const PickleNode* node) const { return pool_set_.count(node) != 0; }
  PickleNode* PoolNode() {
    if (pool_used_ == pool_.size()) {
      if (doc_.arena.size() + pool_.size() >= kPickleNodesMax) {
        Fail(fmt::format("more than {} values: petrsim's limit for one pickle", kPickleNodesMax));
      }
      pool_.push_back(std::make_unique<PickleNode>());
      pool_set_.insert(pool_.back().get());
    }
    return pool_[pool_used_++].get();
  }
  void ReleasePool();
  void Forward(PickleNode*& node, bool to_pool = false);
  void ForwardChanged(bool pool);
  void Collect();

  // --- Record mode's skip of dropped values (pickle_skip.cc) ---------------------------------------

  // After a string was pushed or memoized: the record key check, then the skip.
  void AfterString() {
    if (record_mode_ && options_.skip_dropped && !skip_off_ && !marks_.empty() &&
        stack_.back()->type == PickleNode::Type::kString) {
      MaybeSkipRecordValue();
    }
  }
  void MaybeSkipRecordValue();
  bool SkipValue(SkipRun& run, bool length_only);
  // Between a skip and its record's SETITEMS, every opcode: whether it reaches the skipped
  // value's slot (kTouchDepth: how deep below the top an opcode reads, or kTouchesMark).
  void CheckWatch(uint8_t op) {
    const uint8_t depth = kTouchDepth.depth[op];
    const bool touches = depth == kTouchesMark ? !marks_.empty() && marks_.back() <= watch_slot_ + 1
                                               : stack_.size() <= watch_slot_ + depth;
    if (touches) WatchedSlotTouched(op);
  }
  void WatchedSlotTouched(uint8_t op);

  // --- numpy (pickle_numpy_globals.cc) ------------------------------------------------------------

  bool RunNumpyOpcode(uint8_t op);
  PickleNode* GlobalNode(const std::string& module, const std::string& name);
  const PickleNode& Arg(const PickleNode& args, size_t i, PickleNode::Type type, const char* what,
                        const char* function) const;
  void ArgCount(const PickleNode& args, size_t n, const char* function) const;
  PickleNode* Reduce(PickleNode* callable, PickleNode* args);
  PickleNode* NumpyScalar(const PickleNode& args);
  PickleNode* FromBuffer(const PickleNode& args);
  PickleNode* CodecsEncode(const PickleNode& args);
  NumpyDtype ParseDtype(std::string_view spec) const;
  void Build(PickleNode* object, PickleNode* state);
  void BuildDtype(PickleNode& node, const PickleNode& state);
  void BuildArray(PickleNode& node, const PickleNode& state);
  void SetArray(PickleNode& node, const NumpyDtype& dtype, const PickleNode& shape);
  static std::string ShapeText(const std::vector<int64_t>& shape);
  static std::string ShapeText(const PickleNode& shape);
  void CheckDataLength(const PickleNode& node) const;
  static void ToCOrder(PickleNode& node);
  void Latin1(const PickleNode& text, std::string& out) const;
  bool IsOpaqueGlobal(const std::string& module, const std::string& name) const;

  // --- torch (pickle_torch.cc) ----------------------------------------------------------------------

  PickleNode* LoadTorchStorage(const PickleNode& args);
  NumpyDtype StorageDtype(const PickleNode& pid) const;
  PickleNode* RebuildTensor(const PickleNode& args);
  bool torch_stream_ = false;

  std::string_view bytes_;
  const std::string& name_;
  PickleDocument& doc_;
  const PickleOptions& options_;
  const bool record_mode_;
  const bool one_pass_;  // record mode without the memo scan first (PickleOptions::memo_scan_first)
  // The one pass keeps every value memoized from a dropped value the skip could not follow (the
  // first of a kind: a scene's sweeps sharing calibration lists) to its record's SETITEMS, and
  // then lets go of those it keeps for that only (EndRecordOnePass).
  bool keep_all_ = false;
  std::vector<uint64_t> kept_for_record_;
  PickleNode* last_str_ = nullptr;  // the last str Str made, and its opcode's offset
  uint64_t last_str_offset_ = 0;
  // The one pass's memoized values without a node, in file order: the fresh memo indices [first,
  // first + puts) a skip stepped over, the value at `from` of `length` bytes; or one str's index
  // (`length` 0: the str opcode at `from`). A read back finds them here (LookupOnePass): a str among
  // a skip's by stepping over the value again (at most kCopyBytesPerInputByte bytes per input byte
  // in all: then the file is read again), anything else by running it again (Replay).
  struct Unbuilt {
    uint64_t first, from;
    uint32_t puts;
    uint32_t length : 31;
    uint32_t length_only : 1;  // a record_length_keys value (Replay)
  };
  std::vector<Unbuilt> unbuilt_;
  uint64_t skipped_walked_ = 0;
  // A value a skip stepped over whose memoized value (not a str) is read back is run again
  // (Replay), once: from its offset to its end (Run stops at stop_at_), keeping all it memoizes.
  uint64_t stop_at_ = UINT64_MAX;
  bool replaying_ = false;
  int replay_depth_ = 0;
  bool memo_stored_again_ = false;  // an index stored twice outside a replay: none is replayed
  uint64_t pos_ = 0;
  uint64_t op_offset_ = 0;
  // The next input offset at which options_.progress is called (never without one).
  uint64_t next_progress_ = options_.progress || options_.release ? kPickleProgressBytes : UINT64_MAX;
  std::vector<PickleNode*> stack_;
  std::vector<size_t> marks_;
  MemoMap memo_;
  IndexSet memo_indices_;       // the indices PUT, BINPUT, LONG_BINPUT and MEMOIZE stored at
  uint64_t memo_count_ = 0;     // len(memo) in Python (record mode may not keep them all)
  const uint64_t copy_budget_;  // ChargeCopy
  uint64_t copied_ = 0;
  // Record mode (the memo scan: with PickleOptions::memo_scan_first only).
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
  // With on_record: the records waiting on the stack for their APPENDS (up to 1000 in Python's pickles) are
  // forwarded here, not to the document's arena, and the pool is reused once they were handed over, unless
  // something outside them came to point into it (pool_escaped_: then its nodes join the arena).
  const bool streaming_;
  std::vector<std::unique_ptr<PickleNode>> pool_;
  size_t pool_used_ = 0;
  std::unordered_set<const PickleNode*> pool_set_;
  std::vector<PickleNode*> pool_scan_;
  bool pool_escaped_ = false;
  bool collecting_ = false;  // an error then leaves half-forwarded nodes: nothing is salvaged
  std::vector<Remembered> remembered_;
  bool collect_pending_ = false;
  size_t stack_old_ = 0;              // stack_[0, stack_old_) holds no young node
  std::vector<uint64_t> young_memo_;  // memo indices stored since the last collection
  std::vector<SkipSlot> skip_stack_;  // the skip's stack and marks, reused
  std::vector<size_t> skip_marks_;
  bool skip_off_ = false;  // kSkipFallbacksTolerated
  static constexpr size_t kNoWatch = SIZE_MAX - 8;
  size_t watch_slot_ = kNoWatch;  // the stack slot of the last value skipped, until its record's SETITEMS
  size_t watch_mark_ = 0;         // that record's MARK
};

}  // namespace petrsim::pickle_internal
