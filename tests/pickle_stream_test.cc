// Record mode's hand-over of records as they complete (PickleOptions::on_record): the same records in
// the same order as the record list holds without it, on Python's pickles (tests/data/pickle_stream/,
// scripts/make_pickle_stream_fixtures.py, and the info files of tests/data/importers/); memoized
// records read back whole; memory independent of the record count; salvage of cut files as tree
// mode's salvage gives them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "formats/pickle/pickle.h"
#include "tests/pickle_test_util.h"

namespace petrsim {
namespace {

const std::string kStream = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/pickle_stream/";
const std::string kImporters = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/importers/";

const PickleNode& RecordList(const PickleDocument& doc, const PickleOptions& options) {
  if (options.record_top_list && doc.root->type == PickleNode::Type::kList) return *doc.root;
  for (const std::string& key : options.record_lists) {
    if (const PickleNode* list = doc.root->Get(key)) return *list;
  }
  ADD_FAILURE() << "no record list";
  return *doc.root;
}

// Parses `bytes` with and without on_record: every record handed over, in order, is the list's item
// of the same index; the streamed list keeps kDropped items of the same count; the rest is the same.
void ExpectSameRecords(const std::string& bytes, const PickleOptions& options) {
  const PickleDocument kept = ParsePickle(bytes, "t.pkl", options);
  const PickleNode& list = RecordList(kept, options);
  PickleOptions streaming = options;
  uint64_t handed = 0;
  streaming.on_record = [&](const PickleNode& record, uint64_t index) {
    ASSERT_EQ(index, handed);
    ASSERT_LT(index, list.items.size());
    EXPECT_TRUE(SameTree(*list.items[index], record)) << index;
    ++handed;
  };
  const PickleDocument streamed = ParsePickle(bytes, "t.pkl", streaming);
  EXPECT_EQ(handed, list.items.size());
  const PickleNode& streamed_list = RecordList(streamed, options);
  ASSERT_EQ(streamed_list.items.size(), list.items.size());
  for (const PickleNode* item : streamed_list.items) EXPECT_EQ(item->type, PickleNode::Type::kDropped);
  if (kept.root->type == PickleNode::Type::kDict) {
    ASSERT_EQ(kept.root->entries.size(), streamed.root->entries.size());
    for (size_t i = 0; i < kept.root->entries.size(); ++i) {
      const auto& [key, value] = kept.root->entries[i];
      EXPECT_TRUE(SameTree(*key, *streamed.root->entries[i].first));
      if (value != &list) {
        EXPECT_TRUE(SameTree(*value, *streamed.root->entries[i].second)) << key->text;
      }
    }
  }
  EXPECT_EQ(kept.skip_restarted, streamed.skip_restarted);
}

// Each file, read with and without the skip of dropped values, hands over what tree mode keeps.
void ExpectEachHandsOverItsRecords(const std::string& dir, std::initializer_list<const char*> names,
                                   PickleOptions (*options)(bool skip)) {
  for (const std::string name : names) {
    for (const bool skip : {false, true}) {
      SCOPED_TRACE(name + (skip ? " skip" : ""));
      ExpectSameRecords(ReadFile(dir + name), options(skip));
    }
  }
}

TEST(PickleStream, SyntheticFlightRecorderDumpsHandOverTheListsRecords) {
  ExpectEachHandsOverItsRecords(kStream,
                                {"synthetic_fr_p2.pkl", "synthetic_fr_p3.pkl", "synthetic_fr_p4.pkl",
                                 "synthetic_fr_p5.pkl", "synthetic_fr_shared_p2.pkl"},
                                FlightRecorder);
}

TEST(PickleStream, ASyntheticTopLevelListHandsOverItsRecords) {
  PickleOptions options = FlightRecorder();
  options.record_top_list = true;
  ExpectSameRecords(ReadFile(kStream + "synthetic_fr_top_list_p2.pkl"), options);
}

TEST(PickleStream, InfoFilesHandOverTheirRecords) {
  ExpectEachHandsOverItsRecords(kImporters,
                                {"mini_infos_train.pkl", "mini_infos_val.pkl", "mini_infos_val_p3.pkl",
                                 "mini_infos_val_p4.pkl", "mini_infos_val_p5.pkl"},
                                Records);
}

// synthetic_fr_shared_p2.pkl: entries [e0, e1, e0, e2, e1, e2], the repeats BINGETs of memoized dicts. Each
// repeat is handed over whole, after the first was handed over and its list slot dropped.
TEST(PickleStream, MemoizedRecordsOfASyntheticDumpAreWholeWhenReadBack) {
  const std::string bytes = ReadFile(kStream + "synthetic_fr_shared_p2.pkl");
  PickleOptions options = FlightRecorder();
  std::vector<int64_t> ids;
  options.on_record = [&](const PickleNode& record, uint64_t) {
    ASSERT_NE(record.Get("record_id"), nullptr);
    ASSERT_NE(record.Get("state"), nullptr);
    ids.push_back(record.Get("record_id")->integer);
  };
  ParsePickle(bytes, "shared.pkl", options);
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 0, 2, 1, 2}));
  // {'entries': [r], 'last': r}: a record read back outside its list after it was handed over.
  const std::string hand_made = Bytes({0x80, 2, '}', '('}) + Str("entries") + Bytes({']', '}', 'q', 1, '('}) +
                                Str("record_id") + Bytes({'K', 7}) + Str("state") + Str("ok") + Bytes({'u', 'a'}) +
                                Str("last") + Bytes({'h', 1, 'u', '.'});
  ids.clear();
  const PickleDocument doc = ParsePickle(hand_made, "last.pkl", options);
  EXPECT_EQ(ids, (std::vector<int64_t>{7}));
  ASSERT_NE(doc.root->Get("last"), nullptr);
  ASSERT_NE(doc.root->Get("last")->Get("state"), nullptr);
  EXPECT_EQ(doc.root->Get("last")->Get("state")->text, "ok");
  EXPECT_EQ(doc.root->Get("entries")->items.at(0)->type, PickleNode::Type::kDropped);
  // The same record memoized only after it is complete (BINPUT after its SETITEMS, so after the
  // collection that moved it to the pool of records waiting for their APPENDS), then a second batch
  // that reuses the pool: the memo's reference kept the record out of it.
  const std::string late = Bytes({0x80, 2, '}', '('}) + Str("entries") + Bytes({']', '(', '}', '('}) +
                           Str("record_id") + Bytes({'K', 7}) + Str("state") + Str("ok") + Bytes({'u', 'q', 1}) +
                           Bytes({'}', '('}) + Str("record_id") + Bytes({'K', 8}) + Str("state") + Str("no") +
                           Bytes({'u', 'e', '(', '}', '('}) + Str("record_id") + Bytes({'K', 9}) + Str("state") +
                           Str("re") + Bytes({'u', '}', '('}) + Str("record_id") + Bytes({'K', 10}) + Str("state") +
                           Str("us") + Bytes({'u', 'e'}) + Str("last") + Bytes({'h', 1, 'u', '.'});
  ids.clear();
  const PickleDocument late_doc = ParsePickle(late, "late.pkl", options);
  EXPECT_EQ(ids, (std::vector<int64_t>{7, 8, 9, 10}));
  ASSERT_NE(late_doc.root->Get("last"), nullptr);
  ASSERT_NE(late_doc.root->Get("last")->Get("state"), nullptr);
  EXPECT_EQ(late_doc.root->Get("last")->Get("state")->text, "ok");
}

