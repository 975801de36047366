// The simulated network and the Backend seam on it; see sim_backend.h.
#include "sim/sim_backend.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "base/assert.h"

namespace petrsim::sim {
namespace {

// Ends one duration after the last arrival; durations saturate far beyond any time limit.
int64_t CompletionTime(int64_t last_arrival_ns, int64_t duration_ns) {
  constexpr int64_t kCap = int64_t{1} << 61;
  return last_arrival_ns > kCap - duration_ns ? kCap : last_arrival_ns + duration_ns;
}

bool Over(const WorkRecord& record, int64_t now_ns) { return record.complete_ns >= 0 && record.complete_ns <= now_ns; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// SimNet: issue and completion

SimNet::SimNet(Engine& engine, uint32_t world_size, SimEventKinds kinds, bool wake_each_rank)
    : engine_(&engine),
      world_size_(world_size),
      kinds_(kinds),
      wake_each_rank_(wake_each_rank),
      collectives_(world_size),
      ranks_(world_size) {}

uint32_t SimNet::AddGroup() {
  for (RankNet& rank : ranks_) rank.next_seq.push_back(1);
  return collectives_.AddGroup();
}

// Every member has arrived: the collective ends one duration after the last arrival. Async
// works learn their completion time now; the members blocked in it all return at that time
// through one event, which returns them in arrival order (as one event per member, scheduled
// back to back, would: nothing else can run between them).
void SimNet::Complete(uint32_t pg, Collectives::Instance& instance, const Extension* extension) {
  int64_t done = CompletionTime(instance.last_arrival_ns, instance.first->duration_ns);
  if (extension != nullptr) {
    done = CompletionTime(done, extension->extra_ns);
    for (const uint64_t waiter : instance.waiters) ranks_[WaiterRank(waiter)].next_seq[pg] += extension->extra_seqs;
  }
  bool blocked = false;
  for (const uint64_t waiter : instance.waiters) {
    const uint32_t r = WaiterRank(waiter);
    RankNet& rank = ranks_[r];
    if (rank.dead) continue;
    const uint32_t index = WaiterIndex(waiter);
    if (index == kBlocking) {
      PETRSIM_ASSERT(rank.blocking && rank.blocked.pg == pg && rank.blocked.seq == instance.seq);
      rank.blocked.complete_ns = done;
      rank.blocked.started_ns = instance.last_arrival_ns;
      blocked = true;
      if (wake_each_rank_) {
        rank.wake_due = true;
        engine_->Schedule(done, kinds_.rank_wake, r, 0);
      }
      continue;
    }
    PETRSIM_ASSERT(index < rank.async.size());
    WorkRecord& record = rank.async[index];
    PETRSIM_ASSERT(record.pg == pg && record.seq == instance.seq && record.complete_ns < 0);
    record.complete_ns = done;
    record.started_ns = instance.last_arrival_ns;
    PETRSIM_ASSERT(rank.async_open > 0);
    --rank.async_open;
    for (auto& entry : rank.async_done) {
      if (entry.pg == pg && entry.seq == instance.seq && !entry.event_due) ScheduleWorkDone(r, entry, done);
    }
    if (rank.waiting_all && rank.async_open == 0) ScheduleAllDone(rank, r, done);
  }
  if (blocked && !wake_each_rank_) {
    engine_->Schedule(done, kinds_.collective_done, pg, instance.seq);
  } else {
    collectives_.Close(pg, instance.seq);
  }
}

void SimNet::ScheduleAllDone(RankNet& rank, uint32_t r, int64_t last) {
  for (const WorkRecord& record : rank.async) last = std::max(last, record.complete_ns);
  rank.waiting_all = false;
  rank.all_wake_due = true;
  engine_->Schedule(std::max(last, engine_->now_ns()), kinds_.rank_wake, r, 0);
}

void SimNet::ScheduleWorkDone(uint32_t r, RankNet::AsyncDone& entry, int64_t complete_ns) {
  PETRSIM_ASSERT(entry.seq < (uint64_t{1} << 32));
  entry.event_due = true;
  engine_->Schedule(std::max(complete_ns, engine_->now_ns()), kinds_.work_done, r, entry.seq << 32 | entry.pg);
}

// ---------------------------------------------------------------------------------------------
// SimNet: the rank's side

void SimNet::WaitAll(uint32_t r, std::function<void()> done) {
  RankNet& rank = ranks_[r];
  PETRSIM_ASSERT(!rank.dead && !rank.waiting_all && !rank.all_wake_due && !AllCompleted(r));
  rank.all_done = std::move(done);
  if (rank.async_open == 0) {
    ScheduleAllDone(rank, r, engine_->now_ns());
  } else {
    rank.waiting_all = true;
  }
}

void SimNet::Collect(uint32_t r) {
  RankNet& rank = ranks_[r];
  PETRSIM_ASSERT(AllCompleted(r) && !rank.waiting_all && !rank.all_wake_due);
  rank.async.clear();
  // Callbacks on them whose events have run are gone; one still due keeps its entry.
  std::erase_if(rank.async_done, [](const RankNet::AsyncDone& entry) { return !entry.event_due; });
}

void SimNet::RankDied(uint32_t r) {
  RankNet& rank = ranks_[r];
  if (rank.dead) return;
  rank.dead = true;
  if (rank.blocking && rank.blocked.complete_ns < 0) collectives_.Withdraw(rank.blocked.pg, rank.blocked.seq);
  for (const WorkRecord& record : rank.async) {
    if (record.complete_ns < 0) collectives_.Withdraw(record.pg, record.seq);
  }
}

// ---------------------------------------------------------------------------------------------
// SimNet: events

// Returns rank `r` through the seam's callback, else the waker; with neither (a seam user that
// did not wait for a blocking work), a blocked rank just returns from it.
void SimNet::Resume(uint32_t r, std::function<void()>& done) {
  if (done) {
    std::function<void()> callback;
    callback.swap(done);
    callback();
  } else if (waker_ != nullptr) {
    waker_(waker_context_, r);
  } else if (ranks_[r].blocking && Over(ranks_[r].blocked, engine_->now_ns())) {
    Return(r);
  }
}

void SimNet::OnCollectiveDone(uint32_t pg, uint64_t seq) {
  Collectives::Instance* instance = collectives_.Find(pg, seq);
  PETRSIM_ASSERT(instance != nullptr && instance->complete);
  // Returning a rank may issue on this group (and grow its ring): work from a copy.
  wake_scratch_.assign(instance->waiters.begin(), instance->waiters.end());
  collectives_.Close(pg, seq);
  for (const uint64_t waiter : wake_scratch_) {
    if (WaiterIndex(waiter) != kBlocking) continue;
    const uint32_t r = WaiterRank(waiter);
    RankNet& rank = ranks_[r];
    // A member that died since is returned no more.
    if (rank.dead || !rank.blocking || rank.blocked.pg != pg || rank.blocked.seq != seq) continue;
    Resume(r, rank.blocked_done);
  }
}

bool SimNet::ReturnRank(uint32_t r) {
  RankNet& rank = ranks_[r];
  if (rank.all_wake_due) {
    rank.all_wake_due = false;
    if (!rank.dead) Resume(r, rank.all_done);
    return true;
  }
  if (rank.wake_due) {
    rank.wake_due = false;
    if (!rank.dead) Resume(r, rank.blocked_done);
    return true;
  }
  return false;
}

void SimNet::OnWorkDone(uint32_t r, uint64_t payload) {
  RankNet& rank = ranks_[r];
  const uint32_t pg = static_cast<uint32_t>(payload);
  const uint64_t seq = payload >> 32;
  for (size_t i = 0; i < rank.async_done.size(); ++i) {
    RankNet::AsyncDone& entry = rank.async_done[i];
    if (entry.pg != pg || entry.seq != seq || !entry.event_due) continue;
    std::function<void()> done = std::move(entry.done);
    rank.async_done.erase(rank.async_done.begin() + static_cast<std::ptrdiff_t>(i));
    if (!rank.dead) done();
    return;
  }
}

// ---------------------------------------------------------------------------------------------
// SimWork

const WorkRecord* SimWork::Record() const {
  const SimNet::RankNet& rank = net_->ranks_[rank_];
  if (index_ == SimNet::kBlocking) {
    return rank.blocking && rank.blocked.pg == pg_ && rank.blocked.seq == seq_ ? &rank.blocked : nullptr;
  }
  if (index_ < rank.async.size() && rank.async[index_].pg == pg_ && rank.async[index_].seq == seq_) {
    return &rank.async[index_];
  }
  return nullptr;
}

void SimWork::Check() const {
  if (failed_) {
    throw comm::CommError(comm::CommError::Kind::kMismatch,
                          "the members of this collective issued different collectives at its sequence number");
  }
}

bool SimWork::IsCompleted() {
  if (failed_) return true;
  const WorkRecord* record = Record();
  return record == nullptr || Over(*record, net_->now_ns());
}

void SimWork::Wait() {
  if (!WaitFor(0)) {
    throw comm::CommError(comm::CommError::Kind::kBackend,
                          "a simulated rank cannot block in virtual time: wait through OnCompletion");
  }
}

bool SimWork::WaitFor(int64_t timeout_ms) {
  PETRSIM_ASSERT(timeout_ms >= 0);
  Check();
  return IsCompleted();
}

void SimWork::OnCompletion(std::function<void()> done) {
  PETRSIM_ASSERT(done && !called_back_);
  called_back_ = true;
  SimNet::RankNet& rank = net_->ranks_[rank_];
  const WorkRecord* record = failed_ ? nullptr : Record();
  if (record != nullptr && index_ == SimNet::kBlocking) {
    // Its rank blocks in it until the collective's completion event (or its own wake) returns it.
    PETRSIM_ASSERT(!rank.blocked_done);
    rank.blocked_done = [net = net_, r = rank_, done = std::move(done)] {
      net->Return(r);
      done();
    };
    return;
  }
  if (record == nullptr || Over(*record, net_->now_ns())) {
    done();
    return;
  }
  rank.async_done.push_back(SimNet::RankNet::AsyncDone{pg_, seq_, false, std::move(done)});
  if (record->complete_ns >= 0) net_->ScheduleWorkDone(rank_, rank.async_done.back(), record->complete_ns);
}

const std::vector<double>& SimWork::Result() const {
  Check();
  throw comm::CommError(comm::CommError::Kind::kBackend, "the simulated backend moves no values: a work has no result");
}

// ---------------------------------------------------------------------------------------------
// SimBackend and StepIndex

std::unique_ptr<comm::Work> SimBackend::Issue(const Collective& collective, std::span<const double> input) {
  return Issue(collective, input, comm::IssueOptions{});
}

std::unique_ptr<comm::Work> SimBackend::Issue(const Collective& collective, std::span<const double> /*input*/,
                                              const comm::IssueOptions& options) {
  const PlanStep* step = steps_->Find(collective);
  if (step == nullptr) {
    throw comm::CommError(
        comm::CommError::Kind::kBackend,
        "a simulated rank issues the plan's collectives only; this one is not: " + comm::DescribeCall(collective));
  }
  const uint32_t pg = step->pg;
  const uint64_t seq = net_->next_seq(rank_, pg);
  const uint32_t index = options.async_op ? static_cast<uint32_t>(net_->in_flight(rank_).size()) : SimNet::kBlocking;
  const SimNet::Posted posted = net_->Post(rank_, *step, *iteration_, options.async_op);
  return std::make_unique<SimWork>(*net_, rank_, index, pg, seq, posted == SimNet::Posted::kMismatch);
}

void SimBackend::OnAllCompleted(std::span<const std::unique_ptr<comm::Work>> works, std::function<void()> done) {
  for (const auto& work : works) PETRSIM_ASSERT(work != nullptr);
  if (net_->AllCompleted(rank_)) {
    net_->Collect(rank_);
    done();
    return;
  }
  net_->WaitAll(rank_, [net = net_, r = rank_, done = std::move(done)] {
    net->Collect(r);
    done();
  });
}

void StepIndex::AddList(std::span<const Collective> collectives, std::span<const PlanStep> steps) {
  PETRSIM_ASSERT(collectives.size() == steps.size());
  if (!collectives.empty()) lists_.push_back(List{collectives, steps});
}

void StepIndex::AddOne(const PlanStep& step) { ones_.push_back(&step); }

const PlanStep* StepIndex::Find(const Collective& collective) const {
  const std::less<const Collective*> before;
  for (const List& list : lists_) {
    const Collective* begin = list.collectives.data();
    if (!before(&collective, begin) && before(&collective, begin + list.collectives.size())) {
      return &list.steps[static_cast<size_t>(&collective - begin)];
    }
  }
  for (const PlanStep* step : ones_) {
    if (step->collective == &collective) return step;
  }
  return nullptr;
}

}  // namespace petrsim::sim
