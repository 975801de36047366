// The simulated side of the Backend seam (docs/design.md, "Seams"): collectives meet per process group by
// c10d sequence number. Every rank's k-th collective on a group has sequence number k; the
// instance opens with the first arrival, completes when all world_size ranks have arrived with
// the same signature (op, dtype, element count), and reports a mismatch otherwise, which is how
// NCCL's peers would pair calls that differ. A rank that dies withdraws its arrival, so an
// instance it had joined can never complete.
//
// Open instances of a group live in a power-of-two ring indexed by sequence number that grows
// when ranks run further apart than it holds; instance storage (the waiters list included) is
// reused, so the steady state allocates nothing. Tag is the caller's description of a
// collective (the simulator's plan step); the rendezvous only stores a pointer to it. Waiter is
// what each arrival leaves in the instance's waiters list: its rank, or the simulator's work
// handle (sim/sim_backend.h), which is then reached without a search. Not thread-safe.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/assert.h"
#include "proto/scenario.pb.h"

namespace petrsim::sim {

// What ranks must agree on at one sequence number.
struct CollectiveSignature {
  Collective::Op op = Collective::allreduce;
  Collective::Dtype dtype = Collective::float32;
  uint64_t numel = 0;
  bool operator==(const CollectiveSignature&) const = default;
};

template <class Tag, class Waiter = uint32_t>
class Rendezvous {
 public:
  struct Instance {
    uint64_t seq = 0;  // 0: the slot is free
    CollectiveSignature signature;
    const Tag* first = nullptr;  // the first arrival's collective
    uint32_t first_rank = 0;
    uint64_t first_iteration = 0;
    int64_t first_arrival_ns = 0;
    int64_t last_arrival_ns = 0;
    uint32_t arrived = 0;
    bool complete = false;
    std::vector<Waiter> waiters;  // every arrival, in arrival order
  };

  enum class Outcome {
    kWaiting,    // joined; others have not all arrived
    kCompleted,  // this arrival was the last: every rank is in
    kMismatch,   // the instance holds another signature: nothing was joined
  };

  struct Arrival {
    Outcome outcome = Outcome::kWaiting;
    Instance* instance = nullptr;  // valid until the next call that opens an instance
  };

  explicit Rendezvous(uint32_t world_size) : world_size_(world_size) { PETRSIM_ASSERT(world_size >= 1); }

  // Adds a process group; returns its id (0, 1, ...).
  uint32_t AddGroup() {
    groups_.emplace_back();
    return static_cast<uint32_t>(groups_.size() - 1);
  }
  uint32_t groups() const { return static_cast<uint32_t>(groups_.size()); }

  // `rank` arrives at `seq` (>= 1) of `group` at time now_ns, leaving `waiter` in the instance.
  Arrival Arrive(uint32_t group, uint64_t seq, uint32_t rank, const CollectiveSignature& signature, const Tag* tag,
                 uint64_t iteration, int64_t now_ns, Waiter waiter) {
    PETRSIM_ASSERT(seq >= 1);
    Instance* instance = Find(group, seq);
    if (instance == nullptr) {
      instance = &groups_[group].Open(seq);
      instance->signature = signature;
      instance->first = tag;
      instance->first_rank = rank;
      instance->first_iteration = iteration;
      instance->first_arrival_ns = now_ns;
    } else if (!(instance->signature == signature)) {
      return Arrival{Outcome::kMismatch, instance};
    }
    PETRSIM_ASSERT(!instance->complete);
    ++instance->arrived;
    instance->last_arrival_ns = now_ns;
    instance->waiters.push_back(waiter);
    if (instance->arrived == world_size_) {
      instance->complete = true;
      return Arrival{Outcome::kCompleted, instance};
    }
    return Arrival{Outcome::kWaiting, instance};
  }

  Instance* Find(uint32_t group, uint64_t seq) { return groups_[group].Find(seq); }

  // A rank that had arrived at (group, seq) died: the instance can no longer complete.
  void Withdraw(uint32_t group, uint64_t seq) {
    Instance* instance = Find(group, seq);
    if (instance != nullptr && !instance->complete) {
      PETRSIM_ASSERT(instance->arrived > 0);
      --instance->arrived;
    }
  }

  // Frees a completed instance's slot once the caller is done with it.
  void Close(uint32_t group, uint64_t seq) {
    Instance* instance = Find(group, seq);
    PETRSIM_ASSERT(instance != nullptr);
    instance->seq = 0;
  }

  // The incomplete instance that opened first, over every group, and its group; or null.
  const Instance* OldestIncomplete(uint32_t* group_out) const {
    return OldestIncomplete(group_out, [](uint32_t, const Instance&) { return true; });
  }
  // The same among the incomplete instances `accept(group, instance)` is true for.
  template <class Accept>
  const Instance* OldestIncomplete(uint32_t* group_out, Accept&& accept) const {
    const Instance* oldest = nullptr;
    for (uint32_t g = 0; g < groups_.size(); ++g) {
      for (const Instance& slot : groups_[g].slots()) {
        if (slot.seq == 0 || slot.complete || !accept(g, slot)) continue;
        if (oldest == nullptr || slot.first_arrival_ns < oldest->first_arrival_ns ||
            (slot.first_arrival_ns == oldest->first_arrival_ns && slot.seq < oldest->seq)) {
          oldest = &slot;
          if (group_out != nullptr) *group_out = g;
        }
      }
    }
    return oldest;
  }

 private:
  class Ring {
   public:
    Ring() : slots_(16) {}
    Instance* Find(uint64_t seq) {
      Instance& slot = slots_[seq & (slots_.size() - 1)];
      return slot.seq == seq ? &slot : nullptr;
    }
    Instance& Open(uint64_t seq) {
      while (slots_[seq & (slots_.size() - 1)].seq != 0) Grow();
      Instance& slot = slots_[seq & (slots_.size() - 1)];
      slot.seq = seq;
      slot.arrived = 0;
      slot.complete = false;
      slot.waiters.clear();
      return slot;
    }
    const std::vector<Instance>& slots() const { return slots_; }

   private:
    void Grow() {
      std::vector<Instance> bigger(slots_.size() * 2);
      for (auto& slot : slots_) {
        if (slot.seq != 0) bigger[slot.seq & (bigger.size() - 1)] = std::move(slot);
      }
      slots_ = std::move(bigger);
    }
    std::vector<Instance> slots_;
  };

  uint32_t world_size_;
  std::vector<Ring> groups_;
};

}  // namespace petrsim::sim
