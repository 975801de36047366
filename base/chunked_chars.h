// The characters of a file read in chunks, as the input iterator nlohmann's SAX parser takes, so
// that a JSON file is parsed without being held whole (a Flight Recorder dump, a nuScenes table).
// `Source` is anything with `std::string_view Next()`: the next chunk, empty at the end.
#pragma once

#include <cstddef>
#include <iterator>
#include <string_view>

namespace petrsim {

template <class Source>
class ChunkedChars {
 public:
  explicit ChunkedChars(Source& source) : source_(source) { Refill(); }
  bool at_end() const { return pos_ == chunk_.size(); }
  char current() const { return chunk_[pos_]; }
  void Advance() {
    if (++pos_ == chunk_.size()) Refill();
  }
  // The bytes handed out so far (the position of the current character).
  uint64_t offset() const { return before_ + pos_; }

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = char;
    Iterator() = default;
    explicit Iterator(ChunkedChars* chars) : chars_(chars) {}
    char operator*() const { return chars_->current(); }
    Iterator& operator++() {
      chars_->Advance();
      return *this;
    }
    bool operator==(const Iterator& other) const { return at_end() == other.at_end(); }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    bool at_end() const { return chars_ == nullptr || chars_->at_end(); }
    ChunkedChars* chars_ = nullptr;
  };
  Iterator begin() { return Iterator(this); }
  static Iterator end() { return Iterator(); }

 private:
  void Refill() {
    before_ += chunk_.size();
    chunk_ = source_.Next();
    pos_ = 0;
  }
  Source& source_;
  std::string_view chunk_;
  size_t pos_ = 0;
  uint64_t before_ = 0;
};

}  // namespace petrsim
