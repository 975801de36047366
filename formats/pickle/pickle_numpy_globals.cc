// The pickle machine's numpy opcodes (PickleOptions::numpy, pickle_internal.h): the allowed
// globals, REDUCE of them, BUILD of arrays and dtypes, and the checks of their data.
#include "formats/pickle/latin1.h"
#include "formats/pickle/pickle_internal.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace petrsim::pickle_internal {
namespace {

// The globals PickleOptions::numpy accepts, each interpreted by petrsim (never imported).
enum Global : int64_t {
  kReconstruct = 1,  // numpy.core.multiarray._reconstruct(ndarray, shape, b'b')
  kNdarray,          // numpy.ndarray, only as _reconstruct's first argument
  kDtypeGlobal,      // numpy.dtype('f8', False, True), then BUILD with its state
  kScalar,           // numpy.core.multiarray.scalar(dtype, bytes)
  kFromBuffer,       // numpy.core.numeric._frombuffer(buffer, dtype, shape, order)
  kCodecsEncode,     // _codecs.encode(str, 'latin1'): protocol 2's bytes
  kBytesGlobal,      // bytes(): protocol 2's empty bytes
  kOrderedDict,      // collections.OrderedDict(): an empty dict, filled by SETITEM(S)
  // PickleOptions::torch (pickle_torch.cc):
  kRebuildTensor,  // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, grad, hooks)
  kLoadFromBytes,  // torch.storage._load_from_bytes(legacy torch.save bytes)
  kTorchStorage,   // torch.FloatStorage, ... inside that stream only; `text` names the type
};

struct AllowedGlobal {
  std::string_view module, name;
  Global global;
};
constexpr std::array<AllowedGlobal, 12> kAllowedGlobals = {{
    {"numpy.core.multiarray", "_reconstruct", kReconstruct},
    {"numpy._core.multiarray", "_reconstruct", kReconstruct},
    {"numpy", "ndarray", kNdarray},
    {"numpy", "dtype", kDtypeGlobal},
    {"numpy.core.multiarray", "scalar", kScalar},
    {"numpy._core.multiarray", "scalar", kScalar},
    {"numpy.core.numeric", "_frombuffer", kFromBuffer},
    {"numpy._core.numeric", "_frombuffer", kFromBuffer},
    {"_codecs", "encode", kCodecsEncode},
    {"__builtin__", "bytes", kBytesGlobal},
    {"builtins", "bytes", kBytesGlobal},
    {"collections", "OrderedDict", kOrderedDict},
}};
constexpr const char* kAllowedList =
    "numpy.core.multiarray._reconstruct, numpy.ndarray, numpy.dtype, "
    "numpy.core.multiarray.scalar, numpy.core.numeric._frombuffer (or numpy._core.*), "
    "_codecs.encode(str, 'latin1'), bytes() and collections.OrderedDict()";

}  // namespace

bool Machine::RunNumpyOpcode(uint8_t op) {
  switch (op) {
    case 'c': {  // GLOBAL
      const std::string module = Line();
      const std::string name = Line();
      Push(GlobalNode(module, name));
      return true;
    }
    case 0x93: {  // STACK_GLOBAL
      const PickleNode* name = Pop();
      const PickleNode* module = Pop();
      if (module->type != PickleNode::Type::kString || name->type != PickleNode::Type::kString) {
        Fail(fmt::format("STACK_GLOBAL on a {} and a {} (expected two str)", module->TypeName(), name->TypeName()));
      }
      Push(GlobalNode(module->text, name->text));
      return true;
    }
    case 'R': {  // REDUCE
      PickleNode* args = Pop();
      PickleNode* callable = Pop();
      Push(Reduce(callable, args));
      return true;
    }
    case 'b': {  // BUILD
      PickleNode* state = Pop();
      Build(Top(), state);
      return true;
    }
    case 0x81: {  // NEWOBJ: cls.__new__(cls, *args), for an opaque class only
      if (options_.opaque_globals.empty()) return false;
      PickleNode* args = Pop();
      PickleNode* cls = Pop();
      if (cls->type != PickleNode::Type::kOpaque || args->type != PickleNode::Type::kTuple) {
        Fail(fmt::format("NEWOBJ of a {} with a {} (petrsim creates no objects but the opaque ones its caller lists)",
                         cls->TypeName(), args->TypeName()));
      }
      PickleNode* node = New(PickleNode::Type::kOpaque);
      node->text = cls->text;
      Push(node);
      return true;
    }
    case 'Q': {  // BINPERSID: a storage's persistent id, inside a torch.save stream only
      if (!torch_stream_) return false;
      PickleNode* pid = Pop();
      Push(pid);  // LoadTorchStorage reads the id itself
      return true;
    }
    case 0x8e:
      Push(Str(PickleNode::Type::kBytes, U64()));
      return true;  // BINBYTES8
    case 0x96:
      Push(Str(PickleNode::Type::kBytes, U64()));
      return true;  // BYTEARRAY8
    default:
      return false;
  }
}

