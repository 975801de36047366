// The pickle reader's numpy mode and record mode (formats/pickle/pickle.h), against pickles written by
// Debian's python3-numpy (tests/data/importers/, scripts/make_import_fixtures.py) and by hand.
// Its torch tensors and opaque globals: pickle_torch_test.cc; the plain-data reader's own tests:
// diagnose_test.cc; the helpers both use: pickle_test_util.h.
#include "formats/pickle/pickle.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/utf8.h"
#include "tests/pickle_test_util.h"

namespace petrsim {
namespace {

const std::string kData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/importers/";

nlohmann::json Expected() { return nlohmann::json::parse(ReadFile(kData + "expected.json")); }

class NumpyProtocols : public testing::TestWithParam<int> {};

TEST_P(NumpyProtocols, ReadsEveryDtypeAsNumpyWroteIt) {
  const std::string path = kData + "numpy_values_p" + std::to_string(GetParam()) + ".pkl";
  const PickleDocument doc = ParsePickle(ReadFile(path), path, Numpy());
  ASSERT_NE(doc.root, nullptr);
  const nlohmann::json expected = Expected()["numpy_values"];
  for (const auto& [key, want] : expected.items()) {
    SCOPED_TRACE(key);
    const PickleNode* array = doc.root->Get(key);
    ASSERT_NE(array, nullptr);
    ASSERT_EQ(array->type, PickleNode::Type::kNumpyArray);
    EXPECT_EQ(DtypeName(*array), want["dtype"].get<std::string>());
    EXPECT_EQ(array->shape, want["shape"].get<std::vector<int64_t>>());
    const auto& values = want["values"];
    ASSERT_EQ(NumpyCount(*array), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].is_string()) {
        EXPECT_EQ(NumpyString(*array, i), values[i].get<std::string>());
      } else if (array->dtype.kind == 'f') {
        EXPECT_EQ(NumpyFloat(*array, i), values[i].get<double>());
      } else {
        EXPECT_EQ(NumpyInt(*array, i), values[i].get<int64_t>());
      }
    }
  }
  // Object arrays hold pickled values; scalars their dtype and bytes.
  const PickleNode* objects = doc.root->Get("O");
  ASSERT_NE(objects, nullptr);
  ASSERT_EQ(objects->items.size(), 3u);
  EXPECT_EQ(objects->items[0]->type, PickleNode::Type::kNumpyArray);
  EXPECT_EQ(NumpyFloat(*objects->items[0], 1), 2.0);
  EXPECT_EQ(objects->items[1]->text, "x");
  EXPECT_EQ(objects->items[2]->integer, 3);
  EXPECT_EQ(NumpyFloat(*doc.root->Get("scalar_f8"), 0), 2.5);
  EXPECT_EQ(NumpyInt(*doc.root->Get("scalar_i8"), 0), -9);
  EXPECT_EQ(NumpyInt(*doc.root->Get("scalar_b"), 0), 1);
  EXPECT_EQ(doc.root->Get("scalar_b")->type, PickleNode::Type::kNumpyScalar);
  EXPECT_EQ(DescribePickleValue(*doc.root->Get("f8")), "float64 array of shape (2, 3)");
  EXPECT_EQ(DescribePickleValue(*doc.root->Get("U")), "str (<U10) array of shape (3,)");
}

INSTANTIATE_TEST_SUITE_P(Protocols, NumpyProtocols, testing::Values(2, 3, 4, 5));

TEST(PickleNumpy, TheDefaultStillRefusesEveryGlobal) {
  // The Flight Recorder reader's strictness: numpy support is opt-in.
  const std::string bytes = ReadFile(kData + "numpy_values_p2.pkl");
  PickleOptions plain;
  plain.salvage = false;
  const std::string error = ErrorOf(bytes, plain);
  EXPECT_NE(error.find("unsupported pickle opcode GLOBAL (0x63)"), std::string::npos) << error;
  const std::string p5 = ReadFile(kData + "numpy_values_p5.pkl");
  EXPECT_NE(ErrorOf(p5, plain).find("unsupported pickle opcode STACK_GLOBAL"), std::string::npos);
  // The Flight Recorder's call: what was read before the global, and the error.
  const PickleDocument salvaged = ParsePickle(bytes, "fr.pkl");
  ASSERT_TRUE(salvaged.partial.has_value());
  EXPECT_NE(salvaged.partial->find("fr.pkl: byte 15: unsupported pickle opcode GLOBAL"), std::string::npos)
      << *salvaged.partial;
}

