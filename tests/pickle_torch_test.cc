// The pickle reader's torch tensors and opaque globals (formats/pickle/pickle.h, PickleOptions::torch
// and opaque_globals) against pickles written by Debian's python3-torch (tests/data/pickle_torch/,
// scripts/make_torch_pickle_fixtures.py) and hand-patched copies of them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "formats/pickle/pickle.h"
#include "tests/pickle_test_util.h"

namespace petrsim {
namespace {

// --- torch tensors and opaque globals
// -----------------------------------------------------------------------------------------------
// Against pickles the real torch wrote (tests/data/pickle_torch/,
// scripts/make_torch_pickle_fixtures.py), and hand-patched copies of them.

const std::string kTorchData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/pickle_torch/";

PickleOptions Torch() {
  PickleOptions options = Numpy();
  options.torch = true;
  return options;
}

// The value at `path` ("nested/boxes/0": dict keys and list indices), or null.
const PickleNode* At(const PickleNode* node, const std::string& path) {
  size_t start = 0;
  while (node != nullptr && start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (node->type == PickleNode::Type::kDict) {
      node = node->Get(part);
    } else if (node->is_sequence() && std::stoul(part) < node->items.size()) {
      node = node->items[std::stoul(part)];
    } else {
      return nullptr;
    }
    start = end + 1;
  }
  return node;
}

std::string TorchFile(const std::string& name, int protocol) {
  return ReadFile(kTorchData + name + "_p" + std::to_string(protocol) + ".pkl");
}

class TorchProtocols : public testing::TestWithParam<int> {};

TEST_P(TorchProtocols, ReadsEveryTensorAsTorchWroteIt) {
  const std::string name = "tensors_p" + std::to_string(GetParam()) + ".pkl";
  const PickleDocument doc = ParsePickle(TorchFile("tensors", GetParam()), name, Torch());
  ASSERT_NE(doc.root, nullptr);
  ASSERT_FALSE(doc.partial.has_value());
  const nlohmann::json expected = nlohmann::json::parse(ReadFile(kTorchData + "expected.json"))["tensors"];
  ASSERT_EQ(expected.size(), 7u);
  for (const auto& [path, want] : expected.items()) {
    SCOPED_TRACE(path);
    const PickleNode* tensor = At(doc.root, path);
    ASSERT_NE(tensor, nullptr);
    ASSERT_EQ(tensor->type, PickleNode::Type::kNumpyArray);
    EXPECT_EQ(DtypeName(*tensor), want["dtype"].get<std::string>());
    EXPECT_EQ(tensor->shape, want["shape"].get<std::vector<int64_t>>());
    const auto& values = want["values"];
    ASSERT_EQ(NumpyCount(*tensor), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].is_boolean()) {
        EXPECT_EQ(NumpyInt(*tensor, i), values[i].get<bool>() ? 1 : 0) << i;
      } else if (tensor->dtype.kind == 'f') {
        EXPECT_EQ(NumpyFloat(*tensor, i), values[i].get<double>()) << i;
        EXPECT_EQ(std::signbit(NumpyFloat(*tensor, i)), std::signbit(values[i].get<double>())) << i;
      } else {
        EXPECT_EQ(NumpyInt(*tensor, i), values[i].get<int64_t>()) << i;
      }
    }
  }
  // The 0-d tensor is an array of no dims (one element); the data beside the tensors is kept.
  EXPECT_TRUE(At(doc.root, "f64_scalar")->shape.empty());
  EXPECT_EQ(DescribePickleValue(*At(doc.root, "f32")), "float32 array of shape (2, 3)");
  EXPECT_EQ(DescribePickleValue(*At(doc.root, "bool")), "bool array of shape (2, 2)");
  ASSERT_NE(At(doc.root, "nested/count"), nullptr);
  EXPECT_EQ(At(doc.root, "nested/count")->integer, 3);
}

