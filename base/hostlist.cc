// Slurm's hostlist expressions; see hostlist.h.
#include "base/hostlist.h"

#include <cctype>
#include <cstdint>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"

namespace petrsim {
namespace {

constexpr size_t kDigitsMax = 18;  // a number of a range fits in uint64_t

struct Range {
  uint64_t low = 0;
  uint64_t high = 0;
  size_t width = 0;  // the digits of LO as written: every number is printed at least this wide
};

// Literal text, then (unless it ends the item) one bracket group.
struct Piece {
  std::string text;
  std::vector<Range> group;  // empty: no group follows the text
};
using Item = std::vector<Piece>;

// A recursive-descent reader of one expression, keeping the column for its errors.
class HostlistReader {
 public:
  HostlistReader(std::string_view expression, std::string_view what) : text_(expression), what_(what) {}

  std::vector<Item> Read() {
    if (text_.empty()) Fail("expected a hostlist such as node[01-04,7],gpu2, got nothing");
    std::vector<Item> items;
    while (true) {
      items.push_back(ReadItem());
      if (at_ == text_.size()) return items;
      PETRSIM_ASSERT(text_[at_] == ',');
      ++at_;
    }
  }

 private:
  [[noreturn]] void Fail(std::string_view message) const {
    throw ScenarioError(fmt::format("{}={}: at column {}: {}", what_, text_, at_ + 1, message));
  }

  Item ReadItem() {
    Item item;
    Piece piece;
    bool empty = true;
    while (at_ < text_.size() && text_[at_] != ',') {
      const char c = text_[at_];
      if (c == ']') Fail("']' without its '['");
      if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) {
        Fail("expected a host name character, got whitespace or a control character");
      }
      empty = false;
      if (c == '[') {
        ++at_;
        piece.group = ReadGroup();
        item.push_back(std::move(piece));
        piece = Piece{};
        continue;
      }
      piece.text += c;
      ++at_;
    }
    if (empty) Fail("expected a host, got an empty item (two commas, or one at an end)");
    if (!piece.text.empty()) item.push_back(std::move(piece));
    return item;
  }

  // After '[': ranges up to and including ']'.
  std::vector<Range> ReadGroup() {
    std::vector<Range> group;
    while (true) {
      Range range;
      const std::string_view low = ReadNumber(range.low);
      range.width = low.size();
      range.high = range.low;
      if (at_ < text_.size() && text_[at_] == '-') {
        ++at_;
        const size_t high_at = at_;
        ReadNumber(range.high);
        if (range.high < range.low) {
          at_ = high_at;
          Fail(fmt::format("the range {}-{} runs backwards", low, range.high));
        }
      }
      group.push_back(range);
      if (at_ == text_.size()) Fail("expected ']' to close the bracket, got the end");
      const char c = text_[at_++];
      if (c == ']') return group;
      if (c != ',') {
        --at_;
        Fail(fmt::format("expected ',', '-' or ']' in a bracket, got '{}'", c));
      }
    }
  }

  std::string_view ReadNumber(uint64_t& value) {
    const size_t start = at_;
    value = 0;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      if (at_ - start == kDigitsMax) Fail(fmt::format("a number of more than {} digits", kDigitsMax));
      value = value * 10 + static_cast<uint64_t>(text_[at_] - '0');
      ++at_;
    }
    if (at_ == start) {
      if (at_ == text_.size()) Fail("expected a number in the bracket, got the end");
      if (text_[at_] == '[') Fail("brackets do not nest");
      Fail(fmt::format("expected a number in the bracket, got '{}'", text_[at_]));
    }
    return text_.substr(start, at_ - start);
  }

  std::string_view text_;
  std::string_view what_;
  size_t at_ = 0;
};

uint64_t GroupSize(const std::vector<Range>& group) {
  uint64_t size = 0;
  for (const Range& range : group) {
    const uint64_t more = range.high - range.low + 1;
    if (more > UINT64_MAX - size) return UINT64_MAX;  // only ever compared with a host limit
    size += more;
  }
  return size;
}

// The n-th number of a group (n < GroupSize), as written.
std::string GroupNumber(const std::vector<Range>& group, uint64_t n) {
  for (const Range& range : group) {
    const uint64_t size = range.high - range.low + 1;
    if (n < size) return fmt::format("{:0{}}", range.low + n, range.width);
    n -= size;
  }
  PETRSIM_ASSERT(false);
  return {};
}

// The hosts of one item, appended to `hosts`, the rightmost group varying fastest.
void ExpandItem(const Item& item, std::vector<std::string>& hosts) {
  std::vector<uint64_t> counter(item.size(), 0);
  while (true) {
    std::string host;
    for (size_t p = 0; p < item.size(); ++p) {
      host += item[p].text;
      if (!item[p].group.empty()) host += GroupNumber(item[p].group, counter[p]);
    }
    hosts.push_back(std::move(host));
    bool advanced = false;
    for (size_t p = item.size(); p-- > 0 && !advanced;) {
      if (item[p].group.empty()) continue;
      advanced = ++counter[p] < GroupSize(item[p].group);
      if (!advanced) counter[p] = 0;
    }
    if (!advanced) return;
  }
}

}  // namespace

std::vector<std::string> ExpandHostlist(std::string_view expression, std::string_view what, size_t hosts_max) {
  const std::vector<Item> items = HostlistReader(expression, what).Read();
  uint64_t total = 0;
  for (const Item& item : items) {
    uint64_t hosts = 1;
    for (const Piece& piece : item) {
      if (piece.group.empty()) continue;
      const uint64_t size = GroupSize(piece.group);
      if (size > hosts_max / hosts) {
        hosts = hosts_max + 1;
        break;
      }
      hosts *= size;
    }
    total += hosts;
    if (total > hosts_max) {
      throw ScenarioError(fmt::format("{}={}: more than {} hosts", what, expression, hosts_max));
    }
  }
  std::vector<std::string> hosts;
  hosts.reserve(total);
  for (const Item& item : items) ExpandItem(item, hosts);
  return hosts;
}

std::string FirstHostOfHostlist(std::string_view expression, std::string_view what) {
  const std::vector<Item> items = HostlistReader(expression, what).Read();
  std::string host;
  for (const Piece& piece : items.front()) {
    host += piece.text;
    if (!piece.group.empty()) host += GroupNumber(piece.group, 0);
  }
  return host;
}

}  // namespace petrsim
