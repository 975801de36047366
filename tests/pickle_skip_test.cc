// Record mode's skip of dropped values (PickleOptions::skip_dropped, formats/pickle/pickle_skip.cc):
// pickles Python wrote read the same with it as without it, on every value; what the skip cannot
// follow falls back to the machine; a prediction a hand-made file proves wrong reads the file again.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/pickle/pickle.h"
#include "tests/pickle_test_util.h"

namespace petrsim {
namespace {

const std::string kData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/importers/";

// The info files scripts/make_import_fixtures.py wrote with Python's pickle (mmcv's dump, protocol
// 2, and protocols 3-5): every value, dropped or kept, the same either way; most dropped values
// skipped (cams, sweeps, the arrays the importer does not read).
TEST(PickleSkip, PythonsInfoFilesReadTheSameWithAndWithoutIt) {
  for (const std::string name : {"mini_infos_train.pkl", "mini_infos_val.pkl", "mini_infos_val_p3.pkl",
                                 "mini_infos_val_p4.pkl", "mini_infos_val_p5.pkl"}) {
    SCOPED_TRACE(name);
    const std::string bytes = ReadFile(kData + name);
    const PickleDocument built = ParsePickle(bytes, name, Records(false));
    const PickleDocument skipped = ParsePickle(bytes, name, Records(true));
    EXPECT_TRUE(SameTree(*built.root, *skipped.root));
    EXPECT_EQ(built.skipped_values, 0u);
    EXPECT_FALSE(skipped.skip_restarted);
    const uint64_t records = skipped.root->Get("infos")->items.size();
    // Each record drops about 10 values; the first values of a kind memoize what later ones fetch
    // (a global, a dtype, a key), so the machine parses those.
    EXPECT_GT(skipped.skipped_values, 5 * records) << skipped.skip_fallbacks;
    EXPECT_LT(skipped.skip_fallbacks, skipped.skipped_values / 4);
    // Fewer nodes: the skipped values made none.
    EXPECT_LE(skipped.arena.size(), built.arena.size());
  }
}

// A truncated file fails with the machine's own error and offset wherever it is cut, in a
// skipped value or not.
TEST(PickleSkip, TruncatedFilesFailAsTheMachineSays) {
  const std::string bytes = ReadFile(kData + "mini_infos_val.pkl");
  for (size_t cut = 1; cut < bytes.size(); cut += bytes.size() / 211 + 1) {
    uint64_t built_offset = 0, skipped_offset = 0;
    const std::string built = ErrorOf(bytes.substr(0, cut), Records(false), &built_offset);
    const std::string skipped = ErrorOf(bytes.substr(0, cut), Records(true), &skipped_offset);
    ASSERT_FALSE(built.empty()) << cut;
    EXPECT_EQ(built, skipped) << cut;
    EXPECT_EQ(built_offset, skipped_offset) << cut;
  }
}

// {'infos': [{'token': <kept>, 'cams': <dropped>, ...}]} with the records' inner bytes given.
std::string OneRecord(const std::string& pairs) {
  return Bytes({0x80, 2, '}', '(', 'X', 5, 0, 0, 0}) + "infos" + Bytes({']', '(', '}', '('}) + pairs +
         Bytes({'u', 'e', 'u', '.'});
}

// A dropped value memoizes a list a kept value reads back: the skip cannot drop it, so the
// machine builds it, and the kept value has it.
TEST(PickleSkip, AValueReadBackLaterIsBuilt) {
  const std::string pairs =
      Str("cams") + Bytes({']', 'q', 7, '(', 'K', 1, 'K', 2, 'e'}) + Str("token") + Bytes({'h', 7});
  for (const bool skip : {false, true}) {
    const PickleDocument doc = ParsePickle(OneRecord(pairs), "memo.pkl", Records(skip));
    const PickleNode* token = doc.root->Get("infos")->items[0]->Get("token");
    ASSERT_NE(token, nullptr);
    ASSERT_EQ(token->items.size(), 2u);
    EXPECT_EQ(token->items[1]->integer, 2);
    EXPECT_EQ(doc.root->Get("infos")->items[0]->Get("cams")->type, PickleNode::Type::kDropped);
    EXPECT_EQ(doc.skipped_values, 0u);
    EXPECT_EQ(doc.skip_fallbacks, skip ? 1u : 0u);
  }
}

// 'cams': (1, 'a') as Python writes a 2-tuple: 1, then 'a' (which looks like the next key), then
// TUPLE2. The skip ends the value after 1; TUPLE2 reaches back into it, so the file is read again
// without skipping, and the tuple (memoized, read back by 'token') is whole.
TEST(PickleSkip, AValueThatWentOnIsReadAgain) {
  const std::string pairs =
      Str("cams") + Bytes({'K', 1}) + Str("a") + Bytes({0x86, 'q', 9}) + Str("token") + Bytes({'h', 9});
  const PickleDocument built = ParsePickle(OneRecord(pairs), "tuple.pkl", Records(false));
  const PickleDocument skipped = ParsePickle(OneRecord(pairs), "tuple.pkl", Records(true));
  EXPECT_TRUE(skipped.skip_restarted);
  EXPECT_TRUE(SameTree(*built.root, *skipped.root));
  const PickleNode* token = skipped.root->Get("infos")->items[0]->Get("token");
  ASSERT_NE(token, nullptr);
  ASSERT_EQ(token->items.size(), 2u);
  EXPECT_EQ(token->items[1]->text, "a");
}

// The same read again with on_record: the record handed over before the restart (APPEND) is not
// handed over twice; the one read again is handed over once, whole.
TEST(PickleSkip, ARestartHandsOverEachRecordOnce) {
  const std::string pairs =
      Str("cams") + Bytes({'K', 1}) + Str("a") + Bytes({0x86, 'q', 9}) + Str("token") + Bytes({'h', 9});
  const std::string bytes = Bytes({0x80, 2, '}', '(', 'X', 5, 0, 0, 0}) + "infos" + Bytes({']', '}', '('}) +
                            Str("token") + Str("t0") + Bytes({'u', 'a', '(', '}', '('}) + pairs +
                            Bytes({'u', 'e', 'u', '.'});
  PickleOptions options = Records(true);
  std::vector<std::string> handed;
  options.on_record = [&](const PickleNode& record, uint64_t index) {
    EXPECT_EQ(index, handed.size());
    const PickleNode* token = record.Get("token");
    ASSERT_NE(token, nullptr);
    handed.push_back(token->type == PickleNode::Type::kString ? token->text : token->items.at(1)->text);
  };
  const PickleDocument doc = ParsePickle(bytes, "restart.pkl", options);
  EXPECT_TRUE(doc.skip_restarted);
  EXPECT_EQ(handed, (std::vector<std::string>{"t0", "a"}));
  EXPECT_EQ(doc.root->Get("infos")->items.size(), 2u);
}

// A dropped value's structure is checked as the machine checks it (the same error and offset);
// what an allowed global would make of its arguments is not read.
TEST(PickleSkip, DroppedValuesAreCheckedForStructureNotContent) {
  // APPENDS onto a dict, inside 'cams'.
  const std::string appends = Str("cams") + Bytes({'}', '(', 'K', 1, 'e'}) + Str("token") + Str("t");
  uint64_t built_offset = 0, skipped_offset = 0;
  const std::string built = ErrorOf(OneRecord(appends), Records(false), &built_offset);
  EXPECT_NE(built.find("APPENDS on a dict"), std::string::npos) << built;
  EXPECT_EQ(ErrorOf(OneRecord(appends), Records(true), &skipped_offset), built);
  EXPECT_EQ(skipped_offset, built_offset);
  // A global nobody allowed, inside 'cams': refused either way (the skip never follows GLOBAL).
  const std::string global = Str("cams") + "cos\nsystem\n" + Bytes({')', 'R'}) + Str("token") + Str("t");
  EXPECT_NE(ErrorOf(OneRecord(global), Records(true)).find("os.system"), std::string::npos);
  // _codecs.encode of a str beyond Latin-1 under a dropped key: read by the machine only when the
  // value is built (the global's first use is parsed, its second skipped).
  const std::string encode = "c_codecs\nencode\nq\x01" + Str("x") + Str("latin1") + Bytes({0x86, 'R'});
  const std::string bad = Bytes({'h', 1}) + Str("\xc4\x80") + Str("latin1") + Bytes({0x86, 'R'});
  const std::string pairs = Str("cams") + encode + Str("sweeps_extra") + bad + Str("token") + Str("t");
  EXPECT_NE(ErrorOf(OneRecord(pairs), Records(false)).find("beyond latin-1"), std::string::npos);
  const PickleDocument doc = ParsePickle(OneRecord(pairs), "content.pkl", Records(true));
  EXPECT_EQ(doc.skipped_values, 1u);
  EXPECT_EQ(doc.root->Get("infos")->items[0]->Get("token")->text, "t");
}

// A sweeps list keeps its length, skipped or built: MARK and APPENDS, APPEND, empty.
TEST(PickleSkip, LengthOnlyValuesKeepTheirLength) {
  // (BINPUT 0: the index Python's pickler writes first.)
  const std::string pairs = Str("sweeps") + Bytes({']', 'q', 0, '(', '}', 'K', 1, ')', 'e'});
  const std::string one = Str("sweeps") + Bytes({']', 'q', 0, '}', 'a'});
  for (const std::string& record : {pairs, one}) {
    for (const bool skip : {false, true}) {
      const PickleDocument doc = ParsePickle(OneRecord(record + Str("token") + Str("t")), "s.pkl", Records(skip));
      const PickleNode* sweeps = doc.root->Get("infos")->items[0]->Get("sweeps");
      ASSERT_NE(sweeps, nullptr);
      EXPECT_EQ(sweeps->items.size(), record == pairs ? 3u : 1u);
      EXPECT_EQ(doc.skipped_values, skip ? 1u : 0u);
    }
  }
}

}  // namespace
}  // namespace petrsim
