// The simulated network and the Backend seam on it (plan/backend.h; docs/design.md, "Seams"), as
// FoundationDB's Sim2 sits beside Net2.
//
// SimNet is the network every simulated rank shares: it numbers each rank's collectives per
// process group, matches them in the rendezvous (sim/rendezvous.h) and completes a collective
// one duration after its last member arrived. A work's completion time is known from that last
// arrival; it has completed once virtual time reaches it. It keeps what each rank has in flight:
// the one collective it blocks in (issued with async_op false) and its async works (DDP's
// buckets) until the rank collects them. Completions reach the ranks through engine events whose
// kinds the owner gives (SimEventKinds) and whose handler passes them back (OnCollectiveDone,
// OnRankWake, OnWorkDone):
// - the members blocked in a collective return through its completion event, one for all of
//   them, in arrival order;
// - a rank waiting for its async works (WaitAll) returns through one rank-wake event at the
//   latest completion, scheduled once all of them are known.
// Returning a rank means calling its registered callback (the seam's OnCompletion or
// OnAllCompleted) or else the waker (SetWaker): the simulator's own rank loop (sim/job_sim.h)
// drives SimNet through this engine-side interface, as a c10d process group's watchdog and
// work queue drive its works, with no object or callback per collective.
//
// SimBackend and SimWork are the Backend seam on SimNet, one per rank: Issue, IsCompleted,
// WaitFor (a poll: virtual time does not pass inside a call), OnCompletion and OnAllCompleted,
// passing sim/sim_backend_test.cc's contract in virtual time. Why the rank loop does not call
// them for every collective: a work object and a callback per collective made a simulated run
// 1.3x to 1.6x slower (docs/design.md, "Seams").
//
// A collective whose members issued different ones at its sequence number (a desync) fails at
// once for the later arrival and never joins (mismatch() says whom it met). The simulator moves
// no values. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/assert.h"
#include "plan/backend.h"
#include "proto/scenario.pb.h"
#include "sim/engine.h"
#include "sim/rendezvous.h"

namespace petrsim::sim {

// A collective of the plan, resolved once: its process group id, signature and place.
struct PlanStep {
  const Collective* collective = nullptr;
  uint32_t pg = 0;
  int32_t nonblocking_ordinal = -1;  // index among the iteration's non-blocking steps
  int64_t duration_ns = 0;
  uint64_t numel_in = 0;
  uint64_t numel_out = 0;
};

// What the simulator knows of one issued collective.
struct WorkRecord {
  uint32_t pg = 0;
  uint64_t seq = 0;
  int64_t issue_ns = 0;
  int64_t complete_ns = -1;  // -1: not known yet (not every member has arrived)
  int64_t started_ns = -1;   // every member had joined (the transfer began); -1: not yet
  const PlanStep* step = nullptr;
  uint64_t iteration = 0;
};

// The event kinds SimNet schedules, each with what it carries.
struct SimEventKinds {
  uint32_t collective_done = 0;  // actor: process group id, payload: seq
  uint32_t rank_wake = 0;        // actor: rank, payload 0
  uint32_t work_done = 0;        // actor: rank, payload: the async work's seq on its group << 32 | group
};

class SimNet {
 public:
  // Each arrival leaves its rank and where its record is: kBlocking, or its index among the
  // rank's async works.
  static constexpr uint32_t kBlocking = 0xFFFFFFFFu;
  using Collectives = Rendezvous<PlanStep, uint64_t>;
  static constexpr uint64_t Waiter(uint32_t rank, uint32_t index) { return uint64_t{rank} << 32 | index; }
  static constexpr uint32_t WaiterRank(uint64_t waiter) { return static_cast<uint32_t>(waiter >> 32); }
  static constexpr uint32_t WaiterIndex(uint64_t waiter) { return static_cast<uint32_t>(waiter); }

