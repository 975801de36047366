// A real rank's line to the others during training, over its own TCPStore client: its progress
// (iteration, sequence numbers per process group, what it is doing) published for the
// collective watchdog's report, the job's stop by any rank, and a dead_rank fault's SIGKILL.
// Internal to real/ (the trainer's part "job control").
#pragma once

#include <signal.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "real/trainer.h"

namespace petrsim::real {

using Clock = std::chrono::steady_clock;

inline int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a rank tells the others through the store: "unix_ms iteration pg=seq,pg=seq doing".
struct Progress {
  int64_t unix_ms = 0;
  uint64_t iteration = 0;
  std::map<std::string, uint64_t> seqs;  // the last sequence number issued per process group
  std::string doing;

  std::string Encode() const {
    std::string seq_list;
    for (const auto& [group, seq] : seqs) {
      if (!seq_list.empty()) seq_list += ',';
      seq_list += group;
      seq_list += '=';
      seq_list += std::to_string(seq);
    }
    return fmt::format("{} {} {} {}", unix_ms, iteration, seq_list.empty() ? "-" : seq_list, doing);
  }
  static std::optional<Progress> Decode(const std::string& text) {
    std::istringstream in(text);
    Progress p;
    std::string seq_list;
    if (!(in >> p.unix_ms >> p.iteration >> seq_list)) return std::nullopt;
    std::getline(in >> std::ws, p.doing);
    if (seq_list != "-") {
      std::istringstream items(seq_list);
      for (std::string item; std::getline(items, item, ',');) {
        const auto eq = item.rfind('=');
        if (eq == std::string::npos) return std::nullopt;
        p.seqs[item.substr(0, eq)] = std::stoull(item.substr(eq + 1));
      }
    }
    return p;
  }
};

inline std::string ProgressKey(uint32_t rank) {
  std::string key = "petrsim/progress/";
  key += std::to_string(rank);
  return key;
}
const char kStopKey[] = "petrsim/stop";
inline std::string AckKey(uint32_t rank) {
  std::string key = "petrsim/stop_read/";
  key += std::to_string(rank);
  return key;
}

// The rank's line to the others, over its own TCPStore client: a monitor thread publishes the
// rank's progress every 100 ms when it changed, watches for a stop of the job by another rank
// (own_process: `stop_now` writes the trace and ends the process), and applies a dead_rank
// fault's SIGKILL at its time.
class JobControl {
 public:
  JobControl(const TrainOptions& options, std::chrono::milliseconds timeout, int64_t kill_at_ns,
             std::function<void(const std::string&)> stop_now)
      : options_(options), kill_at_ns_(kill_at_ns), stop_now_(std::move(stop_now)), start_(Clock::now()) {
    c10d::TCPStoreOptions client;
    client.port = options.master_port;
    client.isServer = false;
    client.waitWorkers = false;
    client.timeout = timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(options.master_addr, client);
    thread_ = std::thread([this] { Run(); });
  }
  ~JobControl() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // The main process blocks (in a collective, or for its next batch) or goes on.
  void Waiting(bool waiting) {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_ = waiting;
  }

  // What the rank published last (for its own last words).
  Progress Snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    return progress_;
  }

  void Update(const std::function<void(Progress&)>& change) {
    std::lock_guard<std::mutex> lock(mutex_);
    change(progress_);
    dirty_ = true;
  }

