// One rank's process groups and collectives; see c10d_backend.h.
#include "real/c10d_backend.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef PETRSIM_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>

#include "base/error.h"
#ifdef PETRSIM_WITH_NCCL_DIRECT
#include "real/nccl_backend.h"
#endif

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

Collective::Dtype PlanDtype(at::ScalarType dtype) {
  for (const Collective::Dtype d : {Collective::float16, Collective::bfloat16, Collective::float64, Collective::int32,
                                    Collective::int64, Collective::uint8}) {
    if (TorchDtype(d) == dtype) return d;
  }
  return Collective::float32;
}

std::optional<std::string> C10dUnavailable(Comm::Backend backend) {
  if (backend != Comm::nccl) return std::nullopt;
#ifdef PETRSIM_WITH_NCCL
  if (torch::cuda::is_available()) return std::nullopt;
  return std::string(
      "comm.backend is nccl but this machine has no GPU that LibTorch can use; run with --backend gloo "
      "to train on Gloo (CPU)");
#elif defined(PETRSIM_WITH_NCCL_DIRECT)
  return std::string(
      "c10d's NCCL process group is not in this build (PETRSIM_WITH_NCCL=OFF): NCCL runs on "
      "real/nccl_backend instead; run with --backend gloo for c10d's Gloo (CPU)");
#else
  return std::string(
      "comm.backend is nccl but this build has no NCCL (configured with PETRSIM_WITH_NCCL=OFF, and no CUDA "
      "toolkit with NCCL for PETRSIM_WITH_NCCL_DIRECT); run with --backend gloo to train on Gloo (CPU)");
#endif
}

std::optional<std::string> BackendUnavailable(Comm::Backend backend) {
#if defined(PETRSIM_WITH_NCCL_DIRECT) && !defined(PETRSIM_WITH_NCCL)
  if (backend == Comm::nccl) {
    const auto why = NcclUnavailable();
    if (!why) return std::nullopt;
    return "comm.backend is nccl but " + *why + "; run with --backend gloo to train on Gloo (CPU)";
  }
#endif
  return C10dUnavailable(backend);
}

// The tensors of completed collectives, kept for the next collective of the same dtype, size and
// device: a scenario-sized job all-reduces the same tens of millions of elements every iteration,
// and fresh allocations of that size cost more in page faults than zeroing a kept one. Only large
// tensors are kept, the most recently returned first, up to kBytesMax in all.
class TensorPool {
 public:
  static constexpr int64_t kBytesMin = int64_t{1} << 20;
  static constexpr int64_t kBytesMax = int64_t{256} << 20;

  at::Tensor Zeros(int64_t numel, at::ScalarType dtype, at::Device device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->numel() == numel && it->scalar_type() == dtype && it->device() == device) {
          at::Tensor t = std::move(*it);
          free_.erase(it);
          bytes_ -= Bytes(t);
          return t.zero_();
        }
      }
    }
    return torch::zeros({numel}, at::TensorOptions().dtype(dtype).device(device));
  }

  // Takes `t` back when nothing else holds its storage.
  void Give(at::Tensor t) {
    if (!t.defined() || Bytes(t) < kBytesMin || t.storage().use_count() != 1 || !t.is_contiguous() ||
        t.storage_offset() != 0) {
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    bytes_ += Bytes(t);
    free_.push_front(std::move(t));
    while (bytes_ > kBytesMax) {
      bytes_ -= Bytes(free_.back());
      free_.pop_back();
    }
  }

 private:
  static int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

  std::mutex mutex_;
  std::list<at::Tensor> free_;
  int64_t bytes_ = 0;
};