bool Machine::IsOpaqueGlobal(const std::string& module, const std::string& name) const {
  const std::string full = module + "." + name;
  for (const std::string& opaque : options_.opaque_globals) {
    if (opaque.empty()) continue;
    if (opaque.back() == '.' ? full.compare(0, opaque.size(), opaque) == 0 : full == opaque) return true;
  }
  return false;
}

PickleNode* Machine::GlobalNode(const std::string& module, const std::string& name) {
  auto global = [&](Global which) {
    PickleNode* node = New(PickleNode::Type::kGlobal);
    node->integer = which;
    node->text = module + "." + name;
    return node;
  };
  for (const auto& allowed : kAllowedGlobals) {
    if (allowed.module == module && allowed.name == name) return global(allowed.global);
  }
  if (options_.torch) {
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") return global(kRebuildTensor);
    if (module == "torch.storage" && name == "_load_from_bytes") return global(kLoadFromBytes);
  }
  if (torch_stream_ && module == "torch" && name.ends_with("Storage")) return global(kTorchStorage);
  if (IsOpaqueGlobal(module, name)) {
    PickleNode* node = New(PickleNode::Type::kOpaque);
    node->text = module + "." + name;
    return node;
  }
  Fail(
      fmt::format("refused global {}.{}: petrsim never imports or calls code from a pickle; "
                  "it rebuilds numpy arrays with {} only",
                  Printable(module), Printable(name), kAllowedList));
}

const PickleNode& Machine::Arg(const PickleNode& args, size_t i, PickleNode::Type type, const char* what,
                               const char* function) const {
  const PickleNode& arg = *args.items[i];
  if (arg.type != type) {
    Fail(fmt::format("{}: argument {} ({}) is a {}", function, i + 1, what, arg.TypeName()));
  }
  return arg;
}
void Machine::ArgCount(const PickleNode& args, size_t n, const char* function) const {
  if (args.items.size() != n) {
    Fail(fmt::format("{} with {} arguments (expected {})", function, args.items.size(), n));
  }
}

