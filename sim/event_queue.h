// The simulator's pending events, ordered by (time_ns, sequence), where sequence is the
// insertion counter, so two events at the same virtual time always pop in the order they were
// scheduled (ns-3's total order).
//
// A discrete-event simulation never schedules into the past, so the queue is monotone: every
// key scheduled is above the last key popped. That admits a radix heap (Ahuja, Mehlhorn, Orlin,
// Tarjan) over times with 256-way digits: bucket (level, d) holds the events whose time's highest
// byte differing from the reference time is byte `level`, with value d there. Pushing is O(1);
// when nothing is due at the reference time, the lowest occupied bucket (two bitmap scans)
// gives the next time, which becomes the reference, and its events spread into lower levels, so
// an event moves at most once per byte of its distance in time (2-3 times for the spreads a job
// has). Events due at the reference time wait in a FIFO ordered by sequence (sorted once when a
// refill makes them due; later ones arrive with higher sequences). Events are stored whole (32
// bytes) in the buckets, whose vectors keep their capacity: the steady state allocates nothing.
//
// Limits (asserted): times >= 0 and never before the last popped event. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/assert.h"

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
  explicit EventQueue(size_t reserve = 1024) { exact_.reserve(reserve); }

  void Schedule(int64_t time_ns, uint32_t kind, uint32_t actor, uint64_t payload) {
    PETRSIM_ASSERT(time_ns >= 0);
    Push(Event{time_ns, next_sequence_++, kind, actor, payload});
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  uint64_t scheduled() const { return next_sequence_; }

  Event Pop() {
    PETRSIM_ASSERT(size_ > 0);
    if (exact_head_ == exact_.size()) Refill();
    const Event event = exact_[exact_head_++];
    if (exact_head_ == exact_.size()) {
      exact_.clear();
      exact_head_ = 0;
    }
    --size_;
    return event;
  }

  // Puts back the event Pop just returned (same time, same sequence, so it stays first): how
  // the engine stops at a time limit without losing the event.
  void Restore(const Event& event) {
    PETRSIM_ASSERT(static_cast<uint64_t>(event.time_ns) == last_);
    exact_.insert(exact_.begin() + static_cast<int64_t>(exact_head_), event);
    ++size_;
  }

 private:
  static constexpr int kLevels = 8;  // bytes of a time

  void Push(const Event& event) {
    const auto time = static_cast<uint64_t>(event.time_ns);
    PETRSIM_ASSERT(time >= last_);  // monotone: nothing before the last popped event
    ++size_;
    if (time == last_) {
      // Scheduled now: after everything already due now (sequences only grow).
      exact_.push_back(event);
      return;
    }
    const int level = (63 - __builtin_clzll(time ^ last_)) >> 3;
    const auto digit = static_cast<int>((time >> (8 * level)) & 255);
    buckets_[level * 256 + digit].push_back(event);
    digits_[level][digit >> 6] |= uint64_t{1} << (digit & 63);
    levels_ |= 1u << level;
  }

  // Nothing is due at the reference time: the earliest time lies in the lowest occupied bucket
  // of the lowest occupied level. It becomes the reference, and that bucket's events move to
  // lower levels; the ones at the new time, in sequence order, become due.
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
    std::vector<Event>& from = buckets_[level * 256 + digit];
    digits_[level][digit >> 6] &= ~(uint64_t{1} << (digit & 63));
    if ((digits_[level][0] | digits_[level][1] | digits_[level][2] | digits_[level][3]) == 0) {
      levels_ &= ~(1u << level);
    }
    if (level == 0) {
      // Level 0 differs only in the lowest byte, which is the digit: one time, all due.
      last_ = static_cast<uint64_t>(from[0].time_ns);
      exact_.swap(from);  // exact_ was empty; from keeps exact_'s capacity
    } else {
      int64_t earliest = from[0].time_ns;
      for (const Event& event : from) earliest = event.time_ns < earliest ? event.time_ns : earliest;
      last_ = static_cast<uint64_t>(earliest);
      size_ -= from.size();
      for (const Event& event : from) Push(event);
      from.clear();
    }
    // Events reach a bucket in no particular sequence order: order the due ones.
    if (exact_.size() > 1) {
      std::sort(exact_.begin(), exact_.end(), [](const Event& a, const Event& b) { return a.sequence < b.sequence; });
    }
  }

  std::vector<Event> exact_;  // due at the reference time, in sequence order from exact_head_
  size_t exact_head_ = 0;
  std::vector<Event> buckets_[kLevels * 256];
  uint64_t digits_[kLevels][4] = {};  // per level: which digit buckets are occupied
  uint32_t levels_ = 0;               // which levels have an occupied bucket
  uint64_t last_ = 0;                 // the reference: the time of the last refill
  size_t size_ = 0;
  uint64_t next_sequence_ = 0;
};

}  // namespace petrsim::sim