  enum class Posted {
    kPending,    // not every member has arrived
    kCompleted,  // this arrival was the last: its completion time is known
    kMismatch,   // a desync: it failed and joined nothing (mismatch())
  };
  // Whom a failed issue met at its sequence number: the collective that arrived there first.
  struct Mismatch {
    uint32_t first_rank = 0;
    const PlanStep* first = nullptr;
    uint64_t first_iteration = 0;
    WorkRecord issued;  // the failed one
  };
  // Resumes `rank`, blocked in a collective or waiting for its async works, when it registered
  // no callback of its own.
  using Waker = void (*)(void* context, uint32_t rank);

  // `wake_each_rank`: the members blocked in a collective each return through a rank-wake event
  // of their own rather than one event for all (SimOptions::wake_each_rank).
  SimNet(Engine& engine, uint32_t world_size, SimEventKinds kinds, bool wake_each_rank);
  SimNet(const SimNet&) = delete;
  SimNet& operator=(const SimNet&) = delete;

  void SetWaker(Waker waker, void* context) {
    waker_ = waker;
    waker_context_ = context;
  }
  // Adds a process group (every rank a member); returns its id (0, 1, ...).
  uint32_t AddGroup();
  uint32_t world_size() const { return world_size_; }
  int64_t now_ns() const { return engine_->now_ns(); }

  // A run of collectives that complete as one (SimOptions::fuse_collective_chains): when the
  // issue completes its collective, the end moves `extra_ns` later and every member's sequence
  // numbers on its group move `extra_seqs` on, as the run's next collectives would have made them.
  struct Extension {
    int64_t extra_ns = 0;
    uint64_t extra_seqs = 0;
  };
  // `rank` issues `step` at the present time in `iteration` (what its record and the reports
  // say). async_op false: the rank blocks in it (it must block in nothing else); otherwise it
  // joins the rank's async works.
  Posted Post(uint32_t rank, const PlanStep& step, uint64_t iteration, bool async_op,
              const Extension* extension = nullptr);
  // How many members have arrived at `rank`'s next collective on `group` (0: none, or it is not
  // open yet).
  uint32_t Arrived(uint32_t rank, uint32_t group) {
    const Collectives::Instance* instance = collectives_.Find(group, ranks_[rank].next_seq[group]);
    return instance == nullptr || instance->complete ? 0 : instance->arrived;
  }
  // Its async works whose completion is not known yet.
  uint32_t async_open(uint32_t rank) const { return ranks_[rank].async_open; }
  const Mismatch& mismatch() const { return mismatch_; }

  // The collective `rank` blocks in, while it does.
  bool blocking(uint32_t rank) const { return ranks_[rank].blocking; }
  const WorkRecord& blocked(uint32_t rank) const { return ranks_[rank].blocked; }
  // Whether the collective it blocks in has completed by now; the rank then returns from it.
  bool BlockedCompleted(uint32_t rank) const {
    const RankNet& from = ranks_[rank];
    return from.blocking && from.blocked.complete_ns >= 0 && from.blocked.complete_ns <= now_ns();
  }
  void Return(uint32_t rank) {
    PETRSIM_ASSERT(BlockedCompleted(rank));
    ranks_[rank].blocking = false;
  }
  // Its async works since it last collected them, in issue order.
  std::span<const WorkRecord> in_flight(uint32_t rank) const { return ranks_[rank].async; }
  // Whether every one of them has completed by now.
  bool AllCompleted(uint32_t rank) const {
    const RankNet& from = ranks_[rank];
    if (from.async_open != 0) return false;
    for (const WorkRecord& record : from.async) {
      if (record.complete_ns > now_ns()) return false;
    }
    return true;
  }
  // The rank waits until they all have (not yet): `done`, or the waker, returns it.
  void WaitAll(uint32_t rank, std::function<void()> done = nullptr);
  // The rank is done with them (all completed).
  void Collect(uint32_t rank);