PickleNode* Machine::Reduce(PickleNode* callable, PickleNode* args) {
  if (callable->type == PickleNode::Type::kOpaque) {
    PickleNode* node = New(PickleNode::Type::kOpaque);  // the call's result, never made
    node->text = callable->text;
    return node;
  }
  if (callable->type != PickleNode::Type::kGlobal) {
    Fail(fmt::format("REDUCE calls a {} (only the allowed numpy globals are interpreted)", callable->TypeName()));
  }
  if (args->type != PickleNode::Type::kTuple) {
    Fail(fmt::format("REDUCE of {} with a {} of arguments (expected a tuple)", callable->text, args->TypeName()));
  }
  switch (static_cast<Global>(callable->integer)) {
    case kReconstruct: {
      ArgCount(*args, 3, "numpy _reconstruct");
      const PickleNode& cls = Arg(*args, 0, PickleNode::Type::kGlobal, "the class", "numpy _reconstruct");
      if (cls.integer != kNdarray) {
        Fail(fmt::format("numpy _reconstruct of {} (expected numpy.ndarray)", cls.text));
      }
      Arg(*args, 1, PickleNode::Type::kTuple, "the shape", "numpy _reconstruct");
      Arg(*args, 2, PickleNode::Type::kBytes, "the type code", "numpy _reconstruct");
      return New(PickleNode::Type::kNumpyArray);  // BUILD sets dtype, shape and data
    }
    case kNdarray:
      Fail("numpy.ndarray is called directly (petrsim reads it only as _reconstruct's argument)");
    case kDtypeGlobal: {
      ArgCount(*args, 3, "numpy.dtype");
      const PickleNode& spec = Arg(*args, 0, PickleNode::Type::kString, "the type", "numpy.dtype");
      PickleNode* node = New(PickleNode::Type::kNumpyDtype);
      node->dtype = ParseDtype(spec.text);
      return node;
    }
    case kScalar:
      return NumpyScalar(*args);
    case kFromBuffer:
      return FromBuffer(*args);
    case kCodecsEncode:
      return CodecsEncode(*args);
    case kBytesGlobal:
      if (!args->items.empty()) Fail("bytes() with arguments (petrsim reads protocol 2's empty bytes only)");
      return New(PickleNode::Type::kBytes);
    case kOrderedDict:
      // OrderedDict.__reduce__ pickles the class called without arguments, then its items with
      // SETITEM(S): a plain dict here (a dict keeps insertion order too).
      if (!args->items.empty()) {
        Fail("collections.OrderedDict() with arguments (petrsim reads the empty call pickle writes, then its items)");
      }
      return New(PickleNode::Type::kDict);
    case kRebuildTensor:
      return RebuildTensor(*args);
    case kLoadFromBytes:
      return LoadTorchStorage(*args);
    case kTorchStorage:
      Fail(fmt::format("{} is called (petrsim reads it only in a storage's persistent id)", callable->text));
  }
  Fail(fmt::format("REDUCE of {} (not interpreted)", callable->text));
}

// numpy.core.multiarray.scalar(dtype, bytes): one value of a numeric, bool or str dtype.
PickleNode* Machine::NumpyScalar(const PickleNode& args) {
  ArgCount(args, 2, "numpy scalar");
  const PickleNode& dtype = Arg(args, 0, PickleNode::Type::kNumpyDtype, "the dtype", "numpy scalar");
  if (dtype.dtype.kind == 'O') Fail("a numpy object scalar (petrsim reads numeric, bool and str scalars)");
  const PickleNode& raw = Arg(args, 1, PickleNode::Type::kBytes, "the value's bytes", "numpy scalar");
  if (raw.text.size() != dtype.dtype.itemsize) {
    Fail(fmt::format("numpy scalar of dtype {} with {} bytes (expected {})", dtype.dtype.Name(), raw.text.size(),
                     dtype.dtype.itemsize));
  }
  ChargeCopy(raw.text.size(), "a numpy scalar's bytes");
  PickleNode* node = New(PickleNode::Type::kNumpyScalar);
  node->dtype = dtype.dtype;
  node->text.assign(raw.text);
  PETRSIM_ASSERT(node->text.size() == node->dtype.itemsize);
  return node;
}

// numpy's _frombuffer(buffer, dtype, shape, order) (pickle protocol 5's arrays).
PickleNode* Machine::FromBuffer(const PickleNode& args) {
  ArgCount(args, 4, "numpy _frombuffer");
  const PickleNode& buffer = Arg(args, 0, PickleNode::Type::kBytes, "the buffer", "numpy _frombuffer");
  const PickleNode& dtype = Arg(args, 1, PickleNode::Type::kNumpyDtype, "the dtype", "numpy _frombuffer");
  const PickleNode& shape = Arg(args, 2, PickleNode::Type::kTuple, "the shape", "numpy _frombuffer");
  const PickleNode& order = Arg(args, 3, PickleNode::Type::kString, "the order", "numpy _frombuffer");
  if (order.text != "C" && order.text != "F") {
    Fail(fmt::format("numpy _frombuffer with order '{}' (expected 'C' or 'F')", Printable(order.text)));
  }
  if (dtype.dtype.kind == 'O') Fail("numpy _frombuffer of an object dtype");
  PickleNode* node = New(PickleNode::Type::kNumpyArray);
  SetArray(*node, dtype.dtype, shape);
  ChargeCopy(buffer.text.size(), "numpy _frombuffer's buffer");
  node->text.assign(buffer.text);
  CheckDataLength(*node);
  if (order.text == "F") ToCOrder(*node);
  node->built = true;
  return node;
}

