// The pickle machine's torch tensors (PickleOptions::torch, pickle.h): a CPU tensor as plain
// pickle writes it, torch._utils._rebuild_tensor_v2 of a storage that torch.storage's
// _load_from_bytes reads from a legacy torch.save stream, becomes a numpy array of its dtype.
//
// The stream (torch/serialization.py, _legacy_save; the same from torch 1.10 to 1.13) is five
// pickles and the raw data: the magic number, the protocol version (1001), the sys_info dict,
// the object (here the storage itself, a BINPERSID of ('storage', torch.FloatStorage, key,
// location, numel, view_metadata)), the list of storage keys; then per key the element count
// (int64, little-endian) and the elements. Each pickle is run by a machine of its own.
#include <algorithm>
#include <array>
#include <limits>

#include "formats/pickle/pickle_internal.h"

namespace petrsim::pickle_internal {
namespace {

struct StorageType {
  std::string_view name;
  NumpyDtype dtype;
};
constexpr std::array<StorageType, 8> kStorageTypes = {{
    {"torch.FloatStorage", {'f', 4}},
    {"torch.DoubleStorage", {'f', 8}},
    {"torch.LongStorage", {'i', 8}},
    {"torch.IntStorage", {'i', 4}},
    {"torch.ShortStorage", {'i', 2}},
    {"torch.CharStorage", {'i', 1}},
    {"torch.ByteStorage", {'u', 1}},
    {"torch.BoolStorage", {'b', 1}},
}};

}  // namespace

PickleNode* Machine::LoadTorchStorage(const PickleNode& args) {
  ArgCount(args, 1, "torch.storage._load_from_bytes");
  const PickleNode& stream = Arg(args, 0, PickleNode::Type::kBytes, "the torch.save bytes", "_load_from_bytes");
  const std::string_view bytes = stream.text;
  const std::string where = fmt::format("{} (a tensor's torch.save bytes at byte {})", name_, op_offset_);
  PickleDocument inner;
  PickleOptions options;
  options.numpy = true;  // not torch: a storage stream holds no tensor, so this never recurses
  uint64_t pos = 0;
  auto next = [&](const char* what) -> const PickleNode* {
    Machine machine(bytes.substr(pos), where, inner, options);
    machine.ReadTorchStream();
    try {
      const PickleNode* root = machine.Run();
      pos += machine.end_offset();
      return root;
    } catch (const PickleError& error) {
      Fail(fmt::format("the tensor's storage stream, {}: {}", what, error.what()));
    }
  };
  // The magic number is an int wider than 64 bits, which the machine refuses: it is skipped by
  // its exact bytes instead (PROTO 2, LONG1 of 10 bytes, STOP).
  static constexpr std::string_view kMagic = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e";
  if (bytes.substr(0, kMagic.size()) != kMagic) {
    Fail(
        "a tensor's storage bytes do not start with torch.save's legacy magic number (petrsim reads torch's "
        "plain-pickle tensors, whose storage is a legacy torch.save stream)");
  }
  pos = kMagic.size();
  const PickleNode* version = next("its protocol version");
  if (version->type != PickleNode::Type::kInt || version->integer != 1001) {
    Fail(
        fmt::format("a tensor's storage stream of protocol version {} (expected 1001)", DescribePickleValue(*version)));
  }
  next("its sys_info");
  const PickleNode* pid = next("the storage's persistent id");
  const NumpyDtype dtype = StorageDtype(*pid);
  const int64_t numel = pid->items[4]->integer;
  const PickleNode* keys = next("its storage keys");
  if (keys->type != PickleNode::Type::kList || keys->items.size() != 1 ||
      keys->items[0]->type != PickleNode::Type::kString || keys->items[0]->text != pid->items[2]->text) {
    Fail(fmt::format("a tensor's storage stream lists {} as its storage keys (expected one, its key)",
                     DescribePickleValue(*keys)));
  }
  const uint64_t itemsize = dtype.itemsize;
  if (bytes.size() - pos < 8) Fail("a tensor's storage stream ends before its element count");
  uint64_t count = 0;
  for (size_t i = 0; i < 8; ++i) count |= uint64_t{static_cast<uint8_t>(bytes[pos + i])} << (8 * i);
  pos += 8;
  if (numel < 0 || count != static_cast<uint64_t>(numel) || count > (bytes.size() - pos) / itemsize ||
      bytes.size() - pos != count * itemsize) {
    Fail(fmt::format("a tensor's storage of {} elements (persistent id: {}) with {} bytes of data ({} per element)",
                     count, numel, bytes.size() - pos, itemsize));
  }
  ChargeCopy(count * itemsize, "a tensor's storage");
  PickleNode* node = New(PickleNode::Type::kNumpyArray);
  node->dtype = dtype;
  node->shape = {static_cast<int64_t>(count)};
  node->text.assign(bytes.substr(pos));
  PETRSIM_ASSERT(node->text.size() == count * itemsize);
  node->built = true;
  return node;
}

// The dtype of the storage a persistent id ('storage', torch.<Type>Storage, key, location, numel,
// view_metadata) names, after checking the id's shape.
NumpyDtype Machine::StorageDtype(const PickleNode& pid) const {
  if (pid.type != PickleNode::Type::kTuple || pid.items.size() < 5 || pid.items[0]->type != PickleNode::Type::kString ||
      pid.items[0]->text != "storage" || pid.items[1]->type != PickleNode::Type::kGlobal ||
      pid.items[2]->type != PickleNode::Type::kString || pid.items[4]->type != PickleNode::Type::kInt) {
    Fail(
        fmt::format("a tensor's storage stream whose object is a {} (expected the persistent id ('storage', "
                    "torch.<Type>Storage, key, location, numel, view_metadata))",
                    DescribePickleValue(pid)));
  }
  const std::string& type_name = pid.items[1]->text;
  const auto type = std::find_if(kStorageTypes.begin(), kStorageTypes.end(),
                                 [&](const StorageType& known) { return known.name == type_name; });
  if (type == kStorageTypes.end()) {
    Fail(fmt::format("a tensor of {} (petrsim reads float32, float64, int8-64, uint8 and bool tensors)",
                     Printable(type_name)));
  }
  if (pid.items.size() > 5 && pid.items[5]->type != PickleNode::Type::kNone) {
    Fail("a tensor whose storage is a view of another (petrsim reads whole storages)");
  }
  return type->dtype;
}

PickleNode* Machine::RebuildTensor(const PickleNode& args) {
  const char* function = "torch._utils._rebuild_tensor_v2";
  if (args.items.size() < 6 || args.items.size() > 7) {
    Fail(fmt::format("{} with {} arguments (expected 6 or 7)", function, args.items.size()));
  }
  const PickleNode& storage = Arg(args, 0, PickleNode::Type::kNumpyArray, "the storage", function);
  const PickleNode& offset = Arg(args, 1, PickleNode::Type::kInt, "the storage offset", function);
  const PickleNode& size = Arg(args, 2, PickleNode::Type::kTuple, "the size", function);
  const PickleNode& stride = Arg(args, 3, PickleNode::Type::kTuple, "the stride", function);
  if (args.items.size() == 7 && args.items[6]->type == PickleNode::Type::kDict && !args.items[6]->entries.empty()) {
    Fail(fmt::format("{} with tensor metadata (petrsim reads plain tensors)", function));
  }
  if (size.items.size() != stride.items.size() || size.items.size() > kNumpyDimsMax) {
    Fail(fmt::format("{}: a size of {} dims and a stride of {}", function, size.items.size(), stride.items.size()));
  }
  // Only C-contiguous tensors: each stride the product of the sizes after it (any for size 1).
  uint64_t count = 1;
  std::vector<int64_t> shape(size.items.size());
  for (size_t d = size.items.size(); d-- > 0;) {
    const PickleNode& n = *size.items[d];
    const PickleNode& s = *stride.items[d];
    if (n.type != PickleNode::Type::kInt || s.type != PickleNode::Type::kInt || n.integer < 0) {
      Fail(fmt::format("{}: size {} and stride {} in dim {}", function, DescribePickleValue(n), DescribePickleValue(s),
                       d));
    }
    if (n.integer > 1 && static_cast<uint64_t>(s.integer) != count) {
      Fail(fmt::format("{}: a tensor that is not C-contiguous (size {}, stride {}); petrsim reads contiguous tensors",
                       function, ShapeText(size), ShapeText(stride)));
    }
    shape[d] = n.integer;
    if (n.integer != 0 && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(n.integer)) {
      Fail(fmt::format("{}: size {} overflows", function, ShapeText(size)));
    }
    count *= static_cast<uint64_t>(n.integer);
  }
  const uint64_t numel = NumpyCount(storage);
  if (offset.integer < 0 || (count > 0 && static_cast<uint64_t>(offset.integer) > numel - std::min(numel, count)) ||
      (count > 0 && count > numel)) {
    Fail(fmt::format("{}: {} elements at offset {} of a storage of {}", function, count, offset.integer, numel));
  }
  const uint64_t itemsize = storage.dtype.itemsize;
  ChargeCopy(count * itemsize, "a tensor's elements");
  PickleNode* node = New(PickleNode::Type::kNumpyArray);
  node->dtype = storage.dtype;
  node->shape = std::move(shape);
  if (count > 0) node->text.assign(storage.text, static_cast<uint64_t>(offset.integer) * itemsize, count * itemsize);
  node->built = true;
  return node;
}

}  // namespace petrsim::pickle_internal
