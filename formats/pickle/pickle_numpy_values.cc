// Reading the elements of numpy arrays and scalars (NumpyCount, NumpyFloat, ...; see pickle.h).
#include "formats/pickle/pickle.h"

#include <cstring>

#include "base/assert.h"

namespace petrsim {

uint64_t NumpyCount(const PickleNode& array) {
  if (array.type == PickleNode::Type::kNumpyScalar) return 1;
  uint64_t count = 1;
  for (const int64_t dim : array.shape) count *= static_cast<uint64_t>(dim);
  return count;
}

namespace {
template <typename T>
T Load(const PickleNode& node, uint64_t index) {
  T value;
  std::memcpy(&value, node.text.data() + index * sizeof(T), sizeof(T));
  return value;
}
}  // namespace

double NumpyFloat(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  const uint32_t size = node.dtype.itemsize;
  switch (node.dtype.kind) {
    case 'f':
      return size == 4 ? Load<float>(node, index) : Load<double>(node, index);
    case 'i':
    case 'u':
    case 'b': {
      if (node.dtype.kind == 'u' && size == 8) return static_cast<double>(Load<uint64_t>(node, index));
      return static_cast<double>(NumpyInt(node, index));
    }
    default:
      PETRSIM_ASSERT(false && "NumpyFloat of a non-numeric dtype");
  }
  return 0;
}

int64_t NumpyInt(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  const uint32_t size = node.dtype.itemsize;
  switch (node.dtype.kind) {
    case 'b':
      return Load<uint8_t>(node, index) != 0;
    case 'i':
      switch (size) {
        case 1:
          return Load<int8_t>(node, index);
        case 2:
          return Load<int16_t>(node, index);
        case 4:
          return Load<int32_t>(node, index);
        default:
          return Load<int64_t>(node, index);
      }
    case 'u':
      switch (size) {
        case 1:
          return Load<uint8_t>(node, index);
        case 2:
          return Load<uint16_t>(node, index);
        case 4:
          return Load<uint32_t>(node, index);
        default: {
          const uint64_t value = Load<uint64_t>(node, index);
          return value > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(value);
        }
      }
    default:
      PETRSIM_ASSERT(false && "NumpyInt of a non-integer dtype");
  }
  return 0;
}

bool NumpyIntFits(const PickleNode& node, uint64_t index) {
  return !(node.dtype.kind == 'u' && node.dtype.itemsize == 8) ||
         NumpyUint64(node, index) <= static_cast<uint64_t>(INT64_MAX);
}

uint64_t NumpyUint64(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  PETRSIM_ASSERT(node.dtype.kind == 'u' && "NumpyUint64 of a non-unsigned dtype");
  if (node.dtype.itemsize == 8) return Load<uint64_t>(node, index);
  return static_cast<uint64_t>(NumpyInt(node, index));
}

std::string NumpyString(const PickleNode& node, uint64_t index) {
  PETRSIM_ASSERT(index < NumpyCount(node));
  const uint32_t size = node.dtype.itemsize;
  const char* raw = node.text.data() + index * size;
  std::string out;
  if (node.dtype.kind == 'S') {
    size_t n = size;
    while (n > 0 && raw[n - 1] == '\0') --n;
    return std::string(raw, n);
  }
  PETRSIM_ASSERT(node.dtype.kind == 'U');
  size_t n = size / 4;
  auto code_point = [&](size_t i) {
    uint32_t c;
    std::memcpy(&c, raw + 4 * i, 4);
    return c;
  };
  while (n > 0 && code_point(n - 1) == 0) --n;
  for (size_t i = 0; i < n; ++i) {
    uint32_t c = code_point(i);
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

}  // namespace petrsim