// _codecs.encode(text, 'latin1'): protocol 2's bytes.
PickleNode* Machine::CodecsEncode(const PickleNode& args) {
  ArgCount(args, 2, "_codecs.encode");
  const PickleNode& text = Arg(args, 0, PickleNode::Type::kString, "the text", "_codecs.encode");
  const PickleNode& encoding = Arg(args, 1, PickleNode::Type::kString, "the encoding", "_codecs.encode");
  if (encoding.text != "latin1") {
    Fail(fmt::format("_codecs.encode with encoding '{}' (petrsim reads protocol 2's 'latin1' bytes only)",
                     Printable(encoding.text)));
  }
  ChargeCopy(text.text.size(), "_codecs.encode's bytes");
  PickleNode* node = New(PickleNode::Type::kBytes);
  Latin1(text, node->text);
  return node;
}

// 'f8', 'i8', 'b1', 'U10', 'O8', ... as numpy.dtype's first argument.
NumpyDtype Machine::ParseDtype(std::string_view spec) const {
  const std::string original(spec);
  auto refuse = [&](const char* why) {
    Fail(
        fmt::format("numpy dtype '{}': {} (petrsim reads bool, int, uint, float32, float64, str, "
                    "bytes and object arrays)",
                    Printable(original), why));
  };
  if (!spec.empty() && (spec[0] == '<' || spec[0] == '|' || spec[0] == '=')) spec.remove_prefix(1);
  if (!spec.empty() && spec[0] == '>') refuse("big-endian");
  if (spec.empty()) refuse("empty");
  NumpyDtype dtype;
  dtype.kind = spec[0];
  uint64_t size = 0;
  if (spec.size() < 2 || spec.size() > 11) refuse("not a kind and a size");
  for (const char c : spec.substr(1)) {
    if (c < '0' || c > '9') refuse("not a kind and a size");
    size = size * 10 + (c - '0');
  }
  if (size > (uint64_t{1} << 30)) refuse("too large");
  switch (dtype.kind) {
    case 'b':
      if (size != 1) refuse("bool of another size");
      break;
    case 'i':
    case 'u':
      if (size != 1 && size != 2 && size != 4 && size != 8) refuse("integer size");
      break;
    case 'f':
      if (size != 4 && size != 8) refuse("float of that size");
      break;
    case 'U':
      size *= 4;
      break;
    case 'S':
      break;
    case 'O':
      if (size != 8 && size != 4) refuse("object size");
      size = 8;
      break;
    default:
      refuse("unsupported kind");
  }
  dtype.itemsize = static_cast<uint32_t>(size);
  return dtype;
}

void Machine::Build(PickleNode* object, PickleNode* state) {
  if (object->type == PickleNode::Type::kOpaque) return;  // its state is parsed and dropped
  Unhanded(object, "BUILD");
  if (object->type == PickleNode::Type::kNumpyDtype && !object->built) {
    BuildDtype(*object, *state);
  } else if (object->type == PickleNode::Type::kNumpyArray && !object->built) {
    Changed(object);
    BuildArray(*object, *state);
  } else {
    Fail(fmt::format("BUILD on a {} (petrsim sets the state of new numpy arrays and dtypes only)", object->TypeName()));
  }
  object->built = true;
}