  // Stops the job with `reason` (the first stop wins); this rank reports it itself. Waits up
  // to 2 s for the other ranks to acknowledge, so that they have read the reason before this
  // rank's exit (its store server, if it is rank 0; its sockets) makes their collectives fail.
  void Stop(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      self_stopped_ = true;
    }
    try {
      {
        std::lock_guard<std::mutex> lock(store_mutex_);
        if (!store_->check({kStopKey})) store_->set(kStopKey, std::vector<uint8_t>(reason.begin(), reason.end()));
      }
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      for (uint32_t r = 0; r < options_.world_size; ++r) {
        while (r != options_.rank && Clock::now() < deadline) {
          {
            std::lock_guard<std::mutex> lock(store_mutex_);
            if (store_->check({AckKey(r)})) break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    } catch (const std::exception&) {
      // The store's server (rank 0) is gone: the others learn it from their collectives.
    }
  }

  // This rank has read another rank's stop.
  void Acknowledge() {
    try {
      std::lock_guard<std::mutex> lock(store_mutex_);
      store_->set(AckKey(options_.rank), std::vector<uint8_t>{1});
    } catch (const std::exception&) {
    }
  }

  // The reason another rank stopped the job, asking the store now.
  std::optional<std::string> StoppedByAnother() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (self_stopped_) return std::nullopt;
      if (stop_seen_) return stop_reason_;
    }
    try {
      std::lock_guard<std::mutex> lock(store_mutex_);
      if (!store_->check({kStopKey})) return std::nullopt;
      const auto value = store_->get(kStopKey);
      return std::string(value.begin(), value.end());
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  // Every rank's last published progress (none where it published nothing); nothing at all
  // when the store is unreachable.
  std::optional<std::vector<std::optional<Progress>>> ReadAll() {
    std::vector<std::optional<Progress>> all(options_.world_size);
    try {
      std::lock_guard<std::mutex> lock(store_mutex_);
      for (uint32_t r = 0; r < options_.world_size; ++r) {
        if (!store_->check({ProgressKey(r)})) continue;
        const auto value = store_->get(ProgressKey(r));
        all[r] = Progress::Decode(std::string(value.begin(), value.end()));
      }
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return all;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!quit_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      if (quit_) break;
      if (kill_at_ns_ >= 0 && options_.own_process &&
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count() >= kill_at_ns_) {
        ::kill(::getpid(), SIGKILL);  // the scenario's dead_rank fault: no goodbye, as in a real crash
      }
      std::string published;
      if (dirty_) {
        progress_.unix_ms = UnixMs();
        published = progress_.Encode();
        dirty_ = false;
      }
      const bool check_stop = options_.own_process && !self_stopped_ && !stop_seen_;
      lock.unlock();
      std::optional<std::string> stop;
      try {
        std::lock_guard<std::mutex> store_lock(store_mutex_);
        if (!published.empty())
          store_->set(ProgressKey(options_.rank), std::vector<uint8_t>(published.begin(), published.end()));
        if (check_stop && store_->check({kStopKey})) {
          const auto value = store_->get(kStopKey);
          stop = std::string(value.begin(), value.end());
        }
      } catch (const std::exception&) {
      }
      lock.lock();
      if (stop && !self_stopped_ && !stop_seen_) {
        // Read once: the stopping rank may be the store's server, gone right after.
        stop_seen_ = Clock::now();
        stop_reason_ = *stop;
        lock.unlock();
        Acknowledge();
        lock.lock();
      }
      // The rank goes on to where it would block (a collective, or its next batch) before it
      // stops, so that its trace shows where the job's hang would have left it; at most 3 s.
      if (stop_seen_ && !self_stopped_ && (waiting_ || Clock::now() - *stop_seen_ > std::chrono::seconds(3))) {
        const std::string reason = stop_reason_;
        lock.unlock();
        stop_now_(reason);  // does not return
        lock.lock();
      }
    }
  }

  const TrainOptions& options_;
  const int64_t kill_at_ns_;
  std::function<void(const std::string&)> stop_now_;
  const Clock::time_point start_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::mutex store_mutex_;
  std::mutex mutex_;  // progress_, dirty_, self_stopped_, quit_
  std::condition_variable wake_;
  Progress progress_;
  bool dirty_ = true;
  bool self_stopped_ = false;
  bool waiting_ = false;
  std::optional<Clock::time_point> stop_seen_;
  std::string stop_reason_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace petrsim::real