C10dBackend::C10dBackend(c10::intrusive_ptr<c10d::Store> store, uint32_t rank, uint32_t world_size,
                         std::chrono::milliseconds timeout, petrsim::Comm::Backend backend, int32_t local_rank,
                         const std::string& master_addr, const std::vector<std::string>& process_group_names)
    : rank_(rank), world_size_(world_size) {
  if (const auto why = C10dUnavailable(backend)) throw ScenarioError(*why);
  pool_ = std::make_shared<TensorPool>();
  const bool nccl = backend == petrsim::Comm::nccl;
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

c10d::ProcessGroup& C10dBackend::Group(const std::string& name) {
  const auto it = groups_.find(name);
  if (it == groups_.end()) throw std::logic_error("C10dBackend: no process group '" + name + "'");
  return *it->second;
}

comm::CommError CommErrorFromC10d(const std::string& message) {
  const auto has = [&](std::string_view text) { return message.find(text) != std::string::npos; };
  // Gloo: "Timed out waiting 1000ms for recv operation to complete"; NCCL's watchdog: "Watchdog
  // caught collective operation timeout"; the store: "Socket Timeout".
  if (has("Timed out") || has("timed out") || has("Timeout") || has("timeout")) {
    return comm::CommError(comm::CommError::Kind::kTimeout, message);
  }
  // Gloo: "Connection closed by peer [127.0.0.1]:1234", "Connection reset by peer".
  if (has("Connection closed by peer") || has("Connection reset by peer") || has("Broken pipe")) {
    return comm::CommError(comm::CommError::Kind::kPeerGone, message);
  }
  return comm::CommError(comm::CommError::Kind::kBackend, message);
}

namespace {

// A c10d work and the tensors it reduces into; Wait() turns them into this rank's values.
class C10dWork : public comm::Work {
 public:
  ~C10dWork() override {
    // A completed collective's tensor goes back to the pool (c10d's work let go of it first).
    if (!done_ || !pool_) return;
    work_.reset();
    out_ = at::Tensor();
    for (auto& t : tensors_) pool_->Give(std::move(t));
  }

  bool IsCompleted() override { return done_ || work_->isCompleted(); }

  // c10d's wait(timeout) raises "Operation timed out!" and leaves the work pending: that is a
  // `false` here; any other failure is the work's own.
  bool WaitFor(int64_t timeout_ms) override {
    if (done_) return true;
    if (!work_->isCompleted()) {
      try {
        work_->wait(std::chrono::milliseconds(std::max<int64_t>(1, timeout_ms)));
      } catch (const std::exception&) {
        if (!work_->isCompleted()) return false;
      }
    }
    Wait();
    return true;
  }

  // c10d's get_future().then(): the callback runs on the thread that marks the future (Gloo's
  // worker; NCCL's watchdog or the caller once the stream's work is done), or at once.
  void OnCompletion(std::function<void()> done) override {
    if (IsCompleted()) {
      done();
      return;
    }
    work_->getFuture()->addCallback([done = std::move(done)](c10::ivalue::Future&) { done(); });
  }

  void Wait() override {
    if (done_) return;
    try {
      work_->wait();
    } catch (const std::exception& error) {
      throw CommErrorFromC10d(error.what());
    }
    if (divide_) {
      for (auto& t : tensors_) t.div_(static_cast<double>(world_size_));
    }
    switch (collective_.op()) {
      case Collective::allgather:
        out_ = torch::cat(gathered_[0]);
        break;
      case Collective::reduce_scatter:
        out_ = tensors_[0].chunk(world_size_)[rank_];
        break;
      case Collective::alltoall:
        out_ = output_;
        break;
      case Collective::barrier:
        break;
      default:
        out_ = tensors_[0];
    }
    done_ = true;
  }

  // The output stays a tensor of the collective's dtype until it is asked for as doubles: whole
  // (once), or only its head.
  const std::vector<double>& Result() const override {
    if (!converted_) {
      result_ = Doubles(out_, out_.defined() ? out_.numel() : 0);
      converted_ = true;
    }
    return result_;
  }

  std::vector<double> ResultHead(uint64_t count) const override {
    if (converted_ || !out_.defined()) return comm::Work::ResultHead(count);
    return Doubles(out_, static_cast<int64_t>(std::min<uint64_t>(count, static_cast<uint64_t>(out_.numel()))));
  }

 private:
  friend class petrsim::real::C10dBackend;
  friend void StartCollective(C10dWork& pending, c10d::ProcessGroup& group, const at::Tensor& tensor,
                              const std::shared_ptr<TensorPool>& pool);
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> tensors_;
  std::vector<std::vector<at::Tensor>> gathered_;
  at::Tensor output_;  // alltoall
  Collective collective_;
  uint32_t rank_ = 0, world_size_ = 1;
  bool divide_ = false;  // avg on a backend without AVG
  bool done_ = false;
  std::shared_ptr<TensorPool> pool_;  // where the tensor goes back; null: not pooled
  at::Tensor out_;
  mutable bool converted_ = false;
  mutable std::vector<double> result_;

  // The first `count` values of `t` as doubles.
  static std::vector<double> Doubles(const at::Tensor& t, int64_t count) {
    if (count == 0) return {};
    const at::Tensor values = t.narrow(0, 0, count).to(at::kCPU, at::kDouble).contiguous();
    return std::vector<double>(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  }
};

// Starts the collective on `group` with this rank's `tensor`: the c10d work, and the tensors it
// reduces or gathers into (pooled ones go back to `pool`).
void StartCollective(C10dWork& pending, c10d::ProcessGroup& group, const at::Tensor& tensor,
                     const std::shared_ptr<TensorPool>& pool) {
  const auto op = TorchReduceOp(pending.collective_.reduce_op());
  switch (pending.collective_.op()) {
    case Collective::allreduce: {
      pending.pool_ = pool;
      pending.tensors_ = {tensor};
      c10d::AllreduceOptions options;
      options.reduceOp = op;
      pending.work_ = group.allreduce(pending.tensors_, options);
      break;
    }
    case Collective::broadcast: {
      pending.pool_ = pool;
      pending.tensors_ = {tensor};
      pending.divide_ = false;
      pending.work_ = group.broadcast(pending.tensors_);
      break;
    }
    case Collective::reduce: {
      pending.pool_ = pool;
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
      for (uint32_t r = 0; r < pending.world_size_; ++r) pending.gathered_[0].push_back(torch::empty_like(tensor));
      pending.divide_ = false;
      pending.work_ = group.allgather(pending.gathered_, pending.tensors_);
      break;
    }
    case Collective::reduce_scatter: {
      // Every rank's input is world_size chunks of numel; Gloo has no reduce_scatter, so all of
      // them are all-reduced and this rank keeps its chunk (the same values).
      pending.tensors_ = {tensor.repeat({static_cast<int64_t>(pending.world_size_)})};
      c10d::AllreduceOptions options;
      options.reduceOp = op;
      pending.work_ = group.allreduce(pending.tensors_, options);
      break;
    }
    case Collective::alltoall: {
      pending.tensors_ = {tensor.repeat({static_cast<int64_t>(pending.world_size_)})};
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
}

}  // namespace

std::unique_ptr<comm::Work> C10dBackend::Issue(const Collective& collective, std::span<const double> input) {
  auto pending = std::make_unique<C10dWork>();
  pending->collective_ = collective;
  pending->rank_ = rank_;
  pending->world_size_ = world_size_;
  c10d::ProcessGroup& group = Group(collective.process_group());
  // The collective's tensor: the rank's contributed values (numel of them, zeros past the input,
  // already in its dtype) on the comm device as that dtype. Only the input's values are converted
  // and copied: the padding past them is made in the dtype at once (a scenario-sized gradient
  // bucket is tens of millions of elements, most of them padding).
  const int64_t numel = static_cast<int64_t>(collective.numel());
  at::Tensor tensor = pool_->Zeros(numel, TorchDtype(collective.dtype()), device_);
  const int64_t given = std::min<int64_t>(numel, static_cast<int64_t>(input.size()));
  if (given > 0) {
    std::vector<double> head(static_cast<size_t>(given));
    for (int64_t i = 0; i < given; ++i) head[i] = comm::ToDtype(collective.dtype(), input[i]);
    tensor.narrow(0, 0, given).copy_(torch::from_blob(head.data(), {given}, at::kDouble));
  }
  pending->divide_ = collective.reduce_op() == Collective::avg;
  try {
    StartCollective(*pending, group, tensor, pool_);
  } catch (const comm::CommError&) {
    throw;
  } catch (const std::exception& error) {
    throw CommErrorFromC10d(error.what());
  }
  return pending;
}

}  // namespace petrsim::real
