// Protocol 2's bytes (pickle_numpy_globals.cc, _codecs.encode(str, 'latin1')): the str of their
// Latin-1 decoding, UTF-8 encoded, so each byte below 0x80 is itself and each other is 0xC2 or
// 0xC3 and a continuation byte. Checking and decoding that text, the import's largest cost after
// the opcodes themselves (array data is random bytes, half of them two-byte characters).
#pragma once

#include <cstddef>
#include <cstdint>

namespace petrsim::pickle_internal {

// Whether in[0, n) is such text: every byte above 0x7f a lead 0xC2/0xC3 followed by a
// continuation byte, or that continuation.
bool IsLatin1Utf8(const uint8_t* in, size_t n);

// Decodes text IsLatin1Utf8 accepted into out[0, n) (n bytes of room; the result is shorter
// when there are two-byte characters); returns the decoded length. Sixteen input bytes at a time
// with SSSE3's byte shuffle where the CPU has it, else eight at a time.
size_t DecodeLatin1Utf8(const uint8_t* in, size_t n, char* out);
// The two ways, for the test that compares them.
size_t DecodeLatin1Utf8Portable(const uint8_t* in, size_t n, char* out);
size_t DecodeLatin1Utf8Shuffle(const uint8_t* in, size_t n, char* out);  // only if Latin1ShuffleAvailable()
bool Latin1ShuffleAvailable();

}  // namespace petrsim::pickle_internal