TEST(PickleNumpy, RefusesOtherGlobalsByNameAndOffset) {
  uint64_t offset = 0;
  // What `pickle.dumps` writes for an object whose __reduce__ returns (os.system, (...)).
  std::string error = ErrorOf(ReadFile(kData + "bad/calls_system.pkl"), Numpy(), &offset);
  EXPECT_NE(error.find("t.pkl: byte 21: refused global posix.system"), std::string::npos) << error;
  EXPECT_EQ(offset, 21u);
  error = ErrorOf(ReadFile(kData + "bad/calls_eval.pkl"), Numpy(), &offset);
  EXPECT_NE(error.find("refused global builtins.eval"), std::string::npos) << error;
  EXPECT_EQ(offset, 29u);  // STACK_GLOBAL, after its two strings
  // GLOBAL with names that are allowed elsewhere, or look alike.
  for (const std::string& global : {std::string("collections\ndefaultdict\n"), std::string("numpy\nload\n"),
                                    std::string("numpy.core.multiarray\n_reconstruct_\n"),
                                    std::string("builtins\nbytearray\n"), std::string("os\nsystem\n")}) {
    const std::string bytes = Bytes({0x80, 2, 'c'}) + global + Bytes({')', 'R', '.'});
    error = ErrorOf(bytes, Numpy(), &offset);
    EXPECT_NE(error.find("refused global"), std::string::npos) << global << error;
    EXPECT_EQ(offset, 2u);
  }
  // Non-printable names are escaped in the message.
  error = ErrorOf(Bytes({0x80, 2, 'c', 'o', 0x01, '\n', 'x', '\n', '.'}), Numpy());
  EXPECT_NE(error.find("refused global o\\x01.x"), std::string::npos) << error;
}

TEST(PickleNumpy, AllowedGlobalsAreInterpretedOnlyAsNumpyUsesThem) {
  // numpy.ndarray called directly.
  std::string error = ErrorOf(Bytes({0x80, 2, 'c'}) + "numpy\nndarray\n" + Bytes({')', 'R', '.'}), Numpy());
  EXPECT_NE(error.find("numpy.ndarray is called directly"), std::string::npos) << error;
  // _codecs.encode with another encoding.
  error =
      ErrorOf(Bytes({0x80, 2, 'c'}) + "_codecs\nencode\n" + Str("a") + Str("utf8") + Bytes({0x86, 'R', '.'}), Numpy());
  EXPECT_NE(error.find("_codecs.encode with encoding 'utf8'"), std::string::npos) << error;
  // bytes() with an argument.
  error = ErrorOf(Bytes({0x80, 2, 'c'}) + "__builtin__\nbytes\n" + Str("a") + Bytes({0x85, 'R', '.'}), Numpy());
  EXPECT_NE(error.find("bytes() with arguments"), std::string::npos) << error;
  // REDUCE of something that is not a global.
  error = ErrorOf(Bytes({0x80, 2, 'N', ')', 'R', '.'}), Numpy());
  EXPECT_NE(error.find("REDUCE calls a None"), std::string::npos) << error;
  // BUILD on a dict (an object's __setstate__ would run code).
  error = ErrorOf(Bytes({0x80, 2, '}', '}', 'b', '.'}), Numpy());
  EXPECT_NE(error.find("BUILD on a dict"), std::string::npos) << error;
  // collections.OrderedDict with arguments, and with a state (an OrderedDict subclass's
  // attributes).
  error = ErrorOf(Bytes({0x80, 2, 'c'}) + "collections\nOrderedDict\n" + Bytes({']', 0x85, 'R', '.'}), Numpy());
  EXPECT_NE(error.find("collections.OrderedDict() with arguments"), std::string::npos) << error;
  error = ErrorOf(Bytes({0x80, 2, 'c'}) + "collections\nOrderedDict\n" + Bytes({')', 'R', '}', 'b', '.'}), Numpy());
  EXPECT_NE(error.find("BUILD on a dict"), std::string::npos) << error;
  // Without numpy mode (Flight Recorder dumps) it is refused like every global.
  PickleOptions plain = Numpy();
  plain.numpy = false;
  error = ErrorOf(Bytes({0x80, 2, 'c'}) + "collections\nOrderedDict\n" + Bytes({')', 'R', '.'}), plain);
  EXPECT_NE(error.find("unsupported pickle opcode GLOBAL"), std::string::npos) << error;
  // NEWOBJ stays refused.
  error = ErrorOf(Bytes({0x80, 2, 'N', ')', 0x81, '.'}), Numpy());
  EXPECT_NE(error.find("unsupported pickle opcode NEWOBJ"), std::string::npos) << error;
  // protocol 2's bytes: _codecs.encode('\xe9', 'latin1') -> b'\xe9'.
  const PickleDocument doc = ParsePickle(Bytes({0x80, 2, 'c'}) + "_codecs\nencode\n" + Bytes({0x8c, 2, 0xc3, 0xa9}) +
                                             Str("latin1") + Bytes({0x86, 'R', '.'}),
                                         "t.pkl", Numpy());
  ASSERT_EQ(doc.root->type, PickleNode::Type::kBytes);
  EXPECT_EQ(doc.root->text, "\xe9");
}