TEST_P(TorchProtocols, RefusesTensorsThatAreNotContiguous) {
  // base.t() of a (2, 3) tensor, and arange(6)[::2]: views petrsim does not gather.
  for (const auto& [name, what] : {std::pair<std::string, std::string>{"transposed", "(size (3, 2), stride (1, 3))"},
                                   std::pair<std::string, std::string>{"strided", "(size (3,), stride (2,))"}}) {
    const std::string bytes = TorchFile(name, GetParam());
    EXPECT_THROW(ParsePickle(bytes, "t.pkl", Torch()), ScenarioError) << name;
    const std::string error = ErrorOf(bytes, Torch());
    EXPECT_NE(error.find("torch._utils._rebuild_tensor_v2: a tensor that is not C-contiguous " + what),
              std::string::npos)
        << error;
  }
}

TEST_P(TorchProtocols, RefusesDtypesItDoesNotReadByTheirStorageType) {
  for (const auto& [name, storage] : {std::pair<std::string, std::string>{"float16", "torch.HalfStorage"},
                                      std::pair<std::string, std::string>{"complex64", "torch.ComplexFloatStorage"}}) {
    const std::string error = ErrorOf(TorchFile(name, GetParam()), Torch());
    EXPECT_NE(error.find("a tensor of " + storage + " (petrsim reads float32, float64"), std::string::npos) << error;
    EXPECT_EQ(error.find("t.pkl: byte "), 0u) << error;
  }
}

TEST_P(TorchProtocols, WithoutTorchATensorIsRefusedAsBefore) {
  const std::string bytes = TorchFile("tensors", GetParam());
  std::string error = ErrorOf(bytes, Numpy());
  EXPECT_NE(error.find("refused global torch._utils._rebuild_tensor_v2"), std::string::npos) << error;
  PickleOptions plain = Numpy();
  plain.numpy = false;
  plain.torch = true;  // torch needs numpy: alone it changes nothing
  error = ErrorOf(bytes, plain);
  EXPECT_NE(error.find(GetParam() == 2 ? "unsupported pickle opcode GLOBAL" : "unsupported pickle opcode STACK_GLOBAL"),
            std::string::npos)
      << error;
}

TEST_P(TorchProtocols, OpaqueGlobalsAreInertObjectsOnlyWhenListed) {
  const std::string bytes = TorchFile("opaque", GetParam());
  // Not listed: refused at the global, before any REDUCE or NEWOBJ of it.
  std::string error = ErrorOf(bytes, Torch());
  EXPECT_NE(error.find("refused global pathlib.PosixPath"), std::string::npos) << error;
  PickleOptions options = Torch();
  options.opaque_globals = {"pathlib.PosixPath"};
  error = ErrorOf(bytes, options);
  EXPECT_NE(error.find("refused global argparse.Namespace"), std::string::npos) << error;
  // A prefix must end in '.', and an exact name must match whole.
  options.opaque_globals = {"pathlib", "pathlib.Posix", "argparse.Namespace"};
  error = ErrorOf(bytes, options);
  EXPECT_NE(error.find("refused global pathlib.PosixPath"), std::string::npos) << error;
  // Listed (exactly or by prefix): PosixPath('/a/b') (REDUCE) and argparse.Namespace(a=1)
  // (NEWOBJ, then BUILD of its __dict__) are opaque nodes beside the data.
  for (const std::vector<std::string>& listed : {std::vector<std::string>{"pathlib.PosixPath", "argparse.Namespace"},
                                                 std::vector<std::string>{"pathlib.", "argparse."}}) {
    options.opaque_globals = listed;
    const PickleDocument doc = ParsePickle(bytes, "opaque.pkl", options);
    ASSERT_NE(doc.root, nullptr);
    for (const auto& [path, global] : {std::pair<std::string, std::string>{"path", "pathlib.PosixPath"},
                                       std::pair<std::string, std::string>{"namespace", "argparse.Namespace"},
                                       std::pair<std::string, std::string>{"paths/0", "pathlib.PosixPath"}}) {
      const PickleNode* node = At(doc.root, path);
      ASSERT_NE(node, nullptr) << path;
      EXPECT_EQ(node->type, PickleNode::Type::kOpaque) << path;
      EXPECT_EQ(node->TypeName(), "object of " + global) << path;
      EXPECT_TRUE(node->items.empty() && node->entries.empty()) << path;  // its arguments are dropped
    }
    EXPECT_EQ(At(doc.root, "paths/1")->text, "x");
    EXPECT_EQ(At(doc.root, "value")->integer, 42);
  }
  // Opaque globals need numpy mode, as every global does.
  options.numpy = false;
  error = ErrorOf(bytes, options);
  EXPECT_NE(error.find("unsupported pickle opcode"), std::string::npos) << error;
}

