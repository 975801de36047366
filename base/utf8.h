// UTF-8 validation, as strict as CPython's decoder (errors='strict', what pickle and json use):
// no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Strings from input
// (a pickle's str, a --set value, a scenario's string fields) are checked where they enter, so
// that every writer after them (JSON, protobuf) can rely on them. Header-only: the readers in the
// fuzz build include it without linking petrsim_base.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace petrsim {

// The length of the valid UTF-8 sequence at `bytes` (`left` bytes from it, at least 1): 1 for
// ASCII, 2 to 4 for a sequence; 0 when none starts there (a truncated one included).
inline size_t Utf8SequenceLength(const uint8_t* bytes, size_t left) {
  const uint8_t lead = bytes[0];
  if (lead < 0x80) return 1;
  // The lead's sequence length and the range its first continuation byte must be in (the
  // narrower ranges rule out overlong forms, surrogates and code points above U+10FFFF).
  size_t length = 0;
  uint8_t low = 0x80, high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (length > left || bytes[1] < low || bytes[1] > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((bytes[k] & 0xc0) != 0x80) return 0;
  }
  return length;
}

// The byte offset of the first byte that does not start a valid UTF-8 sequence (a truncated
// sequence counts as invalid at its lead byte); null when all of `text` is valid. ASCII, the
// common case, is checked eight bytes at a time.
inline std::optional<size_t> FirstInvalidUtf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t at = 0;
  while (at < n) {
    while (at + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, bytes + at, 8);
      if ((word & 0x8080808080808080ull) != 0) break;
      at += 8;
    }
    if (at >= n) break;
    const size_t length = Utf8SequenceLength(bytes + at, n - at);
    if (length == 0) return at;
    at += length;
  }
  return std::nullopt;
}

inline bool IsValidUtf8(std::string_view text) { return !FirstInvalidUtf8(text).has_value(); }

// `text` safe to print anywhere: printable ASCII as is, every other byte as \xNN (a path or name
// from input is bytes, not necessarily text).
inline std::string EscapedBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", u);
    }
  }
  return out;
}

// `bytes` as text: itself when it is valid UTF-8, else escaped as EscapedBytes does (for a path
// or a name derived from one, which a scenario or a report must hold as text).
inline std::string TextOfBytes(std::string_view bytes) {
  return IsValidUtf8(bytes) ? std::string(bytes) : EscapedBytes(bytes);
}

// The error text for invalid UTF-8 in `text`: the byte offset and the bytes around it, escaped.
inline std::string InvalidUtf8Detail(std::string_view text, size_t offset) {
  const size_t from = offset >= 8 ? offset - 8 : 0;
  return fmt::format("invalid UTF-8 at byte {} of {} ('{}')", offset, text.size(), EscapedBytes(text.substr(from, 24)));
}

}  // namespace petrsim