  // A member died: collectives it had joined and that had not completed never complete now;
  // those that had complete for nobody there (it is never returned).
  void RankDied(uint32_t rank);
  bool dead(uint32_t rank) const { return ranks_[rank].dead; }

  // The engine's events of SimEventKinds, handed back. OnRankWake returns false when the event
  // was not SimNet's (the rank's own wake).
  void OnCollectiveDone(uint32_t pg, uint64_t seq);
  bool OnRankWake(uint32_t rank) {
    // Most rank wakes are the rank's own (its compute done): checked inline.
    const RankNet& to = ranks_[rank];
    return (to.all_wake_due || to.wake_due) && ReturnRank(rank);
  }
  void OnWorkDone(uint32_t rank, uint64_t payload);

  // The sequence number `rank`'s next collective on `group` gets (1: none issued yet).
  uint64_t next_seq(uint32_t rank, uint32_t group) const { return ranks_[rank].next_seq[group]; }
  const Collectives& collectives() const { return collectives_; }

 private:
  friend class SimWork;
  struct RankNet {
    std::vector<uint64_t> next_seq;  // per process group
    bool blocking = false;
    bool dead = false;
    WorkRecord blocked;
    std::function<void()> blocked_done;  // the seam's callback for it (else the waker)
    bool wake_due = false;               // wake_each_rank: its return from `blocked` is scheduled
    std::vector<WorkRecord> async;
    uint32_t async_open = 0;  // async works whose completion is not known yet
    bool waiting_all = false;
    bool all_wake_due = false;
    std::function<void()> all_done;  // the seam's callback for WaitAll (else the waker)
    // The seam's OnCompletion on async works, by group and sequence number.
    struct AsyncDone {
      uint32_t pg = 0;
      uint64_t seq = 0;
      bool event_due = false;
      std::function<void()> done;
    };
    std::vector<AsyncDone> async_done;
  };

  void Complete(uint32_t pg, Collectives::Instance& instance, const Extension* extension = nullptr);
  void ScheduleAllDone(RankNet& rank, uint32_t r, int64_t last);
  void ScheduleWorkDone(uint32_t r, RankNet::AsyncDone& entry, int64_t complete_ns);
  void Resume(uint32_t r, std::function<void()>& done);
  bool ReturnRank(uint32_t r);  // OnRankWake's: the rank-wake is SimNet's

  Engine* engine_;
  uint32_t world_size_;
  SimEventKinds kinds_;
  bool wake_each_rank_;
  Waker waker_ = nullptr;
  void* waker_context_ = nullptr;
  Collectives collectives_;
  std::vector<RankNet> ranks_;
  Mismatch mismatch_;
  std::vector<uint64_t> wake_scratch_;
};

// Inline: the simulator's rank loop issues every collective through it.
inline SimNet::Posted SimNet::Post(uint32_t r, const PlanStep& step, uint64_t iteration, bool async_op,
                                   const Extension* extension) {
  PETRSIM_ASSERT(r < world_size_ && step.pg < collectives_.groups());
  RankNet& rank = ranks_[r];
  PETRSIM_ASSERT(!rank.dead && !rank.blocking);
  const int64_t now = engine_->now_ns();
  const uint64_t seq = rank.next_seq[step.pg]++;
  const uint32_t index = async_op ? static_cast<uint32_t>(rank.async.size()) : kBlocking;
  const CollectiveSignature signature{step.collective->op(), step.collective->dtype(), step.numel_in};
  const auto arrival = collectives_.Arrive(step.pg, seq, r, signature, &step, iteration, now, Waiter(r, index));
  if (arrival.outcome == Collectives::Outcome::kMismatch) [[unlikely]] {
    const Collectives::Instance& met = *arrival.instance;
    mismatch_ = Mismatch{met.first_rank, met.first, met.first_iteration,
                         WorkRecord{step.pg, seq, now, -1, -1, &step, iteration}};
    return Posted::kMismatch;
  }
  WorkRecord& record = async_op ? rank.async.emplace_back() : rank.blocked;
  record = WorkRecord{step.pg, seq, now, -1, -1, &step, iteration};
  rank.async_open += async_op;
  rank.blocking = !async_op;
  if (arrival.outcome == Collectives::Outcome::kCompleted) {
    Complete(step.pg, *arrival.instance, extension);
    return Posted::kCompleted;
  }
  return Posted::kPending;
}

// A collective a SimBackend issued: where its record is in SimNet (its rank's blocked one or
// async index), found again by its group and sequence number. Once its rank has returned from
// it or collected it, it has completed.
class SimWork final : public comm::Work {
 public:
  SimWork(SimNet& net, uint32_t rank, uint32_t index, uint32_t pg, uint64_t seq, bool failed)
      : net_(&net), rank_(rank), index_(index), pg_(pg), seq_(seq), failed_(failed) {}

