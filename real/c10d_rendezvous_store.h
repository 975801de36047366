// The job's c10d store (petrsim_train's TCPStore) as the NCCL backend's RendezvousStore
// (real/nccl_backend.h), so that real/nccl_backend stays free of LibTorch: a get waits for the key
// as c10d's does, up to the store's timeout.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "real/nccl_backend.h"

namespace petrsim::real {

class C10dRendezvousStore : public RendezvousStore {
 public:
  explicit C10dRendezvousStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void Set(const std::string& key, const std::vector<uint8_t>& value) override { store_->set(key, value); }
  std::vector<uint8_t> Get(const std::string& key) override { return store_->get(key); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace petrsim::real