// The first `cut` bytes of `bytes`. A protocol 4 file's FRAME (after PROTO, spanning the file) is
// shortened to match when `frame` is set, so that the cut is met inside the values.
std::string Cut(const std::string& bytes, size_t cut, bool frame) {
  std::string out = bytes.substr(0, cut);
  if (frame && cut >= 11 && static_cast<uint8_t>(out[2]) == 0x95) {
    for (int i = 0; i < 8; ++i) out[3 + i] = static_cast<char>(((cut - 11) >> (8 * i)) & 0xff);
  }
  return out;
}

TEST_P(TorchProtocols, TruncatedFilesAreRefusedAtEveryByte) {
  for (const std::string name : {"tensors", "opaque"}) {
    const std::string bytes = TorchFile(name, GetParam());
    PickleOptions options = Torch();
    options.opaque_globals = {"pathlib.", "argparse."};
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      SCOPED_TRACE(fmt::format("{} cut at {}", name, cut));
      uint64_t offset = 0;
      std::string error = ErrorOf(Cut(bytes, cut, true), options, &offset);
      EXPECT_NE(error.find("truncated"), std::string::npos) << error;
      EXPECT_LE(offset, cut);
      if (GetParam() == 4 && cut >= 11) {  // as it was cut, its FRAME is too long
        error = ErrorOf(Cut(bytes, cut, false), options);
        EXPECT_NE(error.find("t.pkl: byte 2: FRAME longer than the rest of the file"), std::string::npos) << error;
      }
      // Salvaged, it returns what it read before the cut, or throws when that is nothing.
      options.salvage = true;
      try {
        EXPECT_TRUE(ParsePickle(Cut(bytes, cut, true), name, options).partial.has_value());
      } catch (const PickleError& refused) {
        EXPECT_NE(std::string(refused.what()).find("truncated"), std::string::npos) << refused.what();
      }
      options.salvage = false;
    }
  }
}

