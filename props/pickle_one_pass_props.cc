// Property of record mode's one pass (PickleOptions::memo_scan_first off,
// formats/pickle/pickle_one_pass.cc): on random info files shaped as Python's pickler writes
// them (records of kept and dropped keys; strs, ints, lists, tuples and dicts, each memoized under
// the next index; keys and values read back from the memo anywhere later, a list read back and
// added to now and then), the one pass reads the same tree and hands over the same records as the
// memo scan first. Whether it kept, made again, ran again or read the file again is classified.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "formats/pickle/pickle.h"

namespace petrsim {
namespace {

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// SHORT_BINUNICODE of `text`.
std::string Str(const std::string& text) { return Bytes({0x8c, static_cast<int>(text.size())}) + text; }

// Record mode as the info importer uses it (tests/pickle_test_util.h's Records).
PickleOptions Records() {
  PickleOptions options;
  options.numpy = true;
  options.salvage = false;
  options.record_lists = {"infos"};
  options.record_keys = {"token", "timestamp", "gt_boxes", "gt_names", "num_lidar_pts"};
  options.record_length_keys = {"sweeps"};
  return options;
}

// Writes a pickle as Python's pickler does (protocol 2, memo indices in order), drawing its shape.
class InfoWriter {
 public:
  std::string Write() {
    out_ = Bytes({0x80, 2, '}'});
    Put(kDict);
    out_ += '(';
    NewStr("infos");
    out_ += ']';
    Put(kList);
    // Records in a MARK ... APPENDS batch, or each APPENDed as it is written.
    const bool batch = *rc::gen::arbitrary<bool>();
    if (batch) out_ += '(';
    const int records = *rc::gen::inRange(1, 7);
    for (int i = 0; i < records; ++i) {
      Record();
      if (!batch) out_ += 'a';
    }
    if (batch) out_ += 'e';
    // A value read back right above the record list, dropped, then read back as a top-level value
    // (a record's dropped dict as metadata, say).
    if (const int64_t index = AnyMemoized(-1); index >= 0 && *rc::gen::arbitrary<bool>()) {
      Get(static_cast<uint64_t>(index));
      out_ += '0';
      NewStr("metadata");
      Get(static_cast<uint64_t>(index));
    }
    out_ += Bytes({'u', '.'});
    return out_;
  }

 private:
  enum Kind { kStr, kList, kTuple, kDict };
  struct Entry {
    Kind kind;
    bool complete;
  };

  void Put(Kind kind, bool complete = false) {
    const uint64_t index = memo_.size();
    if (index < 256) {
      out_ += Bytes({'q', static_cast<int>(index)});
    } else {
      out_ += 'r';
      for (int i = 0; i < 4; ++i) out_ += static_cast<char>((index >> (8 * i)) & 0xff);
    }
    memo_.push_back({kind, complete});
  }
  void Get(uint64_t index) {
    if (index < 256) {
      out_ += Bytes({'h', static_cast<int>(index)});
    } else {
      out_ += 'j';
      for (int i = 0; i < 4; ++i) out_ += static_cast<char>((index >> (8 * i)) & 0xff);
    }
  }
  void NewStr(const std::string& text) {
    out_ += Str(text);
    Put(kStr, true);
  }
  // A complete memoized value of `kind` (-1: any), or -1 when there is none.
  int64_t AnyMemoized(int kind) const {
    std::vector<int64_t> found;
    for (size_t i = 0; i < memo_.size(); ++i) {
      if (memo_[i].complete && (kind < 0 || memo_[i].kind == kind)) found.push_back(static_cast<int64_t>(i));
    }
    if (found.empty()) return -1;
    return found[*rc::gen::inRange<size_t>(0, found.size())];
  }

  void Record() {
    static const std::vector<std::string> kKeys = {"token",  "timestamp", "gt_names", "cams",
                                                   "sweeps", "next",      "prev",     "lidar_path"};
    out_ += '}';
    const size_t record = memo_.size();
    Put(kDict);
    out_ += '(';
    const int pairs = *rc::gen::inRange(1, 6);
    for (int i = 0; i < pairs; ++i) {
      const std::string& key = kKeys[*rc::gen::inRange<size_t>(0, kKeys.size())];
      // A key Python interns: memoized once, read back after.
      if (const auto found = keys_.find(key); found != keys_.end() && *rc::gen::inRange(0, 4) != 0) {
        Get(found->second);
      } else {
        keys_[key] = memo_.size();
        NewStr(key);
      }
      Value(0);
    }
    out_ += 'u';
    memo_[record].complete = true;
  }