// A hand-made file that changes a record after it was added to its list (GET of it, then SETITEM; Python never writes
// that) is refused with on_record, whose caller has read the record already; without it the list holds the change.
TEST(PickleStream, ARecordChangedAfterItWasAddedIsRefused) {
  const std::string bytes = Bytes({0x80, 2, '}', '('}) + Str("entries") + Bytes({']', '}', 'q', 1, '('}) +
                            Str("record_id") + Bytes({'K', 7}) + Str("state") + Str("ok") + Bytes({'u', 'a', 'h', 1}) +
                            Str("state") + Str("changed") + Bytes({'s', '0', 'u', '.'});
  PickleOptions options = FlightRecorder();
  const PickleDocument kept = ParsePickle(bytes, "changed.pkl", options);
  EXPECT_EQ(kept.root->Get("entries")->items.at(0)->entries.back().second->text, "changed");
  options.on_record = [](const PickleNode&, uint64_t) {};
  try {
    ParsePickle(bytes, "changed.pkl", options);
    ADD_FAILURE() << "the change was not refused";
  } catch (const PickleError& error) {
    EXPECT_NE(
        std::string(error.what()).find("changed.pkl: byte 62: SETITEM changes a record after it was added to its list"),
        std::string::npos)
        << error.what();
  }
}

