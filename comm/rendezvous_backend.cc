// The simulated rendezvous as a Backend; see rendezvous_backend.h.
#include "comm/rendezvous_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <optional>

#include "comm/threaded_work.h"

namespace petrsim::sim {

class RendezvousWork : public comm::ThreadedWork {
 public:
  RendezvousWork(RendezvousWorld& world, Collective collective, uint32_t rank, RendezvousWorld::Key key)
      : comm::ThreadedWork(std::chrono::steady_clock::now() + world.timeout_),
        world_(&world),
        collective_(std::move(collective)),
        rank_(rank),
        key_(key) {}
  explicit RendezvousWork(comm::CommError error) : error_(std::move(error)), over_(true) {}

  ~RendezvousWork() override {
    JoinCallback();
    if (world_ != nullptr && !released_) {
      std::lock_guard<std::mutex> lock(world_->mutex_);
      world_->Release(key_);
    }
  }

  bool IsCompleted() override {
    if (over_) return true;
    std::lock_guard<std::mutex> lock(world_->mutex_);
    return Finished();
  }

  const std::vector<double>& Result() const override { return result_; }

 private:
  // Waits until `until` (at most the deadline): true once the instance completed (the result
  // computed and the payload released), false when `until` came first before the deadline;
  // throws the failure (a mismatch, a gone peer, the deadline). One waiter at a time.
  bool WaitUntil(std::chrono::steady_clock::time_point until) override {
    std::lock_guard<std::mutex> waiting(wait_mutex_);
    if (error_) throw *error_;
    if (released_) return true;
    std::unique_lock<std::mutex> lock(world_->mutex_);
    world_->changed_.wait_until(lock, until, [&] { return Finished(); });
    if (!Finished() && until < deadline_) return false;
    const RendezvousWorld::Payload& payload = world_->payloads_.at(key_);
    const auto* instance = world_->rendezvous_.Find(key_.first, key_.second);
    if (instance == nullptr || !instance->complete) {
      error_ = Failure(payload);
      world_->Release(key_);
      released_ = true;
      over_ = true;
      throw *error_;
    }
    result_ = comm::CollectiveOutput(collective_, payload.inputs, rank_);
    world_->Release(key_);
    released_ = true;
    over_ = true;
    return true;
  }

  // Why the instance never completed (mutex_ held): the mismatch, a gone peer, or the deadline.
  comm::CommError Failure(const RendezvousWorld::Payload& payload) const {
    const std::string where = fmt::format("rank {}: {} (seq {})", rank_, comm::DescribeCall(collective_), key_.second);
    if (!payload.mismatch.empty()) {
      return comm::CommError(comm::CommError::Kind::kMismatch, where + ": " + payload.mismatch);
    }
    if (!world_->dead_.empty()) {
      return comm::CommError(comm::CommError::Kind::kPeerGone,
                             fmt::format("{}: rank {} is gone", where, *world_->dead_.begin()));
    }
    std::string missing;
    for (uint32_t r = 0; r < world_->world_size_; ++r) {
      if (payload.inputs[r].empty() && collective_.numel() > 0) {
        missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      }
    }
    return comm::CommError(
        comm::CommError::Kind::kTimeout,
        fmt::format("{}: timed out after {} ms; ranks {} never issued it", where, world_->timeout_.count(), missing));
  }

  // mutex_ held.
  bool Finished() const {
    const auto* instance = world_->rendezvous_.Find(key_.first, key_.second);
    return (instance != nullptr && instance->complete) || !world_->payloads_.at(key_).mismatch.empty() ||
           !world_->dead_.empty();
  }

  RendezvousWorld* world_ = nullptr;
  Collective collective_;
  uint32_t rank_ = 0;
  RendezvousWorld::Key key_;
  std::optional<comm::CommError> error_;
  bool released_ = false;
  std::vector<double> result_;
  std::mutex wait_mutex_;          // held by the one waiter (owner or callback thread)
  std::atomic<bool> over_{false};  // completed or failed, as IsCompleted reads it without waiting
};

class RendezvousBackend : public comm::Backend {
 public:
  RendezvousBackend(RendezvousWorld& world, uint32_t rank) : world_(&world), rank_(rank) {}
  std::string backend_name() const override { return "simulated rendezvous"; }
  uint32_t rank() const override { return rank_; }
  uint32_t world_size() const override { return world_->world_size_; }

