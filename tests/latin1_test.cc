// Protocol 2's Latin-1 text (formats/pickle/latin1.h): the shuffle decoder and the portable one
// give the expected bytes for every length and mix, wherever the two-byte characters fall
// relative to the decoders' 16- and 8-byte blocks.
#include "formats/pickle/latin1.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace petrsim::pickle_internal {
namespace {

// The UTF-8 Python writes for these bytes.
std::string Encode(const std::string& bytes) {
  std::string utf8;
  for (const char c : bytes) {
    const auto value = static_cast<uint8_t>(c);
    if (value < 0x80) {
      utf8 += c;
    } else {
      utf8 += static_cast<char>(0xC0 | (value >> 6));
      utf8 += static_cast<char>(0x80 | (value & 0x3F));
    }
  }
  return utf8;
}

std::string Decode(const std::string& utf8, bool shuffle) {
  std::string out(utf8.size(), '\0');
  const auto* in = reinterpret_cast<const uint8_t*>(utf8.data());
  out.resize(shuffle ? DecodeLatin1Utf8Shuffle(in, utf8.size(), out.data())
                     : DecodeLatin1Utf8Portable(in, utf8.size(), out.data()));
  return out;
}

TEST(Latin1, BothDecodersGiveTheBytesBackForEveryLengthAndMix) {
  if (!Latin1ShuffleAvailable()) GTEST_SKIP() << "no SSSE3 here: only the portable decoder runs";
  std::mt19937 random(7);
  for (int high_percent : {0, 10, 50, 90, 100}) {
    for (size_t length = 0; length <= 80; ++length) {
      for (int round = 0; round < 20; ++round) {
        std::string bytes(length, '\0');
        for (char& c : bytes) {
          const bool high = static_cast<int>(random() % 100) < high_percent;
          c = static_cast<char>(high ? 0x80 + random() % 128 : random() % 128);
        }
        const std::string utf8 = Encode(bytes);
        ASSERT_TRUE(IsLatin1Utf8(reinterpret_cast<const uint8_t*>(utf8.data()), utf8.size()));
        ASSERT_EQ(Decode(utf8, false), bytes) << length << " " << high_percent;
        ASSERT_EQ(Decode(utf8, true), bytes) << length << " " << high_percent;
      }
    }
  }
}

TEST(Latin1, RefusesWhatIsNotLatin1Text) {
  for (const std::string bad : {"a\xc4\x80"
                                "b",
                                "ab\xc3",
                                "\x80"
                                "ab",
                                "\xc2"
                                "ab",
                                "a\x80", "\xe0\xa0\x80", "a\xff"}) {
    EXPECT_FALSE(IsLatin1Utf8(reinterpret_cast<const uint8_t*>(bad.data()), bad.size())) << bad;
  }
  EXPECT_TRUE(IsLatin1Utf8(nullptr, 0));
}

}  // namespace
}  // namespace petrsim::pickle_internal
