// The real backend's DataLoader (issue "real backend", section Data), like PyTorch's with
// num_workers = W and prefetch_factor = P (docs/reference/streampetr.md, section 6): batch k is loaded by worker
// k mod W; at most P * W batches are in flight ahead of the one the main process waits for
// (batch k + P*W is dispatched when batch k is consumed); the main process consumes batches in
// order; an exception thrown while loading a batch is raised in the main process when it asks
// for that batch; with W = 0 the main process loads each batch itself when it asks for it.
// Workers are threads (the real backend's per-rank processes hold the model; loading is C++).
// Plain C++ (no LibTorch).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace petrsim::real {

template <class Batch>
class ThreadedLoader {
 public:
  // load(worker, batch_index) builds one batch (worker -1: the main process, W = 0).
  using LoadFn = std::function<Batch(int32_t worker, uint64_t batch)>;

  ThreadedLoader(uint32_t workers, uint32_t prefetch_factor, uint64_t batches, LoadFn load)
      : workers_(workers),
        window_(std::max<uint64_t>(1, uint64_t{prefetch_factor} * workers)),
        batches_(batches),
        load_(std::move(load)),
        queues_(workers) {
    for (uint32_t w = 0; w < workers_; ++w) threads_.emplace_back([this, w] { Work(w); });
    std::lock_guard<std::mutex> lock(mutex_);
    Dispatch();
  }
  ~ThreadedLoader() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_workers_.notify_all();
    // A worker stuck inside load() is detached: the process is about to report it and exit.
    for (auto& thread : threads_) {
      if (stuck_detached_) {
        thread.detach();
      } else {
        thread.join();
      }
    }
  }
  ThreadedLoader(const ThreadedLoader&) = delete;
  ThreadedLoader& operator=(const ThreadedLoader&) = delete;

  // The next batch in order; nothing after the last. Rethrows the batch's exception. Waits at
  // most `timeout` (then returns nothing and sets timed_out()).
  std::optional<Batch> Next(std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) {
    if (next_ >= batches_) return std::nullopt;
    if (workers_ == 0) return load_(-1, next_++);
    std::unique_lock<std::mutex> lock(mutex_);
    const auto ready = [&] { return done_.count(next_) > 0; };
    if (timeout == std::chrono::milliseconds::max()) {
      batch_ready_.wait(lock, ready);
    } else if (!batch_ready_.wait_for(lock, timeout, ready)) {
      timed_out_ = true;
      return std::nullopt;
    }
    auto node = done_.extract(next_);
    ++next_;
    Dispatch();
    if (node.mapped().error) std::rethrow_exception(node.mapped().error);
    return std::move(node.mapped().batch);
  }

  bool timed_out() const { return timed_out_; }
  // Batches handed to workers so far (for tests of the prefetch window).
  uint64_t dispatched() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dispatched_;
  }
  // Marks the workers as possibly stuck in load(): the destructor detaches them instead of
  // joining (the caller reports a livelock and ends the process).
  void AbandonStuckWorkers() { stuck_detached_ = true; }

 private:
  struct Result {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };

  // Hands out every batch the window allows (mutex_ held).
  void Dispatch() {
    if (workers_ == 0) return;  // the caller loads in Next()
    while (dispatched_ < batches_ && dispatched_ < next_ + window_) {
      queues_[dispatched_ % workers_].push_back(dispatched_);
      ++dispatched_;
    }
    wake_workers_.notify_all();
  }

  void Work(uint32_t w) {
    for (;;) {
      uint64_t batch = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_workers_.wait(lock, [&] { return stopping_ || !queues_[w].empty(); });
        if (stopping_) return;
        batch = queues_[w].front();
        queues_[w].pop_front();
      }
      Result result;
      try {
        result.batch = load_(static_cast<int32_t>(w), batch);
      } catch (...) {
        result.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.emplace(batch, std::move(result));
      }
      batch_ready_.notify_all();
    }
  }

  const uint32_t workers_;
  const uint64_t window_;
  const uint64_t batches_;
  LoadFn load_;
  mutable std::mutex mutex_;
  std::condition_variable wake_workers_, batch_ready_;
  std::vector<std::deque<uint64_t>> queues_;  // per worker, batch indices in order
  std::map<uint64_t, Result> done_;
  uint64_t next_ = 0;        // the batch the main process asks for next
  uint64_t dispatched_ = 0;  // batches handed to workers
  bool stopping_ = false;
  bool timed_out_ = false;
  bool stuck_detached_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace petrsim::real
