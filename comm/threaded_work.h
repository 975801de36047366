// The Work of a threaded world (the fake, the threaded rendezvous): what both share of the
// seam's waits (plan/backend.h). Wait and WaitFor wait until a time (the work's own deadline at
// the latest) through the implementation's WaitUntil; OnCompletion runs a thread of the work's
// own that waits for it and then calls back, so a callback runs once the work completed or
// failed, its deadline included, whoever else waits. An implementation's destructor calls
// JoinCallback() first (a callback that drops its own work is let go instead).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <utility>

#include "base/assert.h"
#include "plan/backend.h"

namespace petrsim::comm {

class ThreadedWork : public Work {
 public:
  void Wait() override { WaitUntil(deadline_); }

  bool WaitFor(int64_t timeout_ms) override {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
    return WaitUntil(std::min(until, deadline_));
  }

  void OnCompletion(std::function<void()> done) override {
    if (IsCompleted()) {
      done();
      return;
    }
    PETRSIM_ASSERT(!callback_.joinable());
    callback_ = std::thread([this, done = std::move(done)] {
      try {
        Wait();
      } catch (const CommError&) {
        // The owner's Wait() throws it again.
      }
      done();
    });
  }

 protected:
  // `deadline`: when the backend's timeout fails the work (a work failed at issue never waits).
  explicit ThreadedWork(std::chrono::steady_clock::time_point deadline = {}) : deadline_(deadline) {}

  // Waits until `until` (at most the deadline): true once the work completed, false when `until`
  // came first before the deadline; throws the failure, the deadline's included. Called by the
  // owner and by the callback thread, so one waiter at a time.
  virtual bool WaitUntil(std::chrono::steady_clock::time_point until) = 0;

  // Waits for a pending callback to return; from the callback's own thread, lets it go instead.
  void JoinCallback() {
    if (!callback_.joinable()) return;
    if (callback_.get_id() == std::this_thread::get_id()) {
      callback_.detach();
    } else {
      callback_.join();
    }
  }

  const std::chrono::steady_clock::time_point deadline_;

 private:
  std::thread callback_;
};

}  // namespace petrsim::comm