  void Value(int depth) {
    const int choice = *rc::gen::inRange(0, depth >= 2 ? 4 : 8);
    switch (choice) {
      case 0:
        out_ += Bytes({'K', *rc::gen::inRange(0, 256)});
        return;
      case 1:
      case 2:
        NewStr(std::string(1, static_cast<char>('a' + *rc::gen::inRange(0, 26))) + std::to_string(memo_.size()));
        return;
      case 3: {
        const int64_t index = AnyMemoized(-1);
        if (index < 0) return Value(depth + 2);
        Get(static_cast<uint64_t>(index));
        return;
      }
      case 4:
        return List(depth);
      case 5: {
        // A tuple of two: its items, TUPLE2, then memoized.
        Value(depth + 1);
        Value(depth + 1);
        out_ += '\x86';
        Put(kTuple, true);
        return;
      }
      case 6:
        return Dict(depth);
      default: {
        // A list read back and added to (hand-made; Python writes each object once).
        const int64_t list = AnyMemoized(kList);
        if (list < 0) return Value(depth + 2);
        Get(static_cast<uint64_t>(list));
        Value(depth + 1);
        out_ += 'a';
        return;
      }
    }
  }
  void List(int depth) {
    out_ += ']';
    const size_t index = memo_.size();
    Put(kList);
    const int items = *rc::gen::inRange(0, 4);
    if (items > 0) {
      out_ += '(';
      for (int i = 0; i < items; ++i) Value(depth + 1);
      out_ += 'e';
    }
    memo_[index].complete = true;
  }
  void Dict(int depth) {
    out_ += '}';
    const size_t index = memo_.size();
    Put(kDict);
    const int pairs = *rc::gen::inRange(0, 3);
    if (pairs > 0) {
      out_ += '(';
      for (int i = 0; i < pairs; ++i) {
        NewStr("k" + std::to_string(i));
        Value(depth + 1);
      }
      out_ += 'u';
    }
    memo_[index].complete = true;
  }

  std::string out_;
  std::vector<Entry> memo_;
  std::map<std::string, uint64_t> keys_;
};

// A record handed over, as text (bounded: a list may hold itself).
void Fingerprint(const PickleNode& node, std::string& out, int& budget) {
  if (--budget < 0) return;
  out += std::to_string(static_cast<int>(node.type)) + ':' + node.text + ':' + std::to_string(node.integer) + '[';
  for (const PickleNode* item : node.items) Fingerprint(*item, out, budget);
  for (const auto& [key, value] : node.entries) {
    Fingerprint(*key, out, budget);
    Fingerprint(*value, out, budget);
  }
  out += ']';
}

// A read's tree and the records it handed over, as text, or its error (a list read back and added
// to may change a record already handed over: refused either way).
std::string Read(const std::string& bytes, PickleOptions options, bool stream, bool* rescanned) {
  std::string out;
  if (stream) {
    options.on_record = [&](const PickleNode& record, uint64_t index) {
      int budget = 1 << 12;
      out += std::to_string(index) + '=';
      Fingerprint(record, out, budget);
      out += '\n';
    };
  }
  try {
    const PickleDocument doc = ParsePickle(bytes, "props.pkl", options);
    int budget = 1 << 14;
    Fingerprint(*doc.root, out, budget);
    *rescanned = doc.memo_rescanned;
  } catch (const PickleError& error) {
    out += std::string("error: ") + error.what();
  }
  return out;
}

RC_GTEST_PROP(PickleOnePass, ReadsWhatTheMemoScanReads, ()) {
  const std::string bytes = InfoWriter().Write();
  PickleOptions scan = Records();
  scan.memo_scan_first = true;
  bool scan_rescanned = false, rescanned = false, stream_rescanned = false;
  RC_ASSERT(Read(bytes, scan, false, &scan_rescanned) == Read(bytes, Records(), false, &rescanned));
  RC_ASSERT(Read(bytes, scan, true, &scan_rescanned) == Read(bytes, Records(), true, &stream_rescanned));
  RC_CLASSIFY(rescanned, "read again");
  RC_CLASSIFY(stream_rescanned, "read again, streamed");
}

}  // namespace
}  // namespace petrsim