  using comm::Backend::Issue;  // the overload with options ignores them: Wait() blocks

  std::unique_ptr<comm::Work> Issue(const Collective& collective, std::span<const double> input) override {
    std::lock_guard<std::mutex> lock(world_->mutex_);
    const uint32_t group = world_->GroupId(collective.process_group());
    const uint64_t seq = ++world_->next_seq_[rank_][group];
    const CollectiveSignature signature{collective.op(), collective.dtype(), collective.numel()};
    const auto arrival = world_->rendezvous_.Arrive(group, seq, rank_, signature, &collective, 0, 0, rank_);
    const RendezvousWorld::Key key{group, seq};
    RendezvousWorld::Payload& payload = world_->payloads_[key];
    payload.inputs.resize(world_->world_size_);
    if (arrival.outcome == Rendezvous<Collective>::Outcome::kMismatch) {
      // Every member fails: the instance can never complete.
      payload.mismatch =
          fmt::format("rank {} issued {} at seq {} where rank {} issued {}", rank_, comm::DescribeCall(collective), seq,
                      arrival.instance->first_rank, comm::DescribeCall(*arrival.instance->first));
      world_->changed_.notify_all();
      comm::CommError error(
          comm::CommError::Kind::kMismatch,
          fmt::format("rank {}: {} (seq {}): {}", rank_, comm::DescribeCall(collective), seq, payload.mismatch));
      world_->Release(key);
      return std::make_unique<RendezvousWork>(std::move(error));
    }
    // The instance keeps a pointer to the first arrival's collective: the payload, which lives
    // as long as the instance, holds it.
    if (arrival.instance->first == &collective) {
      payload.first = collective;
      arrival.instance->first = &payload.first;
    }
    payload.inputs[rank_] = comm::ContributedValues(collective, input);
    if (arrival.outcome == Rendezvous<Collective>::Outcome::kCompleted) world_->changed_.notify_all();
    return std::make_unique<RendezvousWork>(*world_, collective, rank_, key);
  }

 private:
  RendezvousWorld* world_;
  uint32_t rank_;
};

RendezvousWorld::RendezvousWorld(uint32_t world_size, std::chrono::milliseconds timeout)
    : world_size_(world_size), timeout_(timeout), rendezvous_(world_size), next_seq_(world_size) {}

std::unique_ptr<comm::Backend> RendezvousWorld::Join(uint32_t rank) {
  PETRSIM_ASSERT(rank < world_size_);
  return std::make_unique<RendezvousBackend>(*this, rank);
}

void RendezvousWorld::Kill(uint32_t rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  dead_.insert(rank);
  for (uint32_t group = 0; group < next_seq_[rank].size(); ++group) {
    const uint64_t seq = next_seq_[rank][group];
    const auto* instance = seq == 0 ? nullptr : rendezvous_.Find(group, seq);
    if (instance == nullptr || instance->complete) continue;
    const auto& joined = instance->waiters;
    if (std::find(joined.begin(), joined.end(), rank) != joined.end()) rendezvous_.Withdraw(group, seq);
  }
  changed_.notify_all();
}

uint32_t RendezvousWorld::GroupId(const std::string& name) {
  const auto [it, added] = group_ids_.emplace(name, rendezvous_.groups());
  if (added) {
    rendezvous_.AddGroup();
    for (auto& seqs : next_seq_) seqs.push_back(0);
  }
  return it->second;
}

void RendezvousWorld::Release(const Key& key) {
  Payload& payload = payloads_.at(key);
  if (++payload.taken < world_size_) return;
  // Every member is done with it (or one failed on a mismatch and the rest timed out).
  if (rendezvous_.Find(key.first, key.second) != nullptr) rendezvous_.Close(key.first, key.second);
  payloads_.erase(key);
}

}  // namespace petrsim::sim
