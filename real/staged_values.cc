// The plan's values as a GPU's bytes; see staged_values.h.
#include "real/staged_values.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/assert.h"
#include "plan/backend.h"

namespace petrsim::real {
namespace {

// binary16 bits of `value`, which ToDtype already rounded to a half (so no rounding is left).
uint16_t HalfBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(value)) return static_cast<uint16_t>(sign | 0x7E00u);
  if (std::isinf(value)) return static_cast<uint16_t>(sign | 0x7C00u);
  const float magnitude = std::fabs(value);
  if (magnitude < 6.103515625e-05f) {  // 2^-14: a subnormal half (or zero), in steps of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(magnitude, 24)));
  }
  const int exponent = static_cast<int>((bits >> 23) & 0xFFu) - 127;
  return static_cast<uint16_t>(sign | static_cast<uint16_t>((exponent + 15) << 10) | ((bits >> 13) & 0x3FFu));
}

float HalfValue(uint16_t half) {
  const float sign = (half & 0x8000u) != 0 ? -1.0f : 1.0f;
  const int exponent = (half >> 10) & 0x1F;
  const int mantissa = half & 0x3FF;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 0x1F) return mantissa == 0 ? sign * INFINITY : NAN;
  return sign * std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
}

template <class T>
void Put(std::span<std::byte> out, size_t i, T value) {
  std::memcpy(out.data() + i * sizeof(T), &value, sizeof(T));
}

template <class T>
T Get(std::span<const std::byte> bytes, size_t i) {
  T value;
  std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
  return value;
}

}  // namespace

void EncodeValues(Collective::Dtype dtype, std::span<const double> values, std::span<std::byte> out) {
  PETRSIM_ASSERT(out.size() == values.size() * DtypeBytes(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = comm::ToDtype(dtype, values[i]);
    switch (dtype) {
      case Collective::float32:
        Put(out, i, static_cast<float>(v));
        break;
      case Collective::float16:
        Put(out, i, HalfBits(static_cast<float>(v)));
        break;
      case Collective::bfloat16:
        Put(out, i, static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16));
        break;
      case Collective::float64:
        Put(out, i, v);
        break;
      case Collective::int32:
        Put(out, i, static_cast<int32_t>(v));
        break;
      case Collective::int64:
        // ToDtype's top, 2^63 as a double, is one past int64's: the largest int64 instead.
        Put(out, i, v >= 9223372036854775807.0 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(v));
        break;
      case Collective::uint8:
        Put(out, i, static_cast<uint8_t>(v));
        break;
    }
  }
}

std::vector<double> DecodeValues(Collective::Dtype dtype, std::span<const std::byte> bytes) {
  const size_t size = DtypeBytes(dtype);
  PETRSIM_ASSERT(bytes.size() % size == 0);
  std::vector<double> values(bytes.size() / size);
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case Collective::float32:
        values[i] = Get<float>(bytes, i);
        break;
      case Collective::float16:
        values[i] = HalfValue(Get<uint16_t>(bytes, i));
        break;
      case Collective::bfloat16:
        values[i] = std::bit_cast<float>(static_cast<uint32_t>(Get<uint16_t>(bytes, i)) << 16);
        break;
      case Collective::float64:
        values[i] = Get<double>(bytes, i);
        break;
      case Collective::int32:
        values[i] = Get<int32_t>(bytes, i);
        break;
      case Collective::int64:
        values[i] = static_cast<double>(Get<int64_t>(bytes, i));
        break;
      case Collective::uint8:
        values[i] = Get<uint8_t>(bytes, i);
        break;
    }
  }
  return values;
}

}  // namespace petrsim::real
