// The discrete-event loop: pops events in (time, sequence) order and hands each to a handler,
// within limits on events and virtual time (STYLE 7: a run that would never end stops with a
// reason, it does not hang petrsim). The handler type is a template parameter so dispatch is a
// direct, inlinable call on the hot path.
#pragma once

#include <cstdint>
#include <limits>

#include "sim/event_queue.h"

namespace petrsim::sim {

struct EngineLimits {
  uint64_t events_max = std::numeric_limits<uint64_t>::max();
  int64_t time_max_ns = std::numeric_limits<int64_t>::max();
};

enum class StopReason {
  kQueueEmpty,      // nothing left to happen
  kHandlerStopped,  // the handler decided the run is over
  kEventsLimit,     // events_max events processed
  kTimeLimit,       // the next event lies beyond time_max_ns
};

// One event folded into a trace hash (FNV-1a style over time, kind and actor, payload).
inline uint64_t MixEvent(uint64_t hash, const Event& event) {
  hash = (hash ^ static_cast<uint64_t>(event.time_ns)) * 0x100000001B3ULL;
  hash = (hash ^ (uint64_t{event.kind} << 32 | event.actor)) * 0x100000001B3ULL;
  return (hash ^ event.payload) * 0x100000001B3ULL;
}

class Engine {
 public:
  explicit Engine(size_t reserve = 1024) : queue_(reserve) {}

  EventQueue& queue() { return queue_; }
  int64_t now_ns() const { return now_ns_; }
  uint64_t processed() const { return processed_; }
  // A hash of every processed event (time, kind, actor, payload), in order: two runs that
  // processed the same events in the same order have the same hash.
  uint64_t trace_hash() const { return trace_hash_; }

  void Schedule(int64_t time_ns, uint32_t kind, uint32_t actor, uint64_t payload) {
    PETRSIM_ASSERT(time_ns >= now_ns_);
    queue_.Schedule(time_ns, kind, actor, payload);
  }

  // Runs until the queue is empty, the handler returns false, or a limit is reached.
  // handler(const Event&) -> bool (false: stop after this event).
  template <class Handler>
  StopReason Run(Handler&& handler, const EngineLimits& limits) {
    while (!queue_.empty()) {
      if (processed_ >= limits.events_max) return StopReason::kEventsLimit;
      const Event event = queue_.Pop();
      if (event.time_ns > limits.time_max_ns) {
        queue_.Restore(event);
        return StopReason::kTimeLimit;
      }
      now_ns_ = event.time_ns;
      ++processed_;
      trace_hash_ = MixEvent(trace_hash_, event);
      if (!handler(event)) return StopReason::kHandlerStopped;
    }
    return StopReason::kQueueEmpty;
  }

 private:
  EventQueue queue_;
  int64_t now_ns_ = 0;
  uint64_t processed_ = 0;
  uint64_t trace_hash_ = 0xCBF29CE484222325ULL;
};

}  // namespace petrsim::sim
