// The store the NCCL backend's ranks meet through (real/nccl_backend.h's RendezvousStore), in
// memory, for the tests that run it in one process: a get waits (bounded) for its key.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "real/nccl_backend.h"

namespace petrsim::real {

class MapStore : public RendezvousStore {
 public:
  void Set(const std::string& key, const std::vector<uint8_t>& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
    set_.notify_all();
  }
  std::vector<uint8_t> Get(const std::string& key) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!set_.wait_for(lock, std::chrono::seconds(30), [&] { return values_.count(key) > 0; })) {
      throw std::runtime_error("MapStore: no key " + key);
    }
    return values_[key];
  }

 private:
  std::mutex mutex_;
  std::condition_variable set_;
  std::map<std::string, std::vector<uint8_t>> values_;
};

}  // namespace petrsim::real