// A synthetic FR-shaped pickle of `n` entries, as protocol 2 lays them out: APPENDS batches of 1000.
std::string SyntheticDump(int n) {
  std::string out = Bytes({0x80, 2, '}', '('}) + Str("version") + Str("2.4") + Str("entries") + Bytes({']'});
  for (int i = 0; i < n; ++i) {
    if (i % 1000 == 0) out += i == 0 ? "(" : "e(";
    out += Bytes({'}', '('}) + Str("record_id") + Bytes({'J', i & 0xff, (i >> 8) & 0xff, (i >> 16) & 0xff, 0});
    out += Str("state") + Str("completed") + Str("frames") + Bytes({']', '(', '}', 'K', 1, ')', 'e', 'u'});
  }
  return out + Bytes({'e', 'u', '.'});
}

// With on_record, the document's arena does not grow with the records: the waiting batch lives in a
// pool reused after each APPENDS. Without it, each record keeps its nodes.
TEST(PickleStream, MemoryDoesNotGrowWithTheRecordsOfSyntheticDumps) {
  const auto arena = [](int n, bool stream) {
    PickleOptions options = FlightRecorder();
    uint64_t handed = 0;
    if (stream) options.on_record = [&](const PickleNode&, uint64_t) { ++handed; };
    const PickleDocument doc = ParsePickle(SyntheticDump(n), "synthetic.pkl", options);
    EXPECT_EQ(handed, stream ? static_cast<uint64_t>(n) : 0u);
    EXPECT_EQ(doc.root->Get("entries")->items.size(), static_cast<size_t>(n));
    return doc.arena.size();
  };
  EXPECT_LE(arena(20000, true), arena(2000, true) + 16);
  EXPECT_LT(arena(20000, true), 100u);
  EXPECT_GT(arena(20000, false), 20000u);
  // Python's dumps: what the memo keeps (the keys, the shared strings), not the records.
  for (const std::string name : {"synthetic_fr_p2.pkl", "synthetic_fr_p4.pkl"}) {
    PickleOptions options = FlightRecorder();
    options.on_record = [](const PickleNode&, uint64_t) {};
    EXPECT_LT(ParsePickle(ReadFile(kStream + name), name, options).arena.size(), 200u) << name;
  }
}