// numpy.dtype.__setstate__: (3, byteorder, subarray, names, fields, elsize, alignment, flags)
// or version 4 with metadata last.
void Machine::BuildDtype(PickleNode& node, const PickleNode& state) {
  const std::string name = node.dtype.Name();
  if (state.type != PickleNode::Type::kTuple || state.items.size() < 8 || state.items.size() > 9) {
    Fail(fmt::format("numpy dtype {}: state is a {} of {} items (expected a tuple of 8 or 9)", name, state.TypeName(),
                     state.items.size()));
  }
  const auto& s = state.items;
  if (s[0]->type != PickleNode::Type::kInt || (s[0]->integer != 3 && s[0]->integer != 4)) {
    Fail(fmt::format("numpy dtype {}: state version {} (expected 3 or 4)", name, DescribePickleValue(*s[0])));
  }
  if (s[1]->type != PickleNode::Type::kString)
    Fail(fmt::format("numpy dtype {}: byte order is a {}", name, s[1]->TypeName()));
  const std::string& order = s[1]->text;
  if (order == ">" && node.dtype.itemsize > 1 && node.dtype.kind != 'S') {
    Fail(fmt::format("numpy dtype {}: big-endian data (petrsim reads little-endian arrays)", name));
  }
  if (order != "<" && order != "|" && order != "=" && order != ">") {
    Fail(fmt::format("numpy dtype {}: byte order '{}'", name, Printable(order)));
  }
  for (size_t i = 2; i <= 4; ++i) {
    if (s[i]->type != PickleNode::Type::kNone) {
      Fail(fmt::format("numpy dtype {}: a structured or sub-array dtype (petrsim reads plain arrays)", name));
    }
  }
  if (s[5]->type != PickleNode::Type::kInt)
    Fail(fmt::format("numpy dtype {}: element size is a {}", name, s[5]->TypeName()));
  if ((node.dtype.kind == 'U' || node.dtype.kind == 'S') && s[5]->integer >= 0) {
    const int64_t elsize = s[5]->integer;
    if (elsize > (int64_t{1} << 32) - 4 || (node.dtype.kind == 'U' && elsize % 4 != 0)) {
      Fail(fmt::format("numpy dtype {}: element size {}", name, elsize));
    }
    node.dtype.itemsize = static_cast<uint32_t>(elsize);
  }
  if (s.size() == 9 && s[8]->type != PickleNode::Type::kNone) {
    Fail(fmt::format("numpy dtype {}: dtype metadata (datetime or user types are not read)", name));
  }
}

// ndarray.__setstate__: (version, shape, dtype, is_fortran, data) or without the version.
void Machine::BuildArray(PickleNode& node, const PickleNode& state) {
  if (state.type != PickleNode::Type::kTuple || (state.items.size() != 5 && state.items.size() != 4)) {
    Fail(fmt::format("numpy array state is a {} of {} items (expected a tuple of 5)", state.TypeName(),
                     state.items.size()));
  }
  const size_t first = state.items.size() == 5 ? 1 : 0;
  if (first == 1 && (state.items[0]->type != PickleNode::Type::kInt || state.items[0]->integer != 1)) {
    Fail(fmt::format("numpy array state version {} (expected 1)", DescribePickleValue(*state.items[0])));
  }
  const PickleNode& shape = *state.items[first];
  const PickleNode& dtype = *state.items[first + 1];
  const PickleNode& fortran = *state.items[first + 2];
  const PickleNode& data = *state.items[first + 3];
  if (shape.type != PickleNode::Type::kTuple) Fail(fmt::format("numpy array shape is a {}", shape.TypeName()));
  if (dtype.type != PickleNode::Type::kNumpyDtype) Fail(fmt::format("numpy array dtype is a {}", dtype.TypeName()));
  if (fortran.type != PickleNode::Type::kBool) Fail(fmt::format("numpy array order flag is a {}", fortran.TypeName()));
  SetArray(node, dtype.dtype, shape);
  if (dtype.dtype.kind == 'O') {
    if (data.type != PickleNode::Type::kList) {
      Fail(fmt::format("numpy object array data is a {} (expected a list)", data.TypeName()));
    }
    if (data.items.size() != NumpyCount(node)) {
      Fail(fmt::format("numpy object array of shape {} with {} items", ShapeText(node.shape), data.items.size()));
    }
    ChargeCopy(data.items.size() * sizeof(PickleNode*), "a numpy object array's items");
    node.items = data.items;
  } else {
    if (data.type != PickleNode::Type::kBytes) {
      Fail(fmt::format("numpy array data is a {} (expected bytes)", data.TypeName()));
    }
    ChargeCopy(data.text.size(), "a numpy array's data");
    node.text.assign(data.text);
    CheckDataLength(node);
  }
  if (fortran.boolean) ToCOrder(node);
}

