// The Backend seam's fake (plan/backend.h): the ranks of one world as threads of this process, for
// tests of code that issues collectives (no sockets, no LibTorch). Calls pair up as NCCL pairs
// them, by order: a rank's k-th call on a process group meets every other rank's k-th call
// there, whatever they are (no signature check: that is the simulated rendezvous's job). It
// records every call, and takes two faults: a rank that stops issuing (its peers time out) and
// a call that fails with a given error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/backend.h"

namespace petrsim::comm {

class FakeWorld {
 public:
  FakeWorld(uint32_t world_size, std::chrono::milliseconds timeout);

  // Rank `rank`'s Backend; the world must outlive it.
  std::unique_ptr<Backend> Join(uint32_t rank);

  // From now on `rank`'s calls are dropped: its works never complete, its peers time out.
  void Silence(uint32_t rank);
  // `rank`'s next call fails at once with `error` (and is not delivered).
  void FailNextCall(uint32_t rank, CommError error);
  // Every call delivered so far, in the order they were issued: (rank, DescribeCall).
  std::vector<std::pair<uint32_t, std::string>> calls() const;

 private:
  friend class FakeBackend;
  friend class FakeWork;
  struct Meeting {
    std::vector<std::optional<std::vector<double>>> inputs;  // per rank, once it called
    Collective first;
    uint32_t arrived = 0;
  };

  uint32_t world_size_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<std::string, uint64_t>, Meeting> meetings_;  // (process group, call index)
  std::map<std::pair<std::string, uint32_t>, uint64_t> next_call_;
  std::vector<bool> silenced_;
  std::map<uint32_t, CommError> failures_;
  std::vector<std::pair<uint32_t, std::string>> calls_;
};

}  // namespace petrsim::comm