// Protocol 2's bytes as Latin-1 str, UTF-8 encoded: every byte value decodes, and any other
// encoding is refused wherever it stands (the decoder checks a whole string at once).
TEST(PickleNumpy, Latin1StrDecodesEveryByteAndRefusesEverythingElse) {
  const auto encode = [](const std::string& utf8) {
    return Bytes({0x80, 2, 'c'}) + "_codecs\nencode\n" + Bytes({'X'}) +
           Bytes({static_cast<int>(utf8.size() & 0xff), static_cast<int>((utf8.size() >> 8) & 0xff), 0, 0}) + utf8 +
           Str("latin1") + Bytes({0x86, 'R', '.'});
  };
  // All 256 byte values, each as Python writes it, in an order that puts every kind next to every kind.
  std::string utf8, want;
  for (int round = 0; round < 2; ++round) {
    for (int b = 0; b < 256; ++b) {
      const int value = round == 0 ? b : (b * 97 + 13) % 256;
      want += static_cast<char>(value);
      if (value < 0x80) {
        utf8 += static_cast<char>(value);
      } else {
        utf8 += static_cast<char>(0xC0 | (value >> 6));
        utf8 += static_cast<char>(0x80 | (value & 0x3F));
      }
    }
  }
  const PickleDocument doc = ParsePickle(encode(utf8), "t.pkl", Numpy());
  ASSERT_EQ(doc.root->type, PickleNode::Type::kBytes);
  EXPECT_EQ(doc.root->text, want);
  EXPECT_EQ(ParsePickle(encode(""), "t.pkl", Numpy()).root->text, "");
  // A two-byte character at every offset of an ASCII run (the decoder copies eight ASCII bytes at
  // once), and at the very end.
  for (size_t k = 0; k <= 17; ++k) {
    const std::string run(k, 'a');
    EXPECT_EQ(ParsePickle(encode(run + "\xc3\xa9" + std::string(9, 'b')), "t.pkl", Numpy()).root->text,
              run + "\xe9" + std::string(9, 'b'))
        << k;
    EXPECT_EQ(ParsePickle(encode(run + "\xc2\x80"), "t.pkl", Numpy()).root->text, run + "\x80") << k;
  }
  // A character beyond Latin-1 (U+0100), three-byte UTF-8: valid text, not protocol 2's bytes.
  for (const std::string bad : {"a\xc4\x80"
                                "b",
                                "\xe0\xa0\x80"}) {
    const std::string error = ErrorOf(encode(bad), Numpy());
    EXPECT_NE(error.find("_codecs.encode of a str with characters beyond latin-1"), std::string::npos)
        << testing::PrintToString(bad) << ": " << error;
  }
  // A lone lead at the end, a continuation first, a lead without its continuation, a continuation
  // after an ASCII byte, a stray 0xff: not UTF-8, so refused where the str is read, as Python does
  // (issue 33).
  for (const std::string bad : {"ab\xc3",
                                "\x80"
                                "ab",
                                "\xc2"
                                "ab",
                                "a\x80", "a\xff"}) {
    const std::string error = ErrorOf(encode(bad), Numpy());
    EXPECT_NE(error.find("a str that is not valid UTF-8 (Python refuses to load it)"), std::string::npos)
        << testing::PrintToString(bad) << ": " << error;
  }
}