// Whether `handed` is `plain` (an item of tree mode's record list) pruned as record mode prunes it;
// `last_key_may_miss`: the skip's one exception (pickle.h, on_record), a missing last key whose value
// the record drops or keeps by length only.
bool SameRecord(const PickleNode& plain, const PickleNode& handed, const PickleOptions& options,
                bool last_key_may_miss) {
  if (plain.type != PickleNode::Type::kDict) return SameTree(plain, handed);
  const auto is = [](const std::vector<std::string>& keys, const PickleNode& key) {
    return key.type == PickleNode::Type::kString && std::find(keys.begin(), keys.end(), key.text) != keys.end();
  };
  size_t n = plain.entries.size();
  if (last_key_may_miss && handed.entries.size() + 1 == n && !is(options.record_keys, *plain.entries[n - 1].first)) {
    --n;
  }
  if (handed.type != PickleNode::Type::kDict || handed.entries.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    const auto& [key, value] = plain.entries[i];
    const PickleNode& kept = *handed.entries[i].second;
    if (!SameTree(*key, *handed.entries[i].first)) return false;
    if (is(options.record_keys, *key) || (is(options.record_length_keys, *key) && !value->is_sequence())) {
      if (!SameTree(*value, kept)) return false;
    } else if (is(options.record_length_keys, *key)) {
      if (kept.type != PickleNode::Type::kList || kept.items.size() != value->items.size()) return false;
    } else if (kept.type != PickleNode::Type::kDropped) {
      return false;
    }
  }
  return true;
}

// `bytes` cut at `cut`: with on_record and salvage, the records handed over are tree mode's salvaged
// record list, pruned; the error, its offset and the other top-level values are tree mode's too.
void ExpectSalvageLikeTreeMode(const std::string& bytes, size_t cut, bool skip) {
  const std::string head = bytes.substr(0, cut);
  PickleDocument plain;
  try {
    plain = ParsePickle(head, "t.pkl", true);
  } catch (const PickleError& error) {
    PickleOptions options = FlightRecorder(skip);
    options.salvage = true;
    options.on_record = [](const PickleNode&, uint64_t) {};
    EXPECT_EQ(ErrorOf(head, options), error.what());
    return;
  }
  const PickleNode* list = plain.root->type == PickleNode::Type::kDict ? plain.root->Get("entries") : nullptr;
  const size_t records = list != nullptr && list->type == PickleNode::Type::kList ? list->items.size() : 0;
  PickleOptions options = FlightRecorder(skip);
  options.salvage = true;
  uint64_t handed = 0;
  options.on_record = [&](const PickleNode& record, uint64_t index) {
    ASSERT_EQ(index, handed++);
    ASSERT_LT(index, records);
    EXPECT_TRUE(SameRecord(*list->items[index], record, options, skip && index + 1 == records)) << index;
  };
  const PickleDocument streamed = ParsePickle(head, "t.pkl", options);
  EXPECT_EQ(handed, records);
  EXPECT_EQ(streamed.partial, plain.partial);
  EXPECT_EQ(streamed.partial_offset, plain.partial_offset);
  ASSERT_EQ(streamed.root->entries.size(), plain.root->entries.size());
  for (size_t i = 0; i < plain.root->entries.size(); ++i) {
    const auto& [key, value] = plain.root->entries[i];
    EXPECT_TRUE(SameTree(*key, *streamed.root->entries[i].first));
    if (value != list) {
      EXPECT_TRUE(SameTree(*value, *streamed.root->entries[i].second)) << key->text;
    }
  }
}

// Every cut of two small dumps (protocol 2, and 4 with FRAME and MEMOIZE), and a stride of a big one
// (cuts inside and between APPENDS batches), with the skip and without.
TEST(PickleStream, CutSyntheticDumpsSalvageAsTreeModeDoes) {
  for (const std::string name : {"synthetic_fr_small_p2.pkl", "synthetic_fr_small_p4.pkl", "synthetic_fr_p2.pkl"}) {
    const std::string bytes = ReadFile(kStream + name);
    const size_t stride = bytes.size() > 10000 ? 2999 : 1;
    for (size_t cut = 1; cut < bytes.size(); cut += stride) {
      for (const bool skip : {false, true}) {
        SCOPED_TRACE(name + " cut at " + std::to_string(cut) + (skip ? " skip" : ""));
        ExpectSalvageLikeTreeMode(bytes, cut, skip);
        if (HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace petrsim
