// Checking and decoding protocol 2's Latin-1 text (latin1.h).
#include "formats/pickle/latin1.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PETRSIM_LATIN1_SHUFFLE 1
#endif

namespace petrsim::pickle_internal {

// Each byte with its neighbour, never a branch on it (the compiler vectorises the loop).
bool IsLatin1Utf8(const uint8_t* in, size_t n) {
  if (n == 0) return true;
  uint8_t bad = (in[0] & 0xC0) == 0x80;  // a continuation first
  for (size_t i = 0; i + 1 < n; ++i) {
    const uint8_t c = in[i];
    const uint8_t high = c >> 7;
    const uint8_t lead = (c & 0xFE) == 0xC2;
    const uint8_t continuation = (c & 0xC0) == 0x80;
    bad |= static_cast<uint8_t>(((in[i + 1] & 0xC0) == 0x80) ^ lead);  // a continuation after, and only after, a lead
    bad |= static_cast<uint8_t>(high & ((lead | continuation) ^ 1));   // any other byte above 0x7f
  }
  const uint8_t last = in[n - 1];
  bad |= static_cast<uint8_t>((last & 0xFE) == 0xC2);  // a lead without its continuation
  bad |= static_cast<uint8_t>((last >> 7) & (((last & 0xC0) == 0x80) ^ 1));
  return bad == 0;
}

namespace {

// in[from, n): eight ASCII bytes at once (str arrays' UCS-4 zeros, small integers), else eight one
// by one, each character's byte chosen arithmetically.
size_t DecodeTail(const uint8_t* in, size_t from, size_t n, char* out) {
  size_t length = 0;
  if (from >= n) return 0;
  for (size_t i = from; i + 1 < n;) {
    uint64_t word = 0;
    if (i + 8 < n) std::memcpy(&word, in + i, 8);
    if (i + 8 < n && (word & 0x8080808080808080ULL) == 0) {
      std::memcpy(out + length, &word, 8);
      length += 8;
      i += 8;
      continue;
    }
    for (const size_t end = i + 8 < n - 1 ? i + 8 : n - 1; i < end; ++i) {
      const unsigned c = in[i];
      const unsigned two = ((c & 0x03u) << 6) | (in[i + 1] & 0x3Fu);
      out[length] = static_cast<char>(c ^ ((c ^ two) & (0u - (c >> 7))));
      length += (c & 0xC0u) != 0x80u;
    }
  }
  const uint8_t last = in[n - 1];
  out[length] = static_cast<char>(last);
  return length + ((last & 0xC0u) != 0x80u);
}

}  // namespace

size_t DecodeLatin1Utf8Portable(const uint8_t* in, size_t n, char* out) { return DecodeTail(in, 0, n, out); }

#ifdef PETRSIM_LATIN1_SHUFFLE

namespace {

// For each 8-bit mask of the bytes kept, the shuffle that packs them to the front, and how many.
struct PackTable {
  std::array<std::array<uint8_t, 8>, 256> order{};
  std::array<uint8_t, 256> count{};
  constexpr PackTable() {
    for (unsigned mask = 0; mask < 256; ++mask) {
      uint8_t k = 0;
      for (uint8_t bit = 0; bit < 8; ++bit) {
        if ((mask >> bit) & 1u) order[mask][k++] = bit;
      }
      for (uint8_t rest = k; rest < 8; ++rest) order[mask][rest] = 0x80;  // zero
      count[mask] = k;
    }
  }
};
constexpr PackTable kPack;

}  // namespace

// Sixteen input bytes at a time: each lead becomes its character (0x80 or 0xC0 with the next
// byte's low six bits), ASCII stays, continuations are packed out eight lanes at a time.
__attribute__((target("ssse3"))) size_t DecodeLatin1Utf8Shuffle(const uint8_t* in, size_t n, char* out) {
  size_t i = 0, length = 0;
  const __m128i high_bit = _mm_set1_epi8(static_cast<char>(0x80));
  for (; i + 17 <= n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i next = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 1));
    // A lead is 0xC2 or 0xC3: its character is 0x80 | (bit 0 << 6) | (next & 0x3f).
    const __m128i lead = _mm_cmpeq_epi8(_mm_and_si128(v, _mm_set1_epi8(static_cast<char>(0xFE))),
                                        _mm_set1_epi8(static_cast<char>(0xC2)));
    const __m128i two = _mm_or_si128(_mm_or_si128(_mm_and_si128(next, _mm_set1_epi8(0x3F)), high_bit),
                                     _mm_and_si128(_mm_slli_epi16(v, 6), _mm_set1_epi8(0x40)));
    const __m128i character = _mm_or_si128(_mm_and_si128(lead, two), _mm_andnot_si128(lead, v));
    // Kept: every byte but a continuation (0x80-0xBF).
    const __m128i continuation = _mm_cmpeq_epi8(_mm_and_si128(v, _mm_set1_epi8(static_cast<char>(0xC0))), high_bit);
    const unsigned keep = ~static_cast<unsigned>(_mm_movemask_epi8(continuation)) & 0xFFFFu;
    const unsigned low = keep & 0xFFu, up = keep >> 8;
    __m128i order;
    std::memcpy(&order, kPack.order[low].data(), 8);
    const __m128i packed_low = _mm_shuffle_epi8(character, _mm_loadl_epi64(&order));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + length), packed_low);
    length += kPack.count[low];
    const __m128i upper = _mm_srli_si128(character, 8);
    std::memcpy(&order, kPack.order[up].data(), 8);
    const __m128i packed_up = _mm_shuffle_epi8(upper, _mm_loadl_epi64(&order));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + length), packed_up);
    length += kPack.count[up];
  }
  return length + DecodeTail(in, i, n, out + length);
}

bool Latin1ShuffleAvailable() { return __builtin_cpu_supports("ssse3"); }

#else

size_t DecodeLatin1Utf8Shuffle(const uint8_t* in, size_t n, char* out) { return DecodeLatin1Utf8Portable(in, n, out); }
bool Latin1ShuffleAvailable() { return false; }

#endif

size_t DecodeLatin1Utf8(const uint8_t* in, size_t n, char* out) {
  static const bool shuffle = Latin1ShuffleAvailable();
  return shuffle ? DecodeLatin1Utf8Shuffle(in, n, out) : DecodeLatin1Utf8Portable(in, n, out);
}

}  // namespace petrsim::pickle_internal
