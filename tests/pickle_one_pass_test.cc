// Record mode's one pass (PickleOptions::memo_scan_first off, formats/pickle/pickle_one_pass.cc):
// Python's info files read the same in one pass as with the memo scan first, without reading them
// again; a str memoized where the skip stepped over it is made when a kept value reads it back; a
// read back of anything else the one pass did not keep reads the file again with the scan, each
// record handed over once and errors the scan's own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/pickle/pickle.h"
#include "tests/pickle_test_util.h"

namespace petrsim {
namespace {

const std::string kData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/importers/";
const std::string kStream = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/pickle_stream/";

PickleOptions ScanFirst(PickleOptions options) {
  options.memo_scan_first = true;
  return options;
}

// {'infos': [{...}, ...]} with each record's inner bytes given (MARK, pairs, SETITEMS).
std::string Infos(const std::vector<std::string>& records) {
  std::string out = Bytes({0x80, 2, '}', '(', 'X', 5, 0, 0, 0}) + "infos" + Bytes({']', '('});
  for (const std::string& pairs : records) out += Bytes({'}', '('}) + pairs + Bytes({'u'});
  return out + Bytes({'e', 'u', '.'});
}

// Parses `bytes` both ways (the one pass needs the skip; without it record mode always scans the
// memo first): the same tree; `rescanned`: whether the one pass read the file again.
void ExpectSameAsScanFirst(const std::string& bytes, bool rescanned) {
  const PickleDocument scanned = ParsePickle(bytes, "t.pkl", ScanFirst(Records()));
  const PickleDocument one = ParsePickle(bytes, "t.pkl", Records());
  EXPECT_TRUE(SameTree(*scanned.root, *one.root));
  EXPECT_EQ(one.memo_rescanned, rescanned);
  // The one pass skips what the scan skips, and values whose memoized parts are read back.
  EXPECT_GE(one.skipped_values, scanned.skipped_values);
}

// The info files scripts/make_import_fixtures.py wrote with Python's pickle (protocols 2 to 5):
// read back are keys, shared strings, globals, dtypes and numpy's b'b', all kept.
TEST(PickleOnePass, PythonsInfoFilesReadInOnePass) {
  for (const std::string name : {"mini_infos_train.pkl", "mini_infos_val.pkl", "mini_infos_val_p3.pkl",
                                 "mini_infos_val_p4.pkl", "mini_infos_val_p5.pkl"}) {
    SCOPED_TRACE(name);
    ExpectSameAsScanFirst(ReadFile(kData + name), false);
  }
}

// A token memoized inside a dropped value ('next') and read back by the next record's kept
// 'token', as a converter sharing nuScenes' token strings writes it: made from its bytes, no
// second read.
TEST(PickleOnePass, AStrTheSkipSteppedOverIsMadeWhenAKeptValueReadsIt) {
  const std::string bytes = Infos({Str("token") + Str("t0") + Str("next") + Str("t1") + Bytes({'q', 0}),
                                   Str("token") + Bytes({'h', 0}) + Str("cams") + Bytes({']', 'q', 1, 'h', 0, 'a'})});
  ExpectSameAsScanFirst(bytes, false);
  const PickleDocument doc = ParsePickle(bytes, "t.pkl", Records());
  EXPECT_EQ(doc.root->Get("infos")->items.at(1)->Get("token")->text, "t1");
  EXPECT_EQ(doc.skipped_values, 2u);
}

// A str memoized inside a dropped value, read back twice in the next record's dropped value and
// then by a kept one; a key memoized inside the dropped value and a later record's key.
TEST(PickleOnePass, KeysAndStrsInsideDroppedValuesAreFoundAgain) {
  const std::string first = Str("cams") + Bytes({'}', 'q', 0, '('}) + Str("timestamp") + Bytes({'q', 1, 'K', 7}) +
                            Str("path") + Bytes({'q', 2}) + Str("p") + Bytes({'q', 3, 'u'}) + Str("token") + Str("t0");
  const std::string second =
      Str("cams") + Bytes({']', 'q', 4, '(', 'h', 3, 'h', 3, 'e'}) + Str("token") + Bytes({'h', 3, 'h', 1, 'K', 11});
  const std::string bytes = Infos({first, second});
  ExpectSameAsScanFirst(bytes, false);
  const PickleDocument doc = ParsePickle(bytes, "t.pkl", Records());
  const PickleNode& record = *doc.root->Get("infos")->items.at(1);
  EXPECT_EQ(record.Get("token")->text, "p");
  EXPECT_EQ(record.Get("timestamp")->integer, 11);
  EXPECT_EQ(doc.root->Get("infos")->items.at(0)->Get("token")->text, "t0");
  EXPECT_EQ(doc.skipped_values, 2u);
}

// A list the skip stepped over, read back by kept values: the dropped value is run again, once,
// and the list is the one object Python shares (a change through one read shows in the others).
TEST(PickleOnePass, AValueTheSkipSteppedOverIsRunAgainWhenAKeptValueReadsIt) {
  const std::string pairs = Str("cams") + Bytes({']', 'q', 0, '(', 'K', 1, 'K', 2, 'e'}) + Str("token") +
                            Bytes({'h', 0}) + Str("gt_names") + Bytes({'h', 0, 'K', 3, 'a'}) + Str("timestamp") +
                            Bytes({'h', 0});
  ExpectSameAsScanFirst(Infos({pairs}), false);
  const PickleDocument doc = ParsePickle(Infos({pairs}), "t.pkl", Records());
  const PickleNode& record = *doc.root->Get("infos")->items.at(0);
  ASSERT_EQ(record.Get("token")->items.size(), 3u);
  EXPECT_EQ(record.Get("token")->items[2]->integer, 3);
  EXPECT_EQ(record.Get("timestamp"), record.Get("token"));
  EXPECT_EQ(doc.skipped_values, 1u);
}

// A dropped dict read back outside its record, right above the record list (then dropped, and read
// back again as a top-level value): run again, it is no record, and stays whole.
TEST(PickleOnePass, AValueRunAgainAboveTheRecordListIsNoRecord) {
  const std::string bytes = Bytes({0x80, 2, '}', '(', 'X', 5, 0, 0, 0}) + "infos" + Bytes({']', '(', '}', '('}) +
                            Str("token") + Str("t0") + Str("cams") + Bytes({'}', 'q', 0, '('}) + Str("version") +
                            Str("v1") + Bytes({'u', 'u', 'e', 'h', 0, '0'}) + Str("metadata") +
                            Bytes({'h', 0, 'u', '.'});
  ExpectSameAsScanFirst(bytes, false);
  const PickleDocument doc = ParsePickle(bytes, "t.pkl", Records());
  ASSERT_NE(doc.root->Get("metadata")->Get("version"), nullptr);
  EXPECT_EQ(doc.root->Get("metadata")->Get("version")->text, "v1");
}

// What the one pass keeps no node of, read back by a kept value: a list built in a record, bytes
// longer than CPython's singletons, an index stored again over a str. Each reads the file again, to
// the scan's tree.
TEST(PickleOnePass, AReadBackOfAValueNotKeptReadsTheFileAgain) {
  const std::string built_list = Str("token") + Bytes({']', 'q', 0, 'K', 1, 'a'}) + Str("gt_names") + Bytes({'h', 0});
  const std::string long_bytes = Str("token") + Bytes({'C', 2, 'a', 'b', 'q', 0}) + Str("gt_names") + Bytes({'h', 0});
  const std::string stored_again =
      Str("token") + Str("a") + Bytes({'q', 0, '0', ']', 'q', 0, 'K', 5, 'a'}) + Str("gt_names") + Bytes({'h', 0});
  for (const std::string& pairs : {built_list, long_bytes, stored_again}) {
    ExpectSameAsScanFirst(Infos({pairs}), true);
  }
  const PickleDocument doc = ParsePickle(Infos({stored_again}), "t.pkl", Records());
  const PickleNode* names = doc.root->Get("infos")->items.at(0)->Get("gt_names");
  ASSERT_EQ(names->type, PickleNode::Type::kList);
  EXPECT_EQ(names->items.at(0)->integer, 5);
  // A str stored again over a str: the later one, in one pass.
  const std::string str_again =
      Str("token") + Str("a") + Bytes({'q', 0, '0'}) + Str("b") + Bytes({'q', 0}) + Str("gt_names") + Bytes({'h', 0});
  ExpectSameAsScanFirst(Infos({str_again}), false);
  EXPECT_EQ(ParsePickle(Infos({str_again}), "t.pkl", Records()).root->Get("infos")->items.at(0)->Get("gt_names")->text,
            "b");
}

// A record handed over (APPEND) before a later one reads back a list it built: the file is read
// again, and each record is handed over once.
TEST(PickleOnePass, ARecordHandedOverBeforeTheReadAgainIsNotHandedOverTwice) {
  const std::string later = Str("token") + Bytes({']', 'q', 0, 'K', 1, 'a'}) + Str("gt_names") + Bytes({'h', 0});
  const std::string bytes = Bytes({0x80, 2, '}', '(', 'X', 5, 0, 0, 0}) + "infos" + Bytes({']', '}', '('}) +
                            Str("token") + Str("t0") + Bytes({'u', 'a', '(', '}', '('}) + later +
                            Bytes({'u', 'e', 'u', '.'});
  PickleOptions options = Records();
  std::vector<size_t> handed;
  options.on_record = [&](const PickleNode& record, uint64_t index) {
    EXPECT_EQ(index, handed.size());
    handed.push_back(record.Get("token")->type == PickleNode::Type::kString ? 0 : record.Get("token")->items.size());
  };
  const PickleDocument doc = ParsePickle(bytes, "t.pkl", options);
  EXPECT_TRUE(doc.memo_rescanned);
  EXPECT_EQ(handed, (std::vector<size_t>{0, 1}));
}

// Records handed over before the read again are not handed over twice, and each record once in
// all: a synthetic Flight Recorder dump whose entries repeat as BINGETs of memoized dicts.
TEST(PickleOnePass, ARecordReadBackReadsTheFileAgainHandingEachRecordOverOnce) {
  const std::string bytes = ReadFile(kStream + "synthetic_fr_shared_p2.pkl");
  for (const bool scan_first : {false, true}) {
    PickleOptions options = FlightRecorder();
    options.memo_scan_first = scan_first;
    std::vector<int64_t> ids;
    options.on_record = [&](const PickleNode& record, uint64_t index) {
      EXPECT_EQ(index, ids.size());
      ids.push_back(record.Get("record_id")->integer);
    };
    const PickleDocument doc = ParsePickle(bytes, "shared.pkl", options);
    EXPECT_EQ(doc.memo_rescanned, !scan_first);
    EXPECT_FALSE(doc.skip_restarted);
    ASSERT_EQ(ids.size(), 6u);
    EXPECT_EQ(ids[0], ids[2]);  // [e0, e1, e0, e2, e1, e2]
    EXPECT_EQ(ids[1], ids[4]);
    EXPECT_EQ(ids[3], ids[5]);
  }
}

// A str Python would refuse (not UTF-8), inside a dropped value the skip steps over unchecked, then
// read back by a kept value: the error the scan gives, where the str is.
TEST(PickleOnePass, ABadStrReadBackFailsAsTheScanSays) {
  const std::string pairs = Str("cams") + Str("\xff\xfe") + Bytes({'q', 0}) + Str("token") + Bytes({'h', 0});
  uint64_t scanned_offset = 0, one_offset = 0;
  const std::string scanned = ErrorOf(Infos({pairs}), ScanFirst(Records()), &scanned_offset);
  EXPECT_NE(scanned.find("not valid UTF-8"), std::string::npos) << scanned;
  EXPECT_EQ(ErrorOf(Infos({pairs}), Records(), &one_offset), scanned);
  EXPECT_EQ(one_offset, scanned_offset);
}

// The same for what an allowed global makes, which the skip does not read: _codecs.encode of a str
// beyond Latin-1 in a dropped value, its bytes read back by a kept value. The run again fails, and
// the error is the scan's.
TEST(PickleOnePass, AContentErrorOfAValueRunAgainIsTheScans) {
  const std::string encode = "c_codecs\nencode\n" + Bytes({'q', 0}) + Str("x") + Str("latin1") + Bytes({0x86, 'R'});
  const std::string bad = Bytes({'h', 0}) + Str("\xc4\x80") + Str("latin1") + Bytes({0x86, 'R', 'q', 1});
  const std::string pairs = Str("token") + encode + Str("cams") + bad + Str("gt_names") + Bytes({'h', 1});
  uint64_t scanned_offset = 0, one_offset = 0;
  const std::string scanned = ErrorOf(Infos({pairs}), ScanFirst(Records()), &scanned_offset);
  EXPECT_NE(scanned.find("beyond latin-1"), std::string::npos) << scanned;
  EXPECT_EQ(ErrorOf(Infos({pairs}), Records(), &one_offset), scanned);
  EXPECT_EQ(one_offset, scanned_offset);
  // Without the read back, the one pass steps over it: nothing reads that value.
  const std::string unread = Str("token") + encode + Str("cams") + bad + Str("gt_names") + Str("n");
  const PickleDocument doc = ParsePickle(Infos({unread}), "t.pkl", Records());
  EXPECT_EQ(doc.skipped_values, 1u);
  EXPECT_FALSE(doc.memo_rescanned);
}

}  // namespace
}  // namespace petrsim
