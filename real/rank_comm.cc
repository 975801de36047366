// One rank's process groups and collectives; see rank_comm.h.
#include "real/rank_comm.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef PETRSIM_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "model/error.h"

namespace petrsim::real {
namespace {

c10d::ReduceOp TorchReduceOp(Collective::ReduceOp op) {
  switch (op) {
    case Collective::sum:
    case Collective::avg:  // sum, then divided (Gloo has no AVG)
      return c10d::ReduceOp::SUM;
    case Collective::max:
      return c10d::ReduceOp::MAX;
    case Collective::min:
      return c10d::ReduceOp::MIN;
    case Collective::product:
      return c10d::ReduceOp::PRODUCT;
  }
  return c10d::ReduceOp::SUM;
}

}  // namespace

at::ScalarType TorchDtype(Collective::Dtype dtype) {
  switch (dtype) {
    case Collective::float32:
      return at::kFloat;
    case Collective::float16:
      return at::kHalf;
    case Collective::bfloat16:
      return at::kBFloat16;
    case Collective::float64:
      return at::kDouble;
    case Collective::int32:
      return at::kInt;
    case Collective::int64:
      return at::kLong;
    case Collective::uint8:
      return at::kByte;
  }
  return at::kFloat;
}

std::optional<std::string> BackendUnavailable(Comm::Backend backend) {
  if (backend != Comm::nccl) return std::nullopt;
#ifdef PETRSIM_WITH_NCCL
  if (torch::cuda::is_available()) return std::nullopt;
  return std::string(
      "comm.backend is nccl but this machine has no GPU that LibTorch can use; run with --backend gloo "
      "to train on Gloo (CPU)");
#else
  return std::string(
      "comm.backend is nccl but this build has no NCCL (configured with PETRSIM_WITH_NCCL=OFF); run "
      "with --backend gloo to train on Gloo (CPU)");
#endif
}

RankComm::RankComm(c10::intrusive_ptr<c10d::Store> store, uint32_t rank, uint32_t world_size,
                   std::chrono::milliseconds timeout, Comm::Backend backend, int32_t local_rank,
                   const std::string& master_addr, const std::vector<std::string>& process_group_names)
    : rank_(rank), world_size_(world_size) {
  if (const auto why = BackendUnavailable(backend)) throw ScenarioError(*why);
  const bool nccl = backend == Comm::nccl;
  const auto make = [&](const c10::intrusive_ptr<c10d::Store>& group_store) -> c10::intrusive_ptr<c10d::ProcessGroup> {
#ifdef PETRSIM_WITH_NCCL
    if (nccl) {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      return c10::make_intrusive<c10d::ProcessGroupNCCL>(group_store, static_cast<int>(rank),
                                                         static_cast<int>(world_size), options);
    }
#endif
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
    if (interface != nullptr && *interface != '\0') {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
    } else if (master_addr == "127.0.0.1" || master_addr == "localhost") {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    return c10::make_intrusive<c10d::ProcessGroupGloo>(group_store, static_cast<int>(rank),
                                                       static_cast<int>(world_size), options);
  };
  if (nccl) {
    backend_name_ = "nccl";
    device_ = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  }
  groups_["default_pg"] = make(store);
  for (const std::string& name : process_group_names) {
    if (groups_.count(name) == 0) groups_[name] = make(c10::make_intrusive<c10d::PrefixStore>(name, store));
  }
}

c10d::ProcessGroup& RankComm::Group(const std::string& name) {
  const auto it = groups_.find(name);
  if (it == groups_.end()) throw std::logic_error("RankComm: no process group '" + name + "'");
  return *it->second;
}

RankComm::Pending RankComm::Launch(const Collective& collective, const at::Tensor& input) {
  Pending pending;
  pending.collective_ = collective;
  pending.rank_ = rank_;
  pending.world_size_ = world_size_;
  pending.device_ = device_;
  c10d::ProcessGroup& group = Group(collective.process_group());
  // A copy: the caller's tensor is never reduced in place (its result is result()).
  at::Tensor tensor =
      input.to(device_, TorchDtype(collective.dtype()), /*non_blocking=*/false, /*copy=*/true).contiguous();
  const auto op = TorchReduceOp(collective.reduce_op());
  pending.divide_ = collective.reduce_op() == Collective::avg;
  switch (collective.op()) {
    case Collective::allreduce: {
      pending.tensors_ = {tensor};
      c10d::AllreduceOptions options;
      options.reduceOp = op;
      pending.work_ = group.allreduce(pending.tensors_, options);
      break;
    }
    case Collective::broadcast: {
      pending.tensors_ = {tensor};
      pending.divide_ = false;
      pending.work_ = group.broadcast(pending.tensors_);
      break;
    }
    case Collective::reduce: {
      pending.tensors_ = {tensor};
      c10d::ReduceOptions options;
      options.reduceOp = op;
      options.rootRank = 0;
      pending.work_ = group.reduce(pending.tensors_, options);
      break;
    }
    case Collective::allgather: {
      pending.tensors_ = {tensor};
      pending.gathered_.resize(1);
      for (uint32_t r = 0; r < world_size_; ++r) pending.gathered_[0].push_back(torch::empty_like(tensor));
      pending.divide_ = false;
      pending.work_ = group.allgather(pending.gathered_, pending.tensors_);
      break;
    }
    case Collective::reduce_scatter: {
      // Every rank's input is world_size chunks of numel; Gloo has no reduce_scatter, so all of
      // them are all-reduced and this rank keeps its chunk (the same values).
      pending.tensors_ = {tensor.repeat({static_cast<int64_t>(world_size_)})};
      c10d::AllreduceOptions options;
      options.reduceOp = op;
      pending.work_ = group.allreduce(pending.tensors_, options);
      break;
    }
    case Collective::alltoall: {
      pending.tensors_ = {tensor.repeat({static_cast<int64_t>(world_size_)})};
      pending.output_ = torch::empty_like(pending.tensors_[0]);
      std::vector<int64_t> splits;
      pending.divide_ = false;
      pending.work_ = group.alltoall_base(pending.output_, pending.tensors_[0], splits, splits);
      break;
    }
    case Collective::barrier:
      pending.divide_ = false;
      pending.work_ = group.barrier();
      break;
  }
  return pending;
}

void RankComm::Pending::Wait() {
  work_->wait();
  if (divide_) {
    for (auto& t : tensors_) t.div_(static_cast<double>(world_size_));
  }
}

at::Tensor RankComm::Pending::result() const {
  switch (collective_.op()) {
    case Collective::allgather:
      return torch::cat(gathered_[0]).to(at::kCPU);
    case Collective::reduce_scatter:
      return tensors_[0].chunk(world_size_)[rank_].to(at::kCPU);
    case Collective::alltoall:
      return output_.to(at::kCPU);
    case Collective::barrier:
      return at::Tensor();
    default:
      return tensors_[0].to(at::kCPU);
  }
}

}  // namespace petrsim::real