// numpy.dtype(spec, False, True) with an optional BUILD state.
std::string Dtype(const std::string& spec, const std::string& state = "") {
  return Bytes({'c'}) + "numpy\ndtype\n" + Str(spec) + Bytes({0x89, 0x88, 0x87, 'R'}) + state;
}
// (3, order, None, None, None, elsize, -1, 0) then BUILD.
std::string DtypeState(const std::string& order, int elsize = -1, bool structured = false) {
  return Bytes({'(', 'K', 3}) + Str(order) + Bytes({'N'}) + (structured ? Str("a") : Bytes({'N'})) +
         Bytes({'N', 'J', elsize & 0xff, (elsize >> 8) & 0xff, (elsize >> 16) & 0xff, (elsize >> 24) & 0xff, 'J', 0xff,
                0xff, 0xff, 0xff, 'K', 0, 't', 'b'});
}

TEST(PickleNumpy, RefusesDtypesItDoesNotRead) {
  for (const std::string spec : {"V8", "M8", "c16", "f2", "i3", "b2", ">f8", "x", "f", "U5x"}) {
    const std::string error = ErrorOf(Bytes({0x80, 2}) + Dtype(spec) + Bytes({'.'}), Numpy());
    EXPECT_NE(error.find("numpy dtype '" + spec + "'"), std::string::npos) << spec << ": " << error;
  }
  std::string error = ErrorOf(Bytes({0x80, 2}) + Dtype("f8", DtypeState(">")) + Bytes({'.'}), Numpy());
  EXPECT_NE(error.find("big-endian"), std::string::npos) << error;
  error = ErrorOf(Bytes({0x80, 2}) + Dtype("f8", DtypeState("<", -1, true)) + Bytes({'.'}), Numpy());
  EXPECT_NE(error.find("structured"), std::string::npos) << error;
  // A string dtype's size comes from its state's elsize.
  const PickleDocument doc =
      ParsePickle(Bytes({0x80, 2}) + Dtype("U0", DtypeState("<", 12)) + Bytes({'.'}), "t.pkl", Numpy());
  EXPECT_EQ(doc.root->dtype.kind, 'U');
  EXPECT_EQ(doc.root->dtype.itemsize, 12u);
  error = ErrorOf(Bytes({0x80, 2}) + Dtype("U0", DtypeState("<", 13)) + Bytes({'.'}), Numpy());
  EXPECT_NE(error.find("element size 13"), std::string::npos) << error;
}

// _reconstruct(ndarray, (0,), b'b') then BUILD (1, shape, dtype, fortran, data).
std::string Array(const std::string& shape_ops, const std::string& dtype, const std::string& data,
                  bool fortran = false) {
  return Bytes({'c'}) + "numpy.core.multiarray\n_reconstruct\n" + Bytes({'c'}) + "numpy\nndarray\n" +
         Bytes({'K', 0, 0x85, 'C', 1, 'b', 0x87, 'R', '(', 'K', 1}) + shape_ops + dtype +
         Bytes({fortran ? 0x88 : 0x89, 'B'}) +
         Bytes({static_cast<int>(data.size() & 0xff), static_cast<int>((data.size() >> 8) & 0xff), 0, 0}) + data +
         Bytes({'t', 'b'});
}