TEST_P(TorchProtocols, RecordModeKeepsTensorsAndOpaqueObjectsAsAFullParseReadsThem) {
  // What the Argoverse 2 importer asks for (importers/mmdet3d_infos.cc): record mode with both.
  const std::string bytes = TorchFile("records", GetParam());
  PickleOptions full = Torch();
  full.opaque_globals = {"pathlib."};
  PickleOptions records = full;
  records.record_lists = {"infos"};
  records.record_keys = {"token", "gt_boxes", "path"};
  const PickleDocument want = ParsePickle(bytes, "records.pkl", full);
  const PickleDocument doc = ParsePickle(bytes, "records.pkl", records);
  const PickleNode* infos = doc.root->Get("infos");
  ASSERT_NE(infos, nullptr);
  ASSERT_EQ(infos->items.size(), 3u);
  for (size_t i = 0; i < infos->items.size(); ++i) {
    SCOPED_TRACE(i);
    const PickleNode& info = *infos->items[i];
    const PickleNode& full_info = *want.root->Get("infos")->items[i];
    for (const std::string key : {"token", "gt_boxes", "path"}) {
      ASSERT_NE(info.Get(key), nullptr) << key;
      EXPECT_TRUE(SameValue(*info.Get(key), *full_info.Get(key))) << key;
    }
    EXPECT_EQ(info.Get("gt_boxes")->shape, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(NumpyFloat(*info.Get("gt_boxes"), 2), 3.0 * i + 2);
    EXPECT_EQ(info.Get("path")->type, PickleNode::Type::kOpaque);
    EXPECT_EQ(info.Get("ignored")->type, PickleNode::Type::kDropped);
    EXPECT_EQ(full_info.Get("ignored")->type, PickleNode::Type::kNumpyArray);
  }
}

INSTANTIATE_TEST_SUITE_P(Protocols, TorchProtocols, testing::Values(2, 4));

// torch.save's legacy magic number, as a tensor's storage stream starts.
const std::string kTorchMagic = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

// The first tensor's storage stream in a protocol 4 file: where its BINBYTES or SHORT_BINBYTES
// opcode starts and the stream itself.
std::pair<size_t, std::string> FirstStorageStream(const std::string& file) {
  const size_t start = file.find(kTorchMagic);
  EXPECT_NE(start, std::string::npos);
  if (start >= 5 && file[start - 5] == 'B') {
    const size_t length = static_cast<uint8_t>(file[start - 4]) | static_cast<uint8_t>(file[start - 3]) << 8 |
                          static_cast<uint8_t>(file[start - 2]) << 16 | static_cast<uint8_t>(file[start - 1]) << 24;
    return {start - 5, file.substr(start, length)};
  }
  EXPECT_EQ(file[start - 2], 'C');
  return {start - 2, file.substr(start, static_cast<uint8_t>(file[start - 1]))};
}

// `file` (protocol 4, one FRAME) with its first storage stream replaced by `stream`.
std::string WithStorageStream(const std::string& file, const std::string& stream) {
  const auto [op, old_stream] = FirstStorageStream(file);
  const size_t old_end = file.find(kTorchMagic) + old_stream.size();
  const size_t n = stream.size();
  std::string out = file.substr(0, op) + "B" +
                    Bytes({static_cast<int>(n & 0xff), static_cast<int>((n >> 8) & 0xff),
                           static_cast<int>((n >> 16) & 0xff), static_cast<int>(n >> 24)}) +
                    stream + file.substr(old_end);
  // The FRAME after PROTO 4 spans the rest of the file.
  EXPECT_EQ(static_cast<uint8_t>(out[2]), 0x95);
  const uint64_t frame = out.size() - 11;
  for (int i = 0; i < 8; ++i) out[3 + i] = static_cast<char>((frame >> (8 * i)) & 0xff);
  return out;
}

// A stream's parts, as torch 1.13 writes a 6-element storage: the persistent id's element count
// (BININT1 after the 'cpu' location), the element count before the data, the data.
size_t NumelAt(const std::string& stream) { return stream.find("cpuq\x03K") + 6; }
size_t CountAt(const std::string& stream) {
  return stream.rfind(
             "q\x01"
             "a.") +
         4;
}

TEST(PickleTorch, StorageStreamsOfTheWrongSizeAreRefused) {
  const std::string file = TorchFile("tensors", 4);
  const std::string stream = FirstStorageStream(file).second;  // the float32 (2, 3) tensor's
  ASSERT_EQ(stream[NumelAt(stream)], 6);
  ASSERT_EQ(stream[CountAt(stream)], 6);
  ASSERT_EQ(stream.size(), CountAt(stream) + 8 + 24);
  // The stream put back as it was reads as before.
  EXPECT_EQ(NumpyFloat(*ParsePickle(WithStorageStream(file, stream), "t.pkl", Torch()).root->Get("f32"), 1), -2.25);

  const auto error_with = [&](std::string patched) { return ErrorOf(WithStorageStream(file, patched), Torch()); };
  std::string patched = stream;
  patched[NumelAt(stream)] = 7;  // the persistent id says 7 elements, the count 6
  std::string error = error_with(patched);
  EXPECT_NE(error.find("a tensor's storage of 6 elements (persistent id: 7) with 24 bytes of data (4 per element)"),
            std::string::npos)
      << error;
  patched[CountAt(stream)] = 7;  // both say 7: 24 bytes are too few
  error = error_with(patched);
  EXPECT_NE(error.find("a tensor's storage of 7 elements (persistent id: 7) with 24 bytes"), std::string::npos)
      << error;
  // A byte missing from the data, or one too many.
  error = error_with(stream.substr(0, stream.size() - 1));
  EXPECT_NE(error.find("a tensor's storage of 6 elements (persistent id: 6) with 23 bytes"), std::string::npos)
      << error;
  error = error_with(stream + "x");
  EXPECT_NE(error.find("with 25 bytes"), std::string::npos) << error;
  // An element count that would overflow a multiplication.
  patched = stream;
  for (int i = 0; i < 8; ++i) patched[CountAt(stream) + i] = '\xff';
  error = error_with(patched);
  EXPECT_NE(error.find("a tensor's storage of 18446744073709551615 elements (persistent id: 6)"), std::string::npos)
      << error;
  // Cut before the element count, inside the keys' pickle and inside the persistent id's.
  error = error_with(stream.substr(0, CountAt(stream) + 3));
  EXPECT_NE(error.find("a tensor's storage stream ends before its element count"), std::string::npos) << error;
  error = error_with(stream.substr(0, CountAt(stream) - 3));
  EXPECT_NE(error.find("the tensor's storage stream, its storage keys: "), std::string::npos) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
  error = error_with(stream.substr(0, NumelAt(stream)));
  EXPECT_NE(error.find("the tensor's storage stream, the storage's persistent id: "), std::string::npos) << error;
  error = error_with(stream.substr(0, kTorchMagic.size() - 1));
  EXPECT_NE(error.find("do not start with torch.save's legacy magic number"), std::string::npos) << error;
  error = error_with("");
  EXPECT_NE(error.find("do not start with torch.save's legacy magic number"), std::string::npos) << error;
}

TEST(PickleTorch, StorageStreamsOfAnotherShapeAreRefused) {
  const std::string file = TorchFile("tensors", 4);
  const std::string stream = FirstStorageStream(file).second;
  const auto patched = [&](const std::string& from, const std::string& to) {
    std::string out = stream;
    const size_t at = out.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    out.replace(at, from.size(), to);
    return ErrorOf(WithStorageStream(file, out), Torch());
  };
  std::string error = patched(kTorchMagic + ".\x80\x02M\xe9\x03", kTorchMagic + ".\x80\x02M\xea\x03");
  EXPECT_NE(error.find("a tensor's storage stream of protocol version int 1002 (expected 1001)"), std::string::npos)
      << error;
  // A storage type torch does not have, and a global that is not a storage type.
  error = patched("FloatStorage", "FlaotStorage");
  EXPECT_NE(error.find("a tensor of torch.FlaotStorage"), std::string::npos) << error;
  error = patched("FloatStorage", "FloatStoragf");
  EXPECT_NE(error.find("refused global torch.FloatStoragf"), std::string::npos) << error;
  // A view of another storage (view_metadata not None).
  error = patched("Ntq\x04Q", ")tq\x04Q");
  EXPECT_NE(error.find("a tensor whose storage is a view of another"), std::string::npos) << error;
  // The keys list names another storage.
  std::string keys = stream;
  keys[CountAt(stream) - 5] ^= 1;  // the last digit of the key in the keys list
  error = ErrorOf(WithStorageStream(file, keys), Torch());
  EXPECT_NE(error.find("as its storage keys (expected one, its key)"), std::string::npos) << error;
  // The persistent id's storage type called, not named.
  error = patched("Ntq\x04Q", "Ntq\x04h\x01)R");
  EXPECT_NE(error.find("torch.FloatStorage is called"), std::string::npos) << error;
}

// _rebuild_tensor_v2(_load_from_bytes(stream), <args>, False, OrderedDict()<, extra>) (protocol 3).
std::string Tensor(const std::string& stream, const std::string& args, const std::string& extra = "") {
  const size_t n = stream.size();
  return Bytes({0x80, 3, 'c'}) + "torch._utils\n_rebuild_tensor_v2\n(ctorch.storage\n_load_from_bytes\nB" +
         Bytes({static_cast<int>(n & 0xff), static_cast<int>((n >> 8) & 0xff), 0, 0}) + stream + Bytes({0x85, 'R'}) +
         args + Bytes({0x89}) + "ccollections\nOrderedDict\n" + Bytes({')', 'R'}) + extra + Bytes({'t', 'R', '.'});
}

TEST(PickleTorch, RebuildsOnlyTensorsInsideTheirStorage) {
  const std::string stream = FirstStorageStream(TorchFile("tensors", 4)).second;  // 6 float32
  // (offset, size, stride) as BININT1s: K o (K a K b t (K c K d t.
  const auto args = [](int offset, std::initializer_list<int> size, std::initializer_list<int> stride) {
    std::string out = Bytes({'K', offset, '('});
    for (const int n : size) out += n < 0 ? Bytes({'J', n & 0xff, 0xff, 0xff, 0xff}) : Bytes({'K', n});
    out += Bytes({'t', '('});
    for (const int s : stride) out += s < 0 ? Bytes({'J', s & 0xff, 0xff, 0xff, 0xff}) : Bytes({'K', s});
    return out + Bytes({'t'});
  };
  // The fixture's own tensor, a contiguous row at an offset, an empty tensor.
  PickleDocument doc = ParsePickle(Tensor(stream, args(0, {2, 3}, {3, 1})), "t.pkl", Torch());
  EXPECT_EQ(DescribePickleValue(*doc.root), "float32 array of shape (2, 3)");
  EXPECT_EQ(NumpyFloat(*doc.root, 4), 65504.0);
  doc = ParsePickle(Tensor(stream, args(3, {1, 3}, {3, 1})), "t.pkl", Torch());
  EXPECT_EQ(doc.root->shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(NumpyFloat(*doc.root, 1), 65504.0);
  doc = ParsePickle(Tensor(stream, args(6, {0, 3}, {3, 1})), "t.pkl", Torch());
  EXPECT_EQ(NumpyCount(*doc.root), 0u);
  // Past the storage's end, before its start, more elements than it has.
  std::string error = ErrorOf(Tensor(stream, args(1, {2, 3}, {3, 1})), Torch());
  EXPECT_NE(error.find("6 elements at offset 1 of a storage of 6"), std::string::npos) << error;
  error = ErrorOf(Tensor(stream, args(0, {7}, {1})), Torch());
  EXPECT_NE(error.find("7 elements at offset 0 of a storage of 6"), std::string::npos) << error;
  error = ErrorOf(Tensor(stream, Bytes({'J', 0xff, 0xff, 0xff, 0xff}) + args(0, {2}, {1}).substr(2)), Torch());
  EXPECT_NE(error.find("2 elements at offset -1 of a storage of 6"), std::string::npos) << error;
  // Sizes and strides that do not pair up, a negative size, a negative stride.
  error = ErrorOf(Tensor(stream, args(0, {2, 3}, {3})), Torch());
  EXPECT_NE(error.find("a size of 2 dims and a stride of 1"), std::string::npos) << error;
  error = ErrorOf(Tensor(stream, args(0, {-2}, {1})), Torch());
  EXPECT_NE(error.find("size int -2 and stride int 1 in dim 0"), std::string::npos) << error;
  error = ErrorOf(Tensor(stream, args(5, {2}, {-1})), Torch());
  EXPECT_NE(error.find("not C-contiguous (size (2,), stride (-1,))"), std::string::npos) << error;
  // Tensor metadata (a 7th argument that is not empty), a wrong number of arguments, a storage
  // that is not one.
  error = ErrorOf(Tensor(stream, args(0, {6}, {1}), Bytes({'}'}) + Str("k") + Bytes({'K', 1, 's'})), Torch());
  EXPECT_NE(error.find("torch._utils._rebuild_tensor_v2 with tensor metadata"), std::string::npos) << error;
  error = ErrorOf(Tensor(stream, args(0, {6}, {1}), "NN"), Torch());
  EXPECT_NE(error.find("torch._utils._rebuild_tensor_v2 with 8 arguments (expected 6 or 7)"), std::string::npos)
      << error;
  error = ErrorOf(Bytes({0x80, 3, 'c'}) + "torch._utils\n_rebuild_tensor_v2\n" +
                      Bytes({'(', 'N', 'K', 0, ')', ')', 0x89, '}', 't', 'R', '.'}),
                  Torch());
  EXPECT_NE(error.find("argument 1 (the storage) is a None"), std::string::npos) << error;
}

TEST(PickleTorch, StorageGlobalsAndPersistentIdsOnlyInsideAStorageStream) {
  std::string error = ErrorOf(Bytes({0x80, 2, 'c'}) + "torch\nFloatStorage\n.", Torch());
  EXPECT_NE(error.find("refused global torch.FloatStorage"), std::string::npos) << error;
  error = ErrorOf(Bytes({0x80, 2}) + Str("id") + Bytes({'Q', '.'}), Torch());
  EXPECT_NE(error.find("unsupported pickle opcode BINPERSID"), std::string::npos) << error;
  // _load_from_bytes of something that is not bytes, or with two arguments.
  error = ErrorOf(Bytes({0x80, 2, 'c'}) + "torch.storage\n_load_from_bytes\n" + Str("x") + Bytes({0x85, 'R', '.'}),
                  Torch());
  EXPECT_NE(error.find("argument 1 (the torch.save bytes) is a str"), std::string::npos) << error;
  error = ErrorOf(Bytes({0x80, 3, 'c'}) + "torch.storage\n_load_from_bytes\n" + Bytes({'C', 0, 'C', 0, 0x86, 'R', '.'}),
                  Torch());
  EXPECT_NE(error.find("with 2 arguments (expected 1)"), std::string::npos) << error;
}

TEST(PickleOpaque, NewobjIsReadOnlyForAnOpaqueClass) {
  PickleOptions options = Torch();
  options.opaque_globals = {"argparse.Namespace"};
  // NEWOBJ of an allowed numpy global, with arguments that are not a tuple, on an empty stack.
  std::string error = ErrorOf(Bytes({0x80, 2, 'c'}) + "collections\nOrderedDict\n" + Bytes({')', 0x81, '.'}), options);
  EXPECT_NE(error.find("NEWOBJ of a global collections.OrderedDict with a tuple"), std::string::npos) << error;
  error = ErrorOf(Bytes({0x80, 2, 'c'}) + "argparse\nNamespace\n" + Bytes({'N', 0x81, '.'}), options);
  EXPECT_NE(error.find("NEWOBJ of a object of argparse.Namespace with a None"), std::string::npos) << error;
  error = ErrorOf(Bytes({0x80, 2, ')', 0x81, '.'}), options);
  EXPECT_NE(error.find("the stack is empty"), std::string::npos) << error;
  // Without opaque globals it stays an unsupported opcode.
  error = ErrorOf(Bytes({0x80, 2, ')', ')', 0x81, '.'}), Torch());
  EXPECT_NE(error.find("unsupported pickle opcode NEWOBJ"), std::string::npos) << error;
}

}  // namespace
}  // namespace petrsim