  // Completed (or failed) once virtual time has reached its completion.
  bool IsCompleted() override;
  // A completed work returns; a failed one throws CommError kMismatch; a pending one cannot be
  // waited for in virtual time: CommError kBackend says so.
  void Wait() override;
  // A poll whatever the timeout (virtual time does not pass inside a call); throws as Wait()
  // when failed.
  bool WaitFor(int64_t timeout_ms) override;
  // On a work that is over, at once; otherwise from the event that completes it for its rank
  // (for one issued with async_op false, its collective's completion event, even at the present
  // time, so that its members return in arrival order).
  void OnCompletion(std::function<void()> done) override;
  // The simulator moves no values: throws CommError kBackend.
  const std::vector<double>& Result() const override;

 private:
  // Its record while SimNet still holds it, else null (it has completed).
  const WorkRecord* Record() const;
  void Check() const;

  SimNet* net_;
  uint32_t rank_;
  uint32_t index_;  // SimNet::kBlocking or its index among the rank's async works
  uint32_t pg_;
  uint64_t seq_;
  bool failed_;
  bool called_back_ = false;
};

// Which resolved step each of the plan's collectives is, by the Collective's address: the seam's
// Issue names a collective, the simulator keeps its resolved PlanStep.
class StepIndex {
 public:
  // A list of the plan (its collectives in one contiguous vector) and their steps, in order.
  void AddList(std::span<const Collective> collectives, std::span<const PlanStep> steps);
  // One collective outside such a list.
  void AddOne(const PlanStep& step);
  // The step of `collective`, or null when it is none of those added.
  const PlanStep* Find(const Collective& collective) const;

 private:
  struct List {
    std::span<const Collective> collectives;
    std::span<const PlanStep> steps;
  };
  std::vector<List> lists_;
  std::vector<const PlanStep*> ones_;
};

// One simulated rank's Backend on SimNet. It issues the plan's collectives only (`steps`; any
// other is refused with CommError kBackend); `iteration` is the rank's counter its records carry.
class SimBackend final : public comm::Backend {
 public:
  SimBackend(SimNet& net, const StepIndex& steps, uint32_t rank, const uint64_t& iteration)
      : net_(&net), steps_(&steps), rank_(rank), iteration_(&iteration) {}

  std::string backend_name() const override { return "simulated"; }
  uint32_t rank() const override { return rank_; }
  uint32_t world_size() const override { return net_->world_size(); }
  // `input` is not read: the simulator moves no values.
  std::unique_ptr<comm::Work> Issue(const Collective& collective, std::span<const double> input) override;
  std::unique_ptr<comm::Work> Issue(const Collective& collective, std::span<const double> input,
                                    const comm::IssueOptions& options) override;
  // `works` must be every async work this rank has in flight (SimNet::WaitAll).
  void OnAllCompleted(std::span<const std::unique_ptr<comm::Work>> works, std::function<void()> done) override;

 private:
  SimNet* net_;
  const StepIndex* steps_;
  uint32_t rank_;
  const uint64_t* iteration_;
};

}  // namespace petrsim::sim
