// The real backend's side of the Backend seam (plan/backend.h, docs/design.md, "Seams"): one rank's c10d
// process groups and the plan's collectives as c10d calls: Gloo on CPU, or NCCL where LibTorch
// has CUDA and the build has PETRSIM_WITH_NCCL (the one place that differs; tensors then live
// on the rank's GPU for the call).
//
// Ops map to c10d as PyTorch's do, with Gloo's gaps filled the way the result is the same:
// Gloo has no AVG reduction (sum, then divide by the world size) and no reduce_scatter (an
// all_reduce of every rank's input, then this rank's chunk). The trace still names the plan's op.
#pragma once

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plan/backend.h"
#include "proto/scenario.pb.h"

namespace petrsim::real {

at::ScalarType TorchDtype(Collective::Dtype dtype);
// The other way: a tensor's dtype as the plan names it (float32 for one the plan has no name for).
Collective::Dtype PlanDtype(at::ScalarType dtype);

// Why `backend` cannot run in this build on this machine, as an error for the user; nullopt when
// it can. NCCL runs on c10d's ProcessGroupNCCL in a PETRSIM_WITH_NCCL build, else on the NCCL
// backend (real/nccl_backend.h) where the build found the CUDA toolkit, and needs a GPU either
// way. Asking for a backend that cannot run is an error, never a silent fallback (the user says
// --backend gloo).
std::optional<std::string> BackendUnavailable(Comm::Backend backend);
// The same for C10dBackend alone: NCCL only with PETRSIM_WITH_NCCL and a GPU LibTorch can use.
std::optional<std::string> C10dUnavailable(Comm::Backend backend);

class TensorPool;

// One rank's c10d process groups behind the Backend seam.
class C10dBackend : public comm::Backend {
 public:
  // Creates the world group ("default_pg") and one group per other name in
  // `process_group_names`, all over `store` (a group's keys under its own prefix). NCCL needs a
  // build with PETRSIM_WITH_NCCL and a GPU; asking for it otherwise is a ScenarioError (see
  // C10dUnavailable). Gloo's interface: GLOO_SOCKET_IFNAME when set, loopback when the
  // master is on this host's loopback, else the one the hostname resolves to (as PyTorch
  // chooses).
  C10dBackend(c10::intrusive_ptr<c10d::Store> store, uint32_t rank, uint32_t world_size,
              std::chrono::milliseconds timeout, petrsim::Comm::Backend backend, int32_t local_rank,
              const std::string& master_addr, const std::vector<std::string>& process_group_names);

  std::string backend_name() const override { return backend_name_; }
  uint32_t rank() const override { return rank_; }
  uint32_t world_size() const override { return world_size_; }
  // A c10d call on the collective's process group with a tensor of its dtype on the comm device
  // made from `input`. Errors the call or its wait raise become comm::CommError, sorted by their
  // message (Gloo's and NCCL's timeouts, a closed connection).
  using comm::Backend::Issue;  // the overload with options ignores them: Wait() blocks
  std::unique_ptr<comm::Work> Issue(const Collective& collective, std::span<const double> input) override;

 private:
  c10d::ProcessGroup& Group(const std::string& name);

  uint32_t rank_, world_size_;
  std::string backend_name_ = "gloo";
  at::Device device_ = at::kCPU;
  std::map<std::string, c10::intrusive_ptr<c10d::ProcessGroup>> groups_;
  // Large tensors of completed collectives, reused (zeroed) by the next of the same size.
  std::shared_ptr<TensorPool> pool_;
};

// The CommError a c10d exception's message stands for.
comm::CommError CommErrorFromC10d(const std::string& message);

}  // namespace petrsim::real
