// The real backend's side of the Comm seam (DESIGN "Seams"): one rank's c10d process groups and
// the plan's collectives as c10d calls. The simulator issues the same ExpandedPlan steps to its
// model of the rendezvous; here each step is a real call on a real process group: Gloo on CPU,
// or NCCL where LibTorch has CUDA and the build has PETRSIM_WITH_NCCL (the one place that
// differs; tensors then live on the rank's GPU for the call).
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
#include <optional>
#include <string>
#include <vector>

#include "model/scenario.pb.h"

namespace petrsim::real {

at::ScalarType TorchDtype(Collective::Dtype dtype);

// Why `backend` cannot run in this build on this machine (NCCL without PETRSIM_WITH_NCCL, or
// without a GPU), as an error for the user; nullopt when it can. Asking for a backend that cannot
// run is an error, never a silent fallback (the user says --backend gloo).
std::optional<std::string> BackendUnavailable(Comm::Backend backend);

class RankComm {
 public:
  // Creates the world group ("default_pg") and one group per other name in `process_group_names`, all
  // over `store` (a group's keys under its own prefix). `backend` is the scenario's; NCCL needs
  // a build with PETRSIM_WITH_NCCL and a GPU, Gloo is used otherwise (and said once on stderr).
  // Gloo's interface: GLOO_SOCKET_IFNAME when set, loopback when the master is on this host's
  // loopback, else the one the hostname resolves to (as PyTorch chooses).
  RankComm(c10::intrusive_ptr<c10d::Store> store, uint32_t rank, uint32_t world_size, std::chrono::milliseconds timeout,
           Comm::Backend backend, int32_t local_rank, const std::string& master_addr,
           const std::vector<std::string>& process_group_names);

  // A launched collective: wait() completes it (throws on a c10d error or the timeout), and
  // result() is this rank's output: the reduced/broadcast tensor, the gathered tensors
  // concatenated, or this rank's chunk (reduce_scatter, alltoall).
  class Pending {
   public:
    void Wait();
    at::Tensor result() const;

   private:
    friend class RankComm;
    c10::intrusive_ptr<c10d::Work> work_;
    std::vector<at::Tensor> tensors_;
    std::vector<std::vector<at::Tensor>> gathered_;
    at::Tensor output_;  // alltoall
    Collective collective_;
    uint32_t rank_ = 0, world_size_ = 1;
    bool divide_ = false;  // avg on a backend without AVG
    at::Device device_ = at::kCPU;
  };

  // Launches `collective` with a copy of `input` (numel elements, converted to its dtype, on the
  // comm device); `input` itself is left as it is.
  Pending Launch(const Collective& collective, const at::Tensor& input);

  const std::string& backend_name() const { return backend_name_; }

 private:
  c10d::ProcessGroup& Group(const std::string& name);

  uint32_t rank_, world_size_;
  std::string backend_name_ = "gloo";
  at::Device device_ = at::kCPU;
  std::map<std::string, c10::intrusive_ptr<c10d::ProcessGroup>> groups_;
};

}  // namespace petrsim::real