void Machine::SetArray(PickleNode& node, const NumpyDtype& dtype, const PickleNode& shape) {
  if (dtype.kind == 0 || dtype.itemsize == 0) {
    Fail(fmt::format("numpy array of dtype {} (element size 0)", dtype.Name()));
  }
  if (shape.items.size() > kNumpyDimsMax) {
    Fail(fmt::format("numpy array of {} dimensions (at most {})", shape.items.size(), kNumpyDimsMax));
  }
  node.dtype = dtype;
  node.shape.clear();
  uint64_t count = 1;
  for (const PickleNode* dim : shape.items) {
    if (dim->type != PickleNode::Type::kInt || dim->integer < 0) {
      Fail(fmt::format("numpy array shape has a {} (expected non-negative int)", DescribePickleValue(*dim)));
    }
    const auto n = static_cast<uint64_t>(dim->integer);
    // No array holds more elements than the file has bytes (an element costs at least one).
    if (n > 0 && count > (bytes_.size() + 1) / n) {
      Fail(fmt::format("numpy array shape {} has more elements than the file has bytes", ShapeText(shape)));
    }
    count *= n;
    node.shape.push_back(dim->integer);
  }
}
std::string Machine::ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}
std::string Machine::ShapeText(const PickleNode& shape) {
  std::vector<int64_t> dims;
  for (const PickleNode* dim : shape.items) dims.push_back(dim->integer);
  return ShapeText(dims);
}
void Machine::CheckDataLength(const PickleNode& node) const {
  const unsigned __int128 expected = static_cast<unsigned __int128>(NumpyCount(node)) * node.dtype.itemsize;
  if (expected != node.text.size()) {
    Fail(
        fmt::format("numpy array of dtype {} and shape {}: {} elements x {} bytes, but the data "
                    "holds {} bytes",
                    node.dtype.Name(), ShapeText(node.shape), NumpyCount(node), node.dtype.itemsize, node.text.size()));
  }
}
// Reorders a Fortran-order array's elements (or items) into C order.
void Machine::ToCOrder(PickleNode& node) {
  const size_t dims = node.shape.size();
  const uint64_t count = NumpyCount(node);
  if (dims < 2 || count < 2) return;
  std::vector<uint64_t> fortran_stride(dims, 1);
  for (size_t k = 1; k < dims; ++k) fortran_stride[k] = fortran_stride[k - 1] * node.shape[k - 1];
  std::vector<int64_t> index(dims, 0);
  const bool objects = node.dtype.kind == 'O';
  const size_t itemsize = node.dtype.itemsize;
  std::string data(objects ? 0 : node.text.size(), '\0');
  std::vector<PickleNode*> items(objects ? count : 0);
  uint64_t from = 0;  // Fortran offset of `index`
  for (uint64_t c = 0; c < count; ++c) {
    if (objects) {
      items[c] = node.items[from];
    } else {
      std::memcpy(data.data() + c * itemsize, node.text.data() + from * itemsize, itemsize);
    }
    // Odometer, last dimension fastest (C order).
    for (size_t k = dims; k-- > 0;) {
      if (++index[k] < node.shape[k]) {
        from += fortran_stride[k];
        break;
      }
      from -= fortran_stride[k] * (node.shape[k] - 1);
      index[k] = 0;
    }
  }
  if (objects) {
    node.items = std::move(items);
  } else {
    node.text = std::move(data);
  }
}
// Protocol 2 writes bytes as the str of their Latin-1 decoding (latin1.h); back to bytes.
// `text`, a kString, was checked as it was read (PickleNode::latin1); one made otherwise is checked here.
void Machine::Latin1(const PickleNode& text, std::string& out) const {
  const std::string& utf8 = text.text;
  const auto* in = reinterpret_cast<const uint8_t*>(utf8.data());
  if (!text.latin1 && !IsLatin1Utf8(in, utf8.size())) {
    Fail("_codecs.encode of a str with characters beyond latin-1 (not bytes written by protocol 2)");
  }
  out.resize(utf8.size());
  out.resize(DecodeLatin1Utf8(in, utf8.size(), out.data()));
}

GlobalMakes GlobalKind(int64_t global) {
  switch (static_cast<Global>(global)) {
    case kReconstruct:
    case kDtypeGlobal:
      return GlobalMakes::kBuildable;
    case kOrderedDict:
      return GlobalMakes::kDict;
    case kScalar:
    case kFromBuffer:
    case kCodecsEncode:
    case kBytesGlobal:
      return GlobalMakes::kPlain;
    case kNdarray:  // refused when called
    case kRebuildTensor:
    case kLoadFromBytes:
    case kTorchStorage:
      break;
  }
  return GlobalMakes::kNotFollowed;
}

}  // namespace petrsim::pickle_internal