TEST(PickleNumpy, ChecksShapesAgainstTheData) {
  // (2, 3) int8 with 6 bytes: fine; with 5: refused.
  const std::string shape = Bytes({'K', 2, 'K', 3, 0x86});
  const PickleDocument doc = ParsePickle(
      Bytes({0x80, 3}) + Array(shape, Dtype("i1"), "\x01\x02\x03\x04\x05\x06") + Bytes({'.'}), "t.pkl", Numpy());
  EXPECT_EQ(NumpyInt(*doc.root, 5), 6);
  std::string error =
      ErrorOf(Bytes({0x80, 3}) + Array(shape, Dtype("i1"), "\x01\x02\x03\x04\x05") + Bytes({'.'}), Numpy());
  EXPECT_NE(error.find("numpy array of dtype |i1 and shape (2, 3): 6 elements x 1 bytes, but the "
                       "data holds 5 bytes"),
            std::string::npos)
      << error;
  // Fortran order is read back in C order.
  const PickleDocument fortran = ParsePickle(
      Bytes({0x80, 3}) + Array(shape, Dtype("i1"), "\x01\x02\x03\x04\x05\x06", true) + Bytes({'.'}), "t.pkl", Numpy());
  std::vector<int64_t> c_order;
  for (int i = 0; i < 6; ++i) c_order.push_back(NumpyInt(*fortran.root, i));
  EXPECT_EQ(c_order, (std::vector<int64_t>{1, 3, 5, 2, 4, 6}));
  // A negative dimension, too many dimensions, more elements than the file has bytes.
  error = ErrorOf(Bytes({0x80, 3}) + Array(Bytes({'J', 0xff, 0xff, 0xff, 0xff, 0x85}), Dtype("i1"), "") + Bytes({'.'}),
                  Numpy());
  EXPECT_NE(error.find("expected non-negative int"), std::string::npos) << error;
  std::string many = Bytes({'('});
  for (int i = 0; i < 33; ++i) many += Bytes({'K', 1});
  many += Bytes({'t'});
  error = ErrorOf(Bytes({0x80, 3}) + Array(many, Dtype("i1"), "\x01") + Bytes({'.'}), Numpy());
  EXPECT_NE(error.find("33 dimensions (at most 32)"), std::string::npos) << error;
  const std::string huge = Bytes({'J', 0, 0, 0, 0x40, 'J', 0, 0, 0, 0x40, 0x86});
  error = ErrorOf(Bytes({0x80, 3}) + Array(huge, Dtype("f8"), "") + Bytes({'.'}), Numpy());
  EXPECT_NE(error.find("more elements than the file has bytes"), std::string::npos) << error;
  // The state's dtype must be a dtype; a second BUILD is refused.
  error = ErrorOf(Bytes({0x80, 3}) + Array(shape, Bytes({'N'}), "\x01\x02\x03\x04\x05\x06") + Bytes({'.'}), Numpy());
  EXPECT_NE(error.find("numpy array dtype is a None"), std::string::npos) << error;
  error = ErrorOf(Bytes({0x80, 3}) + Array(shape, Dtype("i1"), "\x01\x02\x03\x04\x05\x06") + Bytes({'N', 'b', '.'}),
                  Numpy());
  EXPECT_NE(error.find("BUILD on a numpy.ndarray"), std::string::npos) << error;
  // The hand-edited fixture: a (1, 1) array relabelled (2, 7).
  error = ErrorOf(ReadFile(kData + "bad/array_shape_mismatch.pkl"), Numpy());
  EXPECT_NE(error.find("shape (2, 7): 14 elements x 8 bytes, but the data holds 8 bytes"), std::string::npos) << error;
}

