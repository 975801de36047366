// The simulator's pending events: a 4-ary min-heap of plain 32-byte records ordered by
// (time_ns, sequence), where sequence is the insertion counter, so two events at the same
// virtual time always pop in the order they were scheduled (ns-3's total order). Storage is
// one vector reserved up front: scheduling allocates only when the heap outgrows it.
//
// Not thread-safe; one queue per simulated job.
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
  explicit EventQueue(size_t reserve = 1024) { heap_.reserve(reserve); }

  void Schedule(int64_t time_ns, uint32_t kind, uint32_t actor, uint64_t payload) {
    heap_.push_back(Event{time_ns, next_sequence_++, kind, actor, payload});
    SiftUp(heap_.size() - 1);
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  uint64_t scheduled() const { return next_sequence_; }

  const Event& top() const {
    PETRSIM_ASSERT(!heap_.empty());
    return heap_.front();
  }

  Event Pop() {
    PETRSIM_ASSERT(!heap_.empty());
    const Event first = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(last);
    return first;
  }

 private:
  static constexpr size_t kArity = 4;

  static bool Before(const Event& a, const Event& b) {
    return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.sequence < b.sequence);
  }

  void SiftUp(size_t index) {
    const Event moving = heap_[index];
    while (index > 0) {
      const size_t parent = (index - 1) / kArity;
      if (!Before(moving, heap_[parent])) break;
      heap_[index] = heap_[parent];
      index = parent;
    }
    heap_[index] = moving;
  }

  // Places `moving` (the former last element) starting from the root.
  void SiftDown(const Event& moving) {
    const size_t size = heap_.size();
    size_t index = 0;
    while (true) {
      const size_t first_child = index * kArity + 1;
      if (first_child >= size) break;
      size_t best = first_child;
      const size_t end = first_child + kArity < size ? first_child + kArity : size;
      for (size_t child = first_child + 1; child < end; ++child) {
        if (Before(heap_[child], heap_[best])) best = child;
      }
      if (!Before(heap_[best], moving)) break;
      heap_[index] = heap_[best];
      index = best;
    }
    heap_[index] = moving;
  }

  std::vector<Event> heap_;
  uint64_t next_sequence_ = 0;
};

}  // namespace petrsim::sim
