// The fake Backend; see fake_backend.h.
#include "comm/fake_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "base/assert.h"
#include "comm/threaded_work.h"

namespace petrsim::comm {

class FakeWork : public ThreadedWork {
 public:
  FakeWork(FakeWorld& world, Collective collective, uint32_t rank, std::pair<std::string, uint64_t> key)
      : ThreadedWork(std::chrono::steady_clock::now() + world.timeout_),
        world_(&world),
        collective_(std::move(collective)),
        rank_(rank),
        key_(std::move(key)) {}
  explicit FakeWork(CommError error) : error_(std::move(error)), over_(true) {}

  ~FakeWork() override { JoinCallback(); }

  bool IsCompleted() override {
    if (over_) return true;
    std::lock_guard<std::mutex> lock(world_->mutex_);
    return world_->meetings_.at(key_).arrived == world_->world_size_;
  }

  const std::vector<double>& Result() const override { return result_; }

 private:
  // Waits until `until` (at most the deadline): true once the meeting is complete (the result
  // computed), false when `until` came first before the deadline; throws the timeout at the
  // deadline. One waiter at a time (the owner and a callback thread may both wait).
  bool WaitUntil(std::chrono::steady_clock::time_point until) override {
    std::lock_guard<std::mutex> waiting(wait_mutex_);
    if (error_) throw *error_;
    if (done_) return true;
    std::unique_lock<std::mutex> lock(world_->mutex_);
    FakeWorld::Meeting& meeting = world_->meetings_.at(key_);
    if (!world_->changed_.wait_until(lock, until, [&] { return meeting.arrived == world_->world_size_; })) {
      if (until < deadline_) return false;
      std::string missing;
      for (uint32_t r = 0; r < world_->world_size_; ++r) {
        if (!meeting.inputs[r]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      }
      error_ = CommError(CommError::Kind::kTimeout,
                         fmt::format("fake comm: rank {}: {} (call {} on {}) timed out after {} ms; ranks {} never "
                                     "issued it",
                                     rank_, DescribeCall(collective_), key_.second + 1, key_.first,
                                     world_->timeout_.count(), missing));
      over_ = true;
      throw *error_;
    }
    // The meeting's inputs, each padded or cut to this rank's numel (calls that differ still
    // pair up, as NCCL's would).
    std::vector<std::vector<double>> inputs;
    for (const auto& input : meeting.inputs) {
      inputs.push_back(*input);
      inputs.back().resize(collective_.numel(), 0.0);
    }
    result_ = CollectiveOutput(collective_, inputs, rank_);
    done_ = true;
    over_ = true;
    return true;
  }

  FakeWorld* world_ = nullptr;
  Collective collective_;
  uint32_t rank_ = 0;
  std::pair<std::string, uint64_t> key_;
  std::optional<CommError> error_;
  bool done_ = false;
  std::vector<double> result_;
  std::mutex wait_mutex_;          // held by the one waiter (owner or callback thread)
  std::atomic<bool> over_{false};  // completed or failed, as IsCompleted reads it without waiting
};

class FakeBackend : public Backend {
 public:
  FakeBackend(FakeWorld& world, uint32_t rank) : world_(&world), rank_(rank) {}
  std::string backend_name() const override { return "fake"; }
  uint32_t rank() const override { return rank_; }
  uint32_t world_size() const override { return world_->world_size_; }

  using Backend::Issue;  // the overload with options ignores them: Wait() blocks

  std::unique_ptr<Work> Issue(const Collective& collective, std::span<const double> input) override {
    std::lock_guard<std::mutex> lock(world_->mutex_);
    if (const auto it = world_->failures_.find(rank_); it != world_->failures_.end()) {
      CommError error = it->second;
      world_->failures_.erase(it);
      return std::make_unique<FakeWork>(std::move(error));
    }
    const std::pair<std::string, uint64_t> key{collective.process_group(),
                                               world_->next_call_[{collective.process_group(), rank_}]++};
    FakeWorld::Meeting& meeting = world_->meetings_[key];
    if (meeting.inputs.empty()) {
      meeting.inputs.resize(world_->world_size_);
      meeting.first = collective;
    }
    if (!world_->silenced_[rank_]) {
      meeting.inputs[rank_] = ContributedValues(collective, input);
      ++meeting.arrived;
      world_->calls_.emplace_back(rank_, DescribeCall(collective));
      world_->changed_.notify_all();
    }
    return std::make_unique<FakeWork>(*world_, collective, rank_, key);
  }

 private:
  FakeWorld* world_;
  uint32_t rank_;
};

FakeWorld::FakeWorld(uint32_t world_size, std::chrono::milliseconds timeout)
    : world_size_(world_size), timeout_(timeout), silenced_(world_size, false) {
  PETRSIM_ASSERT(world_size >= 1);
}

std::unique_ptr<Backend> FakeWorld::Join(uint32_t rank) {
  PETRSIM_ASSERT(rank < world_size_);
  return std::make_unique<FakeBackend>(*this, rank);
}

void FakeWorld::Silence(uint32_t rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  silenced_.at(rank) = true;
}

void FakeWorld::FailNextCall(uint32_t rank, CommError error) {
  std::lock_guard<std::mutex> lock(mutex_);
  failures_.insert_or_assign(rank, std::move(error));
}

std::vector<std::pair<uint32_t, std::string>> FakeWorld::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

}  // namespace petrsim::comm