TEST(PickleNumpy, TruncatedNumpyPicklesFailWithAnOffset) {
  const std::string bytes = ReadFile(kData + "numpy_values_p2.pkl");
  for (size_t cut : {size_t{1}, size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    uint64_t offset = 0;
    const std::string error = ErrorOf(bytes.substr(0, cut), Numpy(), &offset);
    EXPECT_NE(error.find("truncated"), std::string::npos) << cut << ": " << error;
    EXPECT_LE(offset, cut);
  }
}

// --- Record mode
// ----------------------------------------------------------------------------------

TEST(PickleRecords, KeepTheRecordKeysExactlyAsAFullParseReadsThem) {
  for (const std::string name : {"mini_infos_train.pkl", "mini_infos_val.pkl", "mini_infos_val_p3.pkl",
                                 "mini_infos_val_p4.pkl", "mini_infos_val_p5.pkl"}) {
    SCOPED_TRACE(name);
    const std::string bytes = ReadFile(kData + name);
    const PickleDocument full = ParsePickle(bytes, name, Numpy());
    const PickleDocument records = ParsePickle(bytes, name, Records());
    const PickleNode* full_infos = full.root->Get("infos");
    const PickleNode* infos = records.root->Get("infos");
    ASSERT_NE(infos, nullptr);
    ASSERT_EQ(infos->items.size(), full_infos->items.size());
    for (size_t i = 0; i < infos->items.size(); ++i) {
      const PickleNode& info = *infos->items[i];
      const PickleNode& want = *full_infos->items[i];
      for (const std::string key : {"token", "timestamp", "gt_boxes", "gt_names", "num_lidar_pts"}) {
        ASSERT_NE(info.Get(key), nullptr) << key;
        EXPECT_TRUE(SameValue(*info.Get(key), *want.Get(key))) << i << " " << key;
      }
      // Only the length of the sweeps; everything else dropped.
      EXPECT_EQ(info.Get("sweeps")->items.size(), want.Get("sweeps")->items.size());
      for (const PickleNode* sweep : info.Get("sweeps")->items) EXPECT_EQ(sweep->type, PickleNode::Type::kDropped);
      EXPECT_EQ(info.Get("cams")->type, PickleNode::Type::kDropped);
      EXPECT_EQ(info.Get("valid_flag")->type, PickleNode::Type::kDropped);
    }
    // Outside the records nothing is dropped.
    EXPECT_EQ(records.root->Get("metadata")->Get("version")->text, "v1.0-mini");
    // Far fewer nodes survive than a full parse builds.
    EXPECT_LT(records.arena.size() * 4, full.arena.size());
  }
}

// {'infos': [{'token': 't0', 'big': [0, 1, ..., n-1], 'drop': [0, ..., n-1]}, {'token': 't1'}]}:
// records larger than the young generation, so collections run in the middle of one.
std::string BigRecords(int n) {
  std::string p = Bytes({0x80, 2, '}', 'q', 0, '(', 'X', 5, 0, 0, 0}) + "infos" + Bytes({']', '(', '}', '('});
  p += Str("token") + Bytes({'q', 1}) + Str("t0") + Str("big") + Bytes({']', '('});
  std::string items;
  for (int i = 0; i < n; ++i) {
    items += Bytes({'J', i & 0xff, (i >> 8) & 0xff, (i >> 16) & 0xff, (i >> 24) & 0xff});
    if (i % 1000 == 999) items += Bytes({'e', '('});
  }
  p += items + Bytes({'e'}) + Str("drop") + Bytes({']', '('}) + items + Bytes({'e', 'u'});
  p += Bytes({'}', 'h', 1}) + Str("t1") + Bytes({'s', 'e'}) + Str("metadata") + Bytes({'}', 'u', '.'});
  return p;
}

TEST(PickleRecords, SurviveCollectionsInTheMiddleOfARecord) {
  PickleOptions options = Numpy();
  options.record_lists = {"infos"};
  options.record_keys = {"token", "big"};
  const int n = 300000;
  const PickleDocument doc = ParsePickle(BigRecords(n), "big.pkl", options);
  const PickleNode* infos = doc.root->Get("infos");
  ASSERT_NE(infos, nullptr);
  ASSERT_EQ(infos->items.size(), 2u);
  const PickleNode* big = infos->items[0]->Get("big");
  ASSERT_NE(big, nullptr);
  ASSERT_EQ(big->items.size(), static_cast<size_t>(n));
  int64_t sum = 0;
  for (const PickleNode* item : big->items) sum += item->integer;
  EXPECT_EQ(sum, int64_t{n} * (n - 1) / 2);
  EXPECT_EQ(infos->items[0]->Get("drop")->type, PickleNode::Type::kDropped);
  EXPECT_EQ(infos->items[0]->Get("token")->text, "t0");
  EXPECT_EQ(infos->items[1]->Get("token")->text, "t1");  // the memoized key, read back
  // The same file without record mode agrees.
  const PickleDocument full = ParsePickle(BigRecords(n), "big.pkl", Numpy());
  EXPECT_TRUE(SameValue(*full.root->Get("infos")->items[0]->Get("big"), *big));
}

// {'a': 'x', 'b': 'x'}: the dict at memo 5, then 'x' PUT at 5 twice (len(memo) stays 1) and
// MEMOIZEd at len(memo) = 1, which BINGET 1 reads back (as Python's pickle does).
TEST(PickleMemo, MemoizeStoresAtPythonsLenOfTheMemo) {
  const std::string bytes = Bytes({0x80, 4, '}', 'q', 5, '('}) + Str("a") + Str("x") + Bytes({'q', 5, 'q', 5, 0x94}) +
                            Str("b") + Bytes({'h', 1, 'u', '.'});
  PickleOptions records = Records();
  for (const PickleOptions& options : {Numpy(), records}) {
    const PickleDocument doc = ParsePickle(bytes, "memo.pkl", options);
    ASSERT_NE(doc.root->Get("b"), nullptr);
    EXPECT_EQ(doc.root->Get("b")->type, PickleNode::Type::kString);
    EXPECT_EQ(doc.root->Get("b")->text, "x");
  }
}

// [_frombuffer(buf, dtype('u1'), (n,), 'C'), _frombuffer(<the same memoized arguments>), ...]:
// `copies` arrays of one n-byte buffer.
std::string SharedBuffer(uint32_t n, int copies) {
  const auto u32 = [](uint32_t v) {
    return Bytes({static_cast<int>(v & 0xff), static_cast<int>((v >> 8) & 0xff), static_cast<int>((v >> 16) & 0xff),
                  static_cast<int>(v >> 24)});
  };
  std::string p = Bytes({0x80, 4, ']', '('});
  p += "cnumpy.core.numeric\n_frombuffer\n" + Bytes({'q', 1, '('});
  p += "B" + u32(n) + std::string(n, '\7') + Bytes({'q', 2});
  p += "cnumpy\ndtype\n(" + Str("u1") + Bytes({0x89, 0x88, 't', 'R', '(', 'K', 3}) + Str("|") + "NNNJ" +
       u32(0xffffffff) + "J" + u32(0xffffffff) + Bytes({'K', 0, 't', 'b', 'q', 3});
  p += "(J" + u32(n) + Bytes({'t', 'q', 4}) + Str("C") + Bytes({'q', 5, 't', 'R'});
  for (int i = 1; i < copies; ++i) p += Bytes({'h', 1, '(', 'h', 2, 'h', 3, 'h', 4, 'h', 5, 't', 'R'});
  return p + Bytes({'e', '.'});
}

TEST(PickleNumpy, CopiesOfSharedBuffersAreChargedToABudget) {
  // A few copies are what real files have (protocol 2 copies its bytes twice).
  const PickleDocument doc = ParsePickle(SharedBuffer(1000, 3), "shared.pkl", Numpy());
  ASSERT_EQ(doc.root->items.size(), 3u);
  EXPECT_EQ(NumpyInt(*doc.root->items[2], 999), 7);
  // 30 copies of a 256 KiB buffer: 7.5 MiB from a file of 256 KiB.
  uint64_t offset = 0;
  const std::string bytes = SharedBuffer(256 * 1024, 30);
  const std::string error = ErrorOf(bytes, Numpy(), &offset);
  EXPECT_NE(error.find(fmt::format("numpy data copies exceed {} bytes for a {}-byte file: shared "
                                   "buffers?",
                                   4 * bytes.size() + (1 << 20), bytes.size())),
            std::string::npos)
      << error;
  EXPECT_GT(offset, 256u * 1024);
  EXPECT_LT(offset, bytes.size());
}

// A record's sweeps list memoized once and fetched by every record: its length-only copy is
// charged too.
TEST(PickleRecords, LengthOnlyCopiesOfASharedListAreCharged) {
  const int items = 20000;
  std::string p = Bytes({0x80, 4, '}', '(', 'X', 5, 0, 0, 0}) + "infos" + Bytes({']', '('});
  for (int i = 0; i < 200; ++i) {
    p += Bytes({'}', '('}) + Str("sweeps");
    p += i == 0 ? Bytes({']', '('}) + std::string(items, 'N') + Bytes({'e', 'q', 1}) : Bytes({'h', 1});
    p += Bytes({'u'});
  }
  p += Bytes({'e', 'u', '.'});
  const std::string error = ErrorOf(p, Records());
  EXPECT_NE(error.find("numpy data copies exceed"), std::string::npos) << error;
  EXPECT_NE(error.find("a sweeps list's length"), std::string::npos) << error;
}

TEST(PickleRecords, ErrorsAreNotSalvaged) {
  const std::string bytes = ReadFile(kData + "bad/truncated.pkl");
  PickleOptions options = Records();
  options.salvage = true;
  EXPECT_THROW(ParsePickle(bytes, "cut.pkl", options), PickleError);
}

// A file that is not a pickle is refused with what it looks like (issue 28: a .pb imported as infos).
TEST(PickleNotAPickle, SaysWhatTheFileLooksLike) {
  const auto error = [](std::string_view bytes, const std::string& name) {
    try {
      ParsePickle(bytes, name, false);
    } catch (const PickleError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("\x0a\x04name", "s.pb").find("looks like a protobuf file, such as a petrsim scenario"),
            std::string::npos);
  EXPECT_NE(error("# petrsim\nmore", "README.md").find("looks like text, starting \"# petrsim\""), std::string::npos);
  EXPECT_NE(error("{\"a\": 1}", "x.pkl").find("looks like JSON text"), std::string::npos);
  EXPECT_NE(error(std::string("\x1f\x8b\x08", 3), "x.pkl").find("looks like a gzip file"), std::string::npos);
  EXPECT_NE(error(std::string("\x01\x02", 2), "x.pkl").find("looks like binary data starting with 0x01"),
            std::string::npos);
}

// Issue 33, point 4: a str must be UTF-8 as CPython's strict decoder has it (pickle does not use
// 'surrogatepass'); the error names the opcode's offset and the byte in the string and the file.
TEST(PickleUtf8, StrIsValidatedAsPythonDecodesIt) {
  const auto pickle_of = [](const std::string& text) {
    return Bytes({0x80, 4, 0x8c, static_cast<int>(text.size())}) + text + ".";
  };
  const PickleOptions plain;
  for (const std::string& valid :
       {std::string("plain ascii, longer than eight bytes"), Bytes({0xc3, 0xa9}), Bytes({0xe2, 0x82, 0xac}),
        Bytes({0xed, 0x9f, 0xbf}), Bytes({0xee, 0x80, 0x80}), Bytes({0xf0, 0x9f, 0x98, 0x80}),
        Bytes({0xf4, 0x8f, 0xbf, 0xbf}), std::string("abcdefgh") + Bytes({0xc3, 0xa9}) + "ijklmnop"}) {
    EXPECT_EQ(ErrorOf(pickle_of(valid), plain), "") << EscapedBytes(valid);
    EXPECT_EQ(ParsePickle(pickle_of(valid), "t.pkl").root->text, valid);
  }
  // Each invalid: the bytes, and the offset of the first bad byte within the string.
  const std::vector<std::pair<std::string, size_t>> invalid = {
      {Bytes({0xff}), 0},
      {Bytes({0x80}), 0},                                            // a continuation byte alone
      {Bytes({0xc0, 0x80}), 0},                                      // overlong NUL
      {Bytes({0xc1, 0xbf}), 0},                                      // overlong
      {Bytes({0xe0, 0x80, 0x80}), 0},                                // overlong 3-byte
      {Bytes({0xed, 0xa0, 0x80}), 0},                                // a surrogate (U+D800)
      {Bytes({0xed, 0xbf, 0xbf}), 0},                                // a surrogate (U+DFFF)
      {Bytes({0xf0, 0x80, 0x80, 0x80}), 0},                          // overlong 4-byte
      {Bytes({0xf4, 0x90, 0x80, 0x80}), 0},                          // above U+10FFFF
      {Bytes({0xf5, 0x80, 0x80, 0x80}), 0},                          //
      {std::string("abcdefgh") + Bytes({0xe2, 0x82}), 8},            // cut short
      {std::string("abcdefghij") + Bytes({0xc3, 0x28}) + "k", 10}};  // a bad continuation
  for (const auto& [text, at] : invalid) {
    uint64_t offset = 99;
    const std::string error = ErrorOf(pickle_of(text), plain, &offset);
    EXPECT_NE(error.find(fmt::format("a str that is not valid UTF-8 (Python refuses to load it): invalid UTF-8 at "
                                     "byte {} of {}",
                                     at, text.size())),
              std::string::npos)
        << EscapedBytes(text) << ": " << error;
    EXPECT_NE(error.find(fmt::format("at byte {} of the file", 4 + at)), std::string::npos) << error;
    EXPECT_EQ(offset, 2u);  // the opcode's
  }
  // BINUNICODE and BINUNICODE8 too; BINBYTES is bytes, never text.
  const std::string bad = Bytes({0xed, 0xa0, 0x80});
  EXPECT_NE(ErrorOf(Bytes({0x80, 4, 'X', 3, 0, 0, 0}) + bad + ".", plain).find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(ErrorOf(Bytes({0x80, 4, 0x8d, 3, 0, 0, 0, 0, 0, 0, 0}) + bad + ".", plain).find("not valid UTF-8"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(Bytes({0x80, 4, 'C', 3}) + bad + ".", plain), "");
}

// A record list past PickleOptions::record_items_max is refused as it grows, with the caller's reason.
TEST(PickleRecordMode, RefusesARecordListPastItsLimit) {
  PickleOptions options;
  options.record_lists = {"infos"};
  options.record_keys = {"token"};
  options.record_items_max = 3;
  options.record_items_why = " (the reason)";
  const auto infos_of = [](int n) {
    std::string out = Bytes({0x80, 4, '}', 0x8c, 5}) + "infos" + Bytes({']', '(', '}', 0x94});
    for (int i = 1; i < n; ++i) out += Bytes({'h', 0});
    return out + Bytes({'e', 's', '.'});
  };
  EXPECT_EQ(ErrorOf(infos_of(3), options), "");
  EXPECT_NE(ErrorOf(infos_of(4), options).find("a list of more than 3 records (the reason)"), std::string::npos);
  options.record_items_max = 0;  // no limit
  EXPECT_EQ(ErrorOf(infos_of(4), options), "");
}

}  // namespace
}  // namespace petrsim
