// OnCompletion (plan/backend.h) for the works of a threaded world (the fake, the threaded
// rendezvous): a thread of the work's own waits for it and then calls back, so a callback runs
// once the work completed or failed, its deadline included, whoever else waits. The work joins
// it before it goes (a callback that drops its own work is let go instead).
#pragma once

#include <functional>
#include <thread>
#include <utility>

#include "base/assert.h"

namespace petrsim::comm {

class CallbackThread {
 public:
  CallbackThread() = default;
  CallbackThread(const CallbackThread&) = delete;
  CallbackThread& operator=(const CallbackThread&) = delete;
  ~CallbackThread() { Join(); }

  // Runs `wait` (which must return, not throw, once the work is over) and then `done`, on a
  // thread of its own. Once per work.
  void Start(std::function<void()> wait, std::function<void()> done) {
    PETRSIM_ASSERT(!thread_.joinable());
    thread_ = std::thread([wait = std::move(wait), done = std::move(done)] {
      wait();
      done();
    });
  }

  // Waits for the callback to return; from the callback's own thread, lets it go instead.
  void Join() {
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }

 private:
  std::thread thread_;
};

}  // namespace petrsim::comm
