// Properties of record mode's first pass (MemoFetches, formats/pickle/pickle_internal.h): which
// memo indices a pickle reads back, and which exactly once. The pass steps over the opcodes info
// files are made of in a fast stretch without bounds checks, and over the rest one by one; here it
// is compared with a plain walk of the opcodes written from the pickle protocol's definition (each
// opcode's argument, as pickletools documents it), on streams of random opcodes with valid and
// broken arguments, cut anywhere, with random bytes mixed in.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "formats/pickle/pickle_internal.h"

namespace petrsim::pickle_internal {
namespace {

uint64_t LittleEndian(const std::string& bytes, uint64_t at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) value |= uint64_t{static_cast<uint8_t>(bytes[at + i])} << (8 * i);
  return value;
}

// The bytes of each opcode's argument, from the pickle protocol's definition (pickletools):
// a fixed count, a little-endian length prefix of 1, 4 or 8 bytes and that many bytes, or
// newline-terminated lines. -1: not an opcode of protocols 0 to 5.
struct ArgumentShape {
  int fixed = -1;
  int prefix = 0;
  int lines = 0;
};
ArgumentShape ShapeOf(uint8_t op) {
  const std::string_view none("(.012NQRabd}el]ost)u\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98");
  if (none.find(static_cast<char>(op)) != std::string_view::npos) return {0};
  switch (op) {
    case 'K':
    case 'q':
    case 'h':
    case 0x80:
    case 0x82:
      return {1};
    case 'M':
    case 0x83:
      return {2};
    case 'J':
    case 'r':
    case 'j':
    case 0x84:
      return {4};
    case 'G':
    case 0x95:
      return {8};
    case 'U':
    case 'C':
    case 0x8a:
    case 0x8c:
      return {0, 1};
    case 'T':
    case 'X':
    case 'B':
    case 0x8b:
      return {0, 4};
    case 0x8d:
    case 0x8e:
    case 0x96:
      return {0, 8};
    case 'F':
    case 'I':
    case 'L':
    case 'P':
    case 'S':
    case 'V':
    case 'p':
    case 'g':
      return {0, 0, 1};
    case 'c':
    case 'i':
      return {0, 0, 2};
    default:
      return {};
  }
}

// The reference: the memo indices read back (BINGET, LONG_BINGET, GET of a decimal line), with
// how often, up to the first STOP or the first argument that runs past the end; nullopt at a byte
// that is no opcode (every memoized value then counts as read back).
std::optional<std::map<uint64_t, int>> ReferenceFetches(const std::string& bytes) {
  std::map<uint64_t, int> fetched;
  uint64_t pos = 0;
  while (pos < bytes.size()) {
    const auto op = static_cast<uint8_t>(bytes[pos++]);
    if (op == '.') return fetched;
    const ArgumentShape shape = ShapeOf(op);
    if (shape.fixed < 0) return std::nullopt;
    const uint64_t left = bytes.size() - pos;
    uint64_t step = static_cast<uint64_t>(shape.fixed);
    if (shape.prefix > 0) {
      if (left < static_cast<uint64_t>(shape.prefix)) return fetched;
      const uint64_t length = LittleEndian(bytes, pos, shape.prefix);
      if (length > left - shape.prefix) return fetched;
      step = shape.prefix + length;
    }
    for (int line = 0; line < shape.lines; ++line) {
      const size_t end = bytes.find('\n', pos + step);
      if (end == std::string::npos) return fetched;
      if (op == 'g') {
        const std::string digits = bytes.substr(pos, end - pos);
        if (!digits.empty() && digits.size() <= 17 && digits.find_first_not_of("0123456789") == std::string::npos) {
          ++fetched[std::stoull(digits)];
        }
      }
      step = end + 1 - pos;
    }
    if (step > left) return fetched;
    if (op == 'h' || op == 'j') ++fetched[LittleEndian(bytes, pos, op == 'h' ? 1 : 4)];
    pos += step;
  }
  return fetched;
}

// One opcode with its argument: mostly well formed (the shapes of an info file: a value and its
// PUT, GETs of small and large indices), sometimes with a length running past the end.
std::string Opcode(uint32_t choice, uint32_t index, uint32_t length) {
  const auto little = [](uint64_t value, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
    return out;
  };
  const std::string payload(length % 40, 'x');
  switch (choice % 20) {
    case 0:
      return "h" + little(index % 256, 1);
    case 1:
      return "j" + little(index % 5000, 4);
    case 2:  // a str and its PUT, LONG_BINPUT or BINPUT
      return "X" + little(payload.size(), 4) + payload +
             (index % 2 == 0 ? "r" + little(index, 4) : "q" + little(index, 1));
    case 3:
      return "\x8c" + little(payload.size(), 1) + payload + "q" + little(index % 256, 1);
    case 4:
      return (index % 2 == 0 ? "}r" + little(index, 4) : "]q" + little(index, 1)) + ")";
    case 5:
      return std::string("](") + "K" + little(index, 1) + "G" + std::string(8, '\x01') + "e";
    case 6:
      return "\x86r" + little(index, 4);
    case 7:
      return "R";
    case 8:
      return "cnumpy\ndtype\n";
    case 9:
      return "J" + little(index, 4) + "M" + little(index, 2);
    case 10:
      return "\x8a\x02" + little(index, 2);
    case 11:
      return "X" + little(uint64_t{length} << 8, 4);  // a length past the end
    case 12:
      return "C" + little(payload.size(), 1) + payload;
    case 13:
      return "(\x88\x89Nt)\x85\x87"
             "0b";
    case 14:
      return "\x95" + little(index, 8);
    case 15:
      return "\x94su";
    case 18:
      return "g" + std::to_string(index) + "\n" + "p" + std::to_string(index) + "\n";
    case 16:
      return ".";
    case 17:
      return std::string(1, static_cast<char>(index & 0xff));  // any byte, an unknown opcode too
    default:
      return "h" + little(index % 7, 1) + "a";  // 19
  }
}

// A stream of random opcodes (Opcode), cut anywhere half the time.
std::string RandomStream() {
  const auto opcodes = *rc::gen::container<std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>>(rc::gen::tuple(
      rc::gen::arbitrary<uint32_t>(), rc::gen::inRange<uint32_t>(0, 6000), rc::gen::inRange<uint32_t>(0, 300)));
  std::string bytes = "\x80\x02";
  for (const auto& [choice, index, length] : opcodes) {
    // STOP and stray bytes rarely, so that most streams run to their end.
    if ((choice % 20 == 16 || choice % 20 == 17) && (choice / 20) % 8 != 0) continue;
    bytes += Opcode(choice, index, length);
  }
  const size_t cut = *rc::gen::inRange<size_t>(0, bytes.size() + 1);
  if (*rc::gen::arbitrary<bool>()) bytes.resize(cut);
  return bytes;
}

RC_GTEST_PROP(PickleScanProps, FirstPassCountsEveryReadBackOfTheReference, ()) {
  const std::string bytes = RandomStream();
  const MemoFetches fetches(bytes, {}, {});
  const std::optional<std::map<uint64_t, int>> reference = ReferenceFetches(bytes);
  if (!reference) {
    // An opcode neither sizes: every memoized value is kept, none is read back only once.
    for (uint64_t index = 0; index < 6000; index += 97) {
      RC_ASSERT(fetches.Fetched(index));
      RC_ASSERT(!fetches.FetchedOnce(index));
    }
    return;
  }
  for (uint64_t index = 0; index < 6000; ++index) {
    const auto found = reference->find(index);
    const int count = found == reference->end() ? 0 : found->second;
    RC_ASSERT(fetches.Fetched(index) == (count > 0));
    RC_ASSERT(fetches.FetchedOnce(index) == (count == 1));
  }
}

// The first pass split between two threads at any offset (a random one, mostly inside an
// argument), with small heads, guesses and release steps (so that the helper counts past its
// head and its counts are merged), counts what one pass counts, whether the caller's thread
// meets the helper or not; the helper releases only ranges it has passed, from its offset on,
// and the caller's releases only grow.
RC_GTEST_PROP(PickleScanProps, SplitPassCountsWhatOnePassCounts, ()) {
  const std::string bytes = RandomStream();
  RC_PRE(bytes.size() >= 2u);
  ScanSplit how;
  how.from_bytes = 0;
  how.at = *rc::gen::inRange<uint64_t>(1, bytes.size());
  how.head_opcodes = *rc::gen::inRange<uint64_t>(1, 40);
  how.trial_opcodes = *rc::gen::inRange<uint64_t>(1, 20);
  how.progress_bytes = *rc::gen::inRange<uint64_t>(1, 300);
  std::vector<std::pair<uint64_t, uint64_t>> released;
  std::vector<uint64_t> caller_released;
  std::mutex lock;
  const MemoFetches one(bytes, {}, {});
  const MemoFetches split(
      bytes, [&](uint64_t done) { caller_released.push_back(done); },
      [&](uint64_t from, uint64_t to) {
        const std::lock_guard<std::mutex> hold(lock);
        released.emplace_back(from, to);
      },
      how);
  RC_CLASSIFY(split.split(), "met the helper");
  RC_CLASSIFY(!released.empty(), "the helper released");
  for (uint64_t index = 0; index < 6000; ++index) {
    RC_ASSERT(split.Fetched(index) == one.Fetched(index));
    RC_ASSERT(split.FetchedOnce(index) == one.FetchedOnce(index));
  }
  uint64_t last = how.at;
  for (const auto& [from, to] : released) {
    RC_ASSERT(from == last);
    RC_ASSERT(to > from);
    RC_ASSERT(to <= bytes.size());
    last = to;
  }
  for (size_t i = 1; i < caller_released.size(); ++i) RC_ASSERT(caller_released[i] > caller_released[i - 1]);
}

// A guess inside a long line-argument text (a 'p' PUT with no newline in the rest of the file)
// gives up within its budget, and the caller's pass, which stops at the first such opcode, does
// not wait for the helper: this returns (it searched the rest of the file for every guess).
TEST(PickleScanProps, SplitPassGivesUpOnGuessesThatNeverEnd) {
  const std::string bytes = "\x80\x02" + std::string(size_t{4} << 20, 'p');
  ScanSplit how;
  how.from_bytes = 0;
  const MemoFetches one(bytes, {}, {});
  const MemoFetches split(bytes, {}, {}, how);
  EXPECT_FALSE(split.split());
  EXPECT_EQ(split.Fetched(0), one.Fetched(0));
  // And a helper that starts inside such a text while the caller's pass goes on to meet it.
  const std::string text = std::string("\x80\x02X", 3) + std::string("\x00\x00\x40\x00", 4) +
                           std::string(size_t{4} << 20, 'p') + "h\x07h\x07.";
  const MemoFetches whole(text, {}, {});
  const MemoFetches halves(text, {}, {}, how);
  EXPECT_TRUE(whole.Fetched(7));
  EXPECT_EQ(halves.Fetched(7), whole.Fetched(7));
  EXPECT_EQ(halves.FetchedOnce(7), whole.FetchedOnce(7));
}

// A real split: the helper's first opcodes are met on a file of python's own shape, and its
// counts join the caller's (the property above meets it only where a random offset falls on one).
TEST(PickleScanProps, SplitPassMeetsTheHelperOnAPythonShapedFile) {
  // Index 5999 is read back once in each half, 5998 once in the second.
  std::string bytes = std::string("\x80\x02]q\x00(", 6) + "j" + std::string("\x6f\x17\x00\x00", 4);
  for (uint32_t i = 0; i < 20000; ++i) {
    bytes += Opcode(2, i + 1, i) + Opcode(0, i, 0) + Opcode(1, i * 7, 0) + Opcode(5, i, 0);
  }
  bytes += "j" + std::string("\x6f\x17\x00\x00", 4) + "j" + std::string("\x6e\x17\x00\x00", 4) + "e.";
  const MemoFetches one(bytes, {}, {});
  ScanSplit how;
  how.from_bytes = 0;
  const MemoFetches split(bytes, {}, {}, how);
  EXPECT_TRUE(split.split());
  EXPECT_TRUE(split.Fetched(5999));
  EXPECT_FALSE(split.FetchedOnce(5999));
  EXPECT_TRUE(split.FetchedOnce(5998));
  for (uint64_t index = 0; index < 6000; ++index) {
    EXPECT_EQ(split.Fetched(index), one.Fetched(index)) << index;
    EXPECT_EQ(split.FetchedOnce(index), one.FetchedOnce(index)) << index;
  }
}

// The range queries the skip asks once per value stepped over (IndexSet::AnyIn,
// FetchCounts::AnyIn) against a query per index, across the dense words and the far indices.
RC_GTEST_PROP(PickleScanProps, RangeQueriesAgreeWithEachIndex, ()) {
  const uint64_t dense_max = *rc::gen::inRange<uint64_t>(0, 300);
  const auto indices = *rc::gen::container<std::vector<uint64_t>>(rc::gen::inRange<uint64_t>(0, 400));
  IndexSet set(dense_max);
  FetchCounts counts(dense_max);
  for (const uint64_t index : indices) {
    set.Insert(index);
    counts.Add(index);
  }
  for (int query = 0; query < 20; ++query) {
    const uint64_t from = *rc::gen::inRange<uint64_t>(0, 420);
    const uint64_t to = from + *rc::gen::inRange<uint64_t>(0, 140);
    bool in_set = false;
    bool read_back = false;
    for (uint64_t index = from; index < to; ++index) {
      in_set = in_set || set.Contains(index);
      read_back = read_back || counts.Count(index) != 0;
    }
    RC_ASSERT(set.AnyIn(from, to) == in_set);
    RC_ASSERT(counts.AnyIn(from, to) == read_back);
  }
}

// Far indices (a hand-made LONG_BINGET beyond the file's size) are counted as the dense ones are.
TEST(PickleScanProps, FarIndicesAreCountedLikeDenseOnes) {
  const std::string far = std::string("j") + std::string("\x40\x42\x0f\x00", 4);  // 1,000,000
  const std::string near = std::string("h\x07");
  const std::string bytes = std::string("\x80\x02") + far + near + near + far + far + "h\x09.";
  const MemoFetches fetches(bytes, {}, {});
  EXPECT_TRUE(fetches.Fetched(1000000));
  EXPECT_FALSE(fetches.FetchedOnce(1000000));
  EXPECT_TRUE(fetches.Fetched(7));
  EXPECT_FALSE(fetches.FetchedOnce(7));
  EXPECT_TRUE(fetches.FetchedOnce(9));
  EXPECT_FALSE(fetches.Fetched(8));
}

}  // namespace
}  // namespace petrsim::pickle_internal
