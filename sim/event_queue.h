// The simulator's pending events, ordered by (time_ns, sequence), where sequence is the
// insertion counter, so two events at the same virtual time always pop in the order they were
// scheduled (ns-3's total order).
//
// A discrete-event simulation never schedules into the past, so the queue is monotone: every
// key scheduled is above the last key popped. That admits a radix heap (Ahuja, Mehlhorn, Orlin,
// Tarjan) with 256-way digits: a key is time in the high 64 bits and (sequence, payload slot) in
// the low 64; bucket (level, d) holds the keys whose highest byte differing from the last popped
// key is byte `level`, with value d there. Pushing is O(1); popping takes the lowest occupied
// bucket (two bitmap scans), makes its smallest key the reference and spreads the rest into
// lower levels, so a key moves at most once per byte of its distance in time (2-3 times for
// the spreads a job has) instead of once per bit. The events' contents wait in a slab of slots
// reused through a free list, so the steady state allocates nothing.
//
// Limits (asserted): times >= 0 and never before the last popped event, fewer than 2^40 events
// scheduled over the queue's life, fewer than 2^24 pending at once. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/assert.h"

namespace petrsim::sim {

struct Event {
  int64_t time_ns = 0;
  uint64_t sequence = 0;  // insertion counter: ties at equal time pop first-in first-out
  uint32_t kind = 0;      // what happens (the handler's switch)
  uint32_t actor = 0;     // who it happens to (a rank, a worker slot)
  uint64_t payload = 0;   // kind-specific (a batch number, a step)
};

class EventQueue {
 public:
  static constexpr uint64_t kSequenceMax = uint64_t{1} << 40;
  static constexpr uint32_t kPendingMax = uint32_t{1} << 24;

  explicit EventQueue(size_t reserve = 1024) {
    slots_.reserve(reserve);
    free_.reserve(reserve);
  }

  void Schedule(int64_t time_ns, uint32_t kind, uint32_t actor, uint64_t payload) {
    PETRSIM_ASSERT(time_ns >= 0);
    PETRSIM_ASSERT(next_sequence_ < kSequenceMax);
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      PETRSIM_ASSERT(slots_.size() < kPendingMax);
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slots_[slot] = Slot{kind, actor, payload};
    Push((static_cast<Key>(static_cast<uint64_t>(time_ns)) << 64) | (next_sequence_++ << 24) |
         slot);
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  uint64_t scheduled() const { return next_sequence_; }

  Event Pop() {
    PETRSIM_ASSERT(size_ > 0);
    if (exact_.empty()) Refill();
    const Key key = exact_.back();
    exact_.pop_back();
    --size_;
    const auto low = static_cast<uint64_t>(key);
    const auto slot = static_cast<uint32_t>(low & (kPendingMax - 1));
    const Slot& content = slots_[slot];
    free_.push_back(slot);
    return Event{static_cast<int64_t>(key >> 64), low >> 24, content.kind, content.actor,
                 content.payload};
  }

  // Puts back the event Pop just returned (same time, same sequence, so it stays first): how
  // the engine stops at a time limit without losing the event.
  void Restore(const Event& event) {
    const uint32_t slot = free_.back();
    free_.pop_back();
    slots_[slot] = Slot{event.kind, event.actor, event.payload};
    Push((static_cast<Key>(static_cast<uint64_t>(event.time_ns)) << 64) | (event.sequence << 24) |
         slot);
  }

 private:
  using Key = unsigned __int128;
  static constexpr int kLevels = 16;  // bytes of a key

  struct Slot {
    uint32_t kind;
    uint32_t actor;
    uint64_t payload;
  };

  // The byte (0 = lowest) of the highest set bit of x != 0.
  static int HighestByte(Key x) {
    const auto high = static_cast<uint64_t>(x >> 64);
    if (high != 0) return 8 + (63 - __builtin_clzll(high)) / 8;
    return (63 - __builtin_clzll(static_cast<uint64_t>(x))) / 8;
  }

  void Push(Key key) {
    PETRSIM_ASSERT(key >= last_);  // monotone: nothing before the last popped event
    ++size_;
    if (key == last_) {
      exact_.push_back(key);
      return;
    }
    const int level = HighestByte(key ^ last_);
    const auto digit = static_cast<int>(static_cast<uint64_t>(key >> (8 * level)) & 255);
    buckets_[level * 256 + digit].push_back(key);
    digits_[level][digit >> 6] |= uint64_t{1} << (digit & 63);
    levels_ |= 1u << level;
  }

  // No key equals the reference: the smallest lies in the lowest occupied bucket of the lowest
  // occupied level. It becomes the reference, and that bucket's keys move to lower levels.
  void Refill() {
    PETRSIM_ASSERT(levels_ != 0);
    const int level = __builtin_ctz(levels_);
    int digit = -1;
    for (int word = 0; word < 4; ++word) {
      if (digits_[level][word] != 0) {
        digit = word * 64 + __builtin_ctzll(digits_[level][word]);
        break;
      }
    }
    std::vector<Key>& from = buckets_[level * 256 + digit];
    digits_[level][digit >> 6] &= ~(uint64_t{1} << (digit & 63));
    if ((digits_[level][0] | digits_[level][1] | digits_[level][2] | digits_[level][3]) == 0) {
      levels_ &= ~(1u << level);
    }
    Key smallest = from[0];
    for (const Key key : from) smallest = key < smallest ? key : smallest;
    last_ = smallest;
    size_ -= from.size();
    for (const Key key : from) Push(key);
    from.clear();
  }

  std::vector<Key> exact_;                   // keys equal to the reference (at most one)
  std::vector<Key> buckets_[kLevels * 256];
  uint64_t digits_[kLevels][4] = {};         // per level: which digit buckets are occupied
  uint32_t levels_ = 0;                      // which levels have an occupied bucket
  Key last_ = 0;
  size_t size_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  uint64_t next_sequence_ = 0;
};

}  // namespace petrsim::sim
