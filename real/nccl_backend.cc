// The Backend seam on NCCL directly; see nccl_backend.h.
#include "real/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"
#include "formats/torch_logs/watchdog_lines.h"
#include "real/staged_values.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL backend needs NCCL 2.14 or later (nonblocking communicators)"
#endif

namespace petrsim::real {

// The device buffers of a collective on `world` ranks, in elements of its dtype: what each rank
// sends, what it receives (0: in place), and how many copies of the input the send buffer holds
// (the plan gives reduce_scatter and alltoall one chunk's numel; every rank sends world copies).
struct NcclLayout {
  uint64_t send = 0;
  uint64_t receive = 0;
  uint64_t copies = 1;
  Collective::Dtype dtype = Collective::float32;
};

namespace {

using Clock = std::chrono::steady_clock;
using comm::CommError;

std::string CudaText(cudaError_t error) {
  return fmt::format("{} ({})", cudaGetErrorName(error), cudaGetErrorString(error));
}

void CheckCuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw CommError(CommError::Kind::kBackend, fmt::format("NCCL backend: {} failed: {}", what, CudaText(error)));
  }
}

CommError NcclError(ncclResult_t result, const std::string& what) {
  const auto kind = result == ncclRemoteError ? CommError::Kind::kPeerGone : CommError::Kind::kBackend;
  return CommError(kind, fmt::format("NCCL backend: {}: {}", what, ncclGetErrorString(result)));
}

ncclDataType_t NcclDtype(Collective::Dtype dtype) {
  switch (dtype) {
    case Collective::float32:
      return ncclFloat32;
    case Collective::float16:
      return ncclFloat16;
    case Collective::bfloat16:
      return ncclBfloat16;
    case Collective::float64:
      return ncclFloat64;
    case Collective::int32:
      return ncclInt32;
    case Collective::int64:
      return ncclInt64;
    case Collective::uint8:
      return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t NcclReduceOp(Collective::ReduceOp op) {
  switch (op) {
    case Collective::sum:
    case Collective::avg:  // sum, then divided in the dtype as CollectiveOutput does (ContributedValues)
      return ncclSum;
    case Collective::max:
      return ncclMax;
    case Collective::min:
      return ncclMin;
    case Collective::product:
      return ncclProd;
  }
  return ncclSum;
}

NcclLayout LayoutOf(const Collective& collective, uint32_t world) {
  const uint64_t numel = collective.numel();
  NcclLayout layout;
  layout.dtype = collective.dtype();
  switch (collective.op()) {
    case Collective::allgather:
      layout.send = numel;
      layout.receive = numel * world;
      break;
    case Collective::reduce_scatter:
      layout.send = numel * world;
      layout.receive = numel;
      layout.copies = world;
      break;
    case Collective::alltoall:
      layout.send = numel * world;
      layout.receive = numel * world;
      layout.copies = world;
      break;
    case Collective::barrier:  // c10d's barrier: an all-reduce of one element
      layout.send = 1;
      layout.dtype = Collective::float32;
      break;
    default:
      layout.send = numel;
  }
  return layout;
}

}  // namespace

// One process group: its communicator and stream, and how far its sequence numbers went.
struct NcclGroup {
  std::string name;
  uint32_t index = 0;  // creation order: the world group 0
  cudaStream_t stream = nullptr;
  // Every NCCL call on `comm` holds it, so that the watchdog's abort never runs beside one.
  std::mutex mutex;
  ncclComm_t comm = nullptr;
  bool aborted = false;  // guarded by mutex; once set, comm is freed and never used again
  std::string aborted_because;
  std::atomic<uint64_t> issued_seq{0};
  std::atomic<uint64_t> completed_seq{0};
};

// One collective from issue to its end: shared by its Work (the rank's thread) and the watchdog.
struct NcclWorkState {
  enum class Phase { kEnqueueing, kRunning, kDone, kFailed };

  Collective collective;
  NcclLayout layout;
  NcclGroup* group = nullptr;
  uint64_t seq = 0;
  Clock::time_point start, deadline;
  void* send = nullptr;  // device buffers; receive == send when in place
  void* receive = nullptr;
  cudaEvent_t staged = nullptr;  // the staging stream's copies are done
  cudaEvent_t end = nullptr;     // the group stream passed the collective (recorded once enqueued)
  std::vector<std::byte> head;   // the staged input's bytes (kept until the copies are done)
  std::vector<double> own;       // the contributed head, for reduce's non-root ranks

  std::mutex mutex;
  std::condition_variable changed;
  Phase phase = Phase::kEnqueueing;
  std::optional<CommError> error;
  std::function<void()> callback;

  bool Over() const { return phase == Phase::kDone || phase == Phase::kFailed; }
};

class NcclBackend::Impl {
 public:
  explicit Impl(NcclOptions options) : options_(std::move(options)) {}

  void Connect(RendezvousStore& store);
  void StartWatchdog() {
    watchdog_ = std::thread([this] { Watch(); });
  }
  void Shutdown();

  std::shared_ptr<NcclWorkState> Start(const Collective& collective, std::span<const double> input);
  // Settles `state` (done, or failed with `error`) once; runs its callback outside the lock.
  void Settle(NcclWorkState& state, std::optional<CommError> error);
  // Checks the end event of a running work; settles it when the stream passed it (or CUDA failed).
  void Poll(NcclWorkState& state);
  std::vector<double> ReadBack(const NcclWorkState& state, uint64_t count) const;
  void Release(NcclWorkState& state);

  const NcclOptions& options() const { return options_; }
  void UseDevice() const { CheckCuda(cudaSetDevice(options_.device), "cudaSetDevice"); }
  std::atomic<int64_t> delay_next_ms{0};

 private:
  void ConnectGroup(RendezvousStore& store, NcclGroup& group);
  NcclGroup& Group(const std::string& name);
  void Stage(NcclWorkState& state, std::span<const double> input);
  void Enqueue(NcclWorkState& state);
  ncclResult_t CallNccl(NcclWorkState& state);
  void Watch();
  void TimeOut(NcclWorkState& state);
  void CheckAsyncErrors();
  void FailGroup(NcclGroup& group, const CommError& error, const std::shared_ptr<NcclWorkState>& first);
  void Abort(NcclGroup& group, const std::string& why);
  std::vector<std::string> WatchdogLines(const NcclWorkState& state) const;

  NcclOptions options_;
  std::vector<std::unique_ptr<NcclGroup>> groups_;
  cudaStream_t staging_ = nullptr;  // copies to and from the device, never behind a collective
  std::thread watchdog_;
  std::mutex pending_mutex_;
  std::condition_variable pending_changed_;
  std::vector<std::shared_ptr<NcclWorkState>> pending_;  // guarded by pending_mutex_
  bool stopping_ = false;                                // guarded by pending_mutex_
};

// ---------------------------------------------------------------------------------------------
// Setup

std::vector<uint8_t> ShareUniqueId(RendezvousStore& store, const std::string& key, uint32_t rank, size_t id_bytes,
                                   const std::function<std::vector<uint8_t>()>& make_id) {
  if (rank == 0) {
    std::vector<uint8_t> id = make_id();
    PETRSIM_ASSERT(id.size() == id_bytes);
    store.Set(key, id);
    return id;
  }
  std::vector<uint8_t> id = store.Get(key);
  if (id.size() != id_bytes) {
    throw CommError(CommError::Kind::kBackend,
                    fmt::format("the NCCL unique id under store key '{}' has {} bytes where NCCL's has {}: another "
                                "program wrote that key, or rank 0 runs a different build",
                                key, id.size(), id_bytes));
  }
  return id;
}

std::string UniqueIdKey(const std::string& process_group) { return "petrsim_nccl/" + process_group + "/unique_id"; }

std::optional<std::string> NcclUnavailable() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // not sticky; cleared so that nothing later reads it
    return "this machine has no GPU the NCCL backend can use (cudaGetDeviceCount: " + CudaText(error) + ")";
  }
  if (count == 0) return std::string("this machine has no GPU the NCCL backend can use (cudaGetDeviceCount: 0)");
  return std::nullopt;
}

std::string NcclVersion() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "unknown";
  // From 2.9 the code is major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

void NcclBackend::Impl::Connect(RendezvousStore& store) {
  int count = 0;
  CheckCuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (options_.device < 0 || options_.device >= count) {
    throw ScenarioError(fmt::format("NCCL backend: rank {} would use GPU {} (its local rank) but this machine has {}",
                                    options_.rank, options_.device, count));
  }
  UseDevice();
  // Freed staging buffers stay in the device's pool for the next collective of the iteration
  // instead of going back to the driver at each synchronisation.
  cudaMemPool_t pool = nullptr;
  CheckCuda(cudaDeviceGetDefaultMemPool(&pool, options_.device), "cudaDeviceGetDefaultMemPool");
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  CheckCuda(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  CheckCuda(cudaStreamCreateWithFlags(&staging_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<std::string> names = options_.process_group_names;
  if (std::find(names.begin(), names.end(), "default_pg") == names.end()) names.insert(names.begin(), "default_pg");
  for (const std::string& name : names) {
    if (std::any_of(groups_.begin(), groups_.end(), [&](const auto& g) { return g->name == name; })) continue;
    auto group = std::make_unique<NcclGroup>();
    group->name = name;
    group->index = static_cast<uint32_t>(groups_.size());
    CheckCuda(cudaStreamCreateWithFlags(&group->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    groups_.push_back(std::move(group));
    ConnectGroup(store, *groups_.back());
  }
}

// The group's communicator, nonblocking: its init is polled until every rank joined, or aborted
// at the timeout.
void NcclBackend::Impl::ConnectGroup(RendezvousStore& store, NcclGroup& group) {
  const std::vector<uint8_t> bytes =
      ShareUniqueId(store, UniqueIdKey(group.name), options_.rank, sizeof(ncclUniqueId), [] {
        ncclUniqueId id;
        const ncclResult_t result = ncclGetUniqueId(&id);
        if (result != ncclSuccess) throw NcclError(result, "ncclGetUniqueId");
        std::vector<uint8_t> out(sizeof(id));
        std::memcpy(out.data(), &id, sizeof(id));
        return out;
      });
  ncclUniqueId id;
  std::memcpy(&id, bytes.data(), sizeof(id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t result = ncclCommInitRankConfig(&group.comm, static_cast<int>(options_.world_size), id,
                                               static_cast<int>(options_.rank), &config);
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  while (result == ncclInProgress && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (ncclCommGetAsyncError(group.comm, &result) != ncclSuccess) break;
  }
  if (result == ncclSuccess) return;
  if (group.comm != nullptr) ncclCommAbort(group.comm);
  group.comm = nullptr;
  group.aborted = true;
  if (result == ncclInProgress) {
    throw CommError(CommError::Kind::kTimeout,
                    fmt::format("NCCL backend: rank {}: the communicator of {} timed out after {} ms waiting for all "
                                "{} ranks to join (aborted)",
                                options_.rank, group.name, options_.timeout.count(), options_.world_size));
  }
  throw NcclError(result, fmt::format("rank {}: making the communicator of {}", options_.rank, group.name));
}

void NcclBackend::Impl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    stopping_ = true;
  }
  pending_changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  // Abort rather than finalize: finalizing waits for what is in flight, which a hung peer never
  // ends (ProcessGroupNCCL's shutdown aborts too). Buffers of failed works stay allocated: their
  // kernels may still hold them, and the process is about to end.
  for (auto& group : groups_) Abort(*group, "the backend is shut down");
  for (auto& group : groups_) {
    if (group->stream != nullptr) cudaStreamDestroy(group->stream);  // released once its work is done
  }
  if (staging_ != nullptr) cudaStreamDestroy(staging_);
}

NcclGroup& NcclBackend::Impl::Group(const std::string& name) {
  for (auto& group : groups_) {
    if (group->name == name) return *group;
  }
  throw std::logic_error("NcclBackend: no process group '" + name + "'");
}

// ---------------------------------------------------------------------------------------------
// Issue

std::shared_ptr<NcclWorkState> NcclBackend::Impl::Start(const Collective& collective, std::span<const double> input) {
  UseDevice();
  NcclGroup& group = Group(collective.process_group());
  {
    std::lock_guard<std::mutex> lock(group.mutex);
    if (group.aborted) {
      throw CommError(CommError::Kind::kBackend,
                      fmt::format("NCCL backend: the communicator of {} was aborted ({}); {} cannot run on it",
                                  group.name, group.aborted_because, comm::DescribeCall(collective)));
    }
  }
  auto state = std::make_shared<NcclWorkState>();
  state->collective = collective;
  state->layout = LayoutOf(collective, options_.world_size);
  state->group = &group;
  state->seq = ++group.issued_seq;
  state->start = Clock::now();
  state->deadline = state->start + options_.timeout;
  Stage(*state, input);
  {
    // From here the watchdog times it out, the enqueue included.
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_.push_back(state);
  }
  pending_changed_.notify_all();
  Enqueue(*state);
  return state;
}

// The input's head in the dtype, copied into each of its copies in a zeroed device buffer on the
// staging stream; the group's stream waits for the copies.
void NcclBackend::Impl::Stage(NcclWorkState& state, std::span<const double> input) {
  const NcclLayout& layout = state.layout;
  const size_t element = DtypeBytes(layout.dtype);
  const uint64_t numel = state.collective.op() == Collective::barrier ? 0 : state.collective.numel();
  const uint64_t given = std::min<uint64_t>(numel, input.size());
  state.head.resize(given * element);
  EncodeValues(layout.dtype, input.first(given), state.head);
  if (state.collective.op() == Collective::reduce && options_.rank != 0) {
    state.own.assign(input.begin(), input.begin() + static_cast<ptrdiff_t>(given));
    for (double& v : state.own) v = comm::ToDtype(layout.dtype, v);
  }
  const size_t send_bytes = std::max<uint64_t>(layout.send, 1) * element;  // a numel 0 call still gets a buffer
  CheckCuda(cudaMallocAsync(&state.send, send_bytes, staging_), "cudaMallocAsync");
  CheckCuda(cudaMemsetAsync(state.send, 0, send_bytes, staging_), "cudaMemsetAsync");
  state.receive = state.send;
  if (layout.receive > 0) {
    CheckCuda(cudaMallocAsync(&state.receive, layout.receive * element, staging_), "cudaMallocAsync");
  }
  for (uint64_t copy = 0; copy < layout.copies && !state.head.empty(); ++copy) {
    std::byte* chunk = static_cast<std::byte*>(state.send) + copy * numel * element;
    CheckCuda(cudaMemcpyAsync(chunk, state.head.data(), state.head.size(), cudaMemcpyHostToDevice, staging_),
              "cudaMemcpyAsync to the GPU");
  }
  CheckCuda(cudaEventCreateWithFlags(&state.staged, cudaEventDisableTiming), "cudaEventCreate");
  CheckCuda(cudaEventCreateWithFlags(&state.end, cudaEventDisableTiming), "cudaEventCreate");
  CheckCuda(cudaEventRecord(state.staged, staging_), "cudaEventRecord");
  CheckCuda(cudaStreamWaitEvent(state.group->stream, state.staged, 0), "cudaStreamWaitEvent");
  const int64_t delay_ms = delay_next_ms.exchange(0);
  if (delay_ms > 0) {
    CheckCuda(
        cudaLaunchHostFunc(
            state.group->stream,
            [](void* ms) { std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms))); },
            reinterpret_cast<void*>(static_cast<intptr_t>(delay_ms))),
        "cudaLaunchHostFunc");
  }
}

// The NCCL call of the collective on its group (the group's mutex held, the communicator live).
ncclResult_t NcclBackend::Impl::CallNccl(NcclWorkState& state) {
  const Collective& c = state.collective;
  NcclGroup& group = *state.group;
  const ncclDataType_t dtype = NcclDtype(state.layout.dtype);
  const ncclRedOp_t op = NcclReduceOp(c.reduce_op());
  const size_t numel = c.numel();
  switch (c.op()) {
    case Collective::allreduce:
      return ncclAllReduce(state.send, state.send, numel, dtype, op, group.comm, group.stream);
    case Collective::broadcast:
      return ncclBroadcast(state.send, state.send, numel, dtype, 0, group.comm, group.stream);
    case Collective::reduce:
      return ncclReduce(state.send, state.send, numel, dtype, op, 0, group.comm, group.stream);
    case Collective::allgather:
      return ncclAllGather(state.send, state.receive, numel, dtype, group.comm, group.stream);
    case Collective::reduce_scatter:
      return ncclReduceScatter(state.send, state.receive, numel, dtype, op, group.comm, group.stream);
    case Collective::alltoall: {
      // Send and receive with every rank as one group (ncclAlltoAll is only in NCCL 2.28).
      const size_t chunk = numel * DtypeBytes(state.layout.dtype);
      ncclGroupStart();
      for (uint32_t peer = 0; peer < options_.world_size; ++peer) {
        ncclSend(static_cast<std::byte*>(state.send) + peer * chunk, numel, dtype, static_cast<int>(peer), group.comm,
                 group.stream);
        ncclRecv(static_cast<std::byte*>(state.receive) + peer * chunk, numel, dtype, static_cast<int>(peer),
                 group.comm, group.stream);
      }
      return ncclGroupEnd();
    }
    case Collective::barrier:
      return ncclAllReduce(state.send, state.send, 1, ncclFloat32, ncclSum, group.comm, group.stream);
  }
  return ncclInvalidArgument;
}

// Enqueues the collective; a nonblocking communicator may answer ncclInProgress (connecting to a
// peer, say), polled here until it is enqueued, fails, or the watchdog aborts the group.
void NcclBackend::Impl::Enqueue(NcclWorkState& state) {
  NcclGroup& group = *state.group;
  ncclResult_t result = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(group.mutex);
    if (group.aborted) return;  // the watchdog failed the work already
    result = CallNccl(state);
  }
  while (result == ncclInProgress) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    std::lock_guard<std::mutex> lock(group.mutex);
    if (group.aborted) return;
    if (ncclCommGetAsyncError(group.comm, &result) != ncclSuccess) result = ncclInternalError;
  }
  if (result != ncclSuccess) {
    const CommError error =
        NcclError(result, fmt::format("{} seq {}", comm::DescribeCall(state.collective), state.seq));
    FailGroup(group, error, nullptr);
    return;
  }
  CheckCuda(cudaEventRecord(state.end, group.stream), "cudaEventRecord");
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.phase == NcclWorkState::Phase::kEnqueueing) state.phase = NcclWorkState::Phase::kRunning;
}

// ---------------------------------------------------------------------------------------------
// Completion and the watchdog

void NcclBackend::Impl::Settle(NcclWorkState& state, std::optional<CommError> error) {
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.Over()) return;
    state.phase = error ? NcclWorkState::Phase::kFailed : NcclWorkState::Phase::kDone;
    state.error = std::move(error);
    callback = std::move(state.callback);
    if (state.phase == NcclWorkState::Phase::kDone) {
      uint64_t completed = state.group->completed_seq.load();
      while (completed < state.seq && !state.group->completed_seq.compare_exchange_weak(completed, state.seq)) {
      }
    }
  }
  state.changed.notify_all();
  if (callback) callback();
}

void NcclBackend::Impl::Poll(NcclWorkState& state) {
  cudaError_t status = cudaErrorNotReady;
  {
    // Under the work's lock: its owner destroys the event only once it is over.
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.phase != NcclWorkState::Phase::kRunning) return;
    status = cudaEventQuery(state.end);
  }
  if (status == cudaErrorNotReady) return;
  if (status == cudaSuccess) {
    Settle(state, std::nullopt);
    return;
  }
  Settle(state, CommError(CommError::Kind::kBackend,
                          fmt::format("NCCL backend: {} seq {} failed on the GPU: {}",
                                      comm::DescribeCall(state.collective), state.seq, CudaText(status))));
}

void NcclBackend::Impl::Watch() {
  try {
    UseDevice();
  } catch (const CommError& error) {
    // Connect set the same device on the constructing thread; a failure here is CUDA's.
    std::fprintf(stderr, "petrsim NCCL watchdog: %s\n", error.what());
    return;
  }
  Clock::time_point next_error_check = Clock::now();
  while (true) {
    std::vector<std::shared_ptr<NcclWorkState>> watched;
    {
      std::unique_lock<std::mutex> lock(pending_mutex_);
      pending_changed_.wait_for(lock, pending_.empty() ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1));
      if (stopping_) return;
      std::erase_if(pending_, [](const auto& state) {
        std::lock_guard<std::mutex> state_lock(state->mutex);
        return state->Over();
      });
      watched = pending_;
    }
    for (const auto& state : watched) Poll(*state);
    const Clock::time_point now = Clock::now();
    for (const auto& state : watched) {
      bool late = false;
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        late = !state->Over() && now >= state->deadline;
      }
      if (late) TimeOut(*state);
    }
    if (now >= next_error_check) {
      CheckAsyncErrors();
      next_error_check = now + std::chrono::milliseconds(100);
    }
  }
}

std::vector<std::string> NcclBackend::Impl::WatchdogLines(const NcclWorkState& state) const {
  CollectiveTimeout timeout;
  timeout.backend = Comm::nccl;
  timeout.version = options_.version;
  timeout.rank = options_.rank;
  timeout.process_group_index = state.group->index;
  timeout.process_group = state.group->name;
  timeout.seq = state.seq;
  timeout.op = state.collective.op();
  timeout.numel = NumelOfWork(state.collective, options_.world_size);
  timeout.timeout_ms = static_cast<uint64_t>(options_.timeout.count());
  timeout.ran_for_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - state.start).count());
  timeout.last_enqueued_seq = state.group->issued_seq.load();
  timeout.last_completed_seq = state.group->completed_seq.load();
  timeout.timestamp = LogTimestampOfLocalTime(std::chrono::system_clock::now());
  return CollectiveTimeoutLines(timeout);
}

// ProcessGroupNCCL's watchdog on a collective past its timeout: the release's lines, the group's
// works failed, its communicator aborted.
void NcclBackend::Impl::TimeOut(NcclWorkState& state) {
  const auto ran_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - state.start).count();
  if (options_.watchdog_lines) options_.watchdog_lines(WatchdogLines(state));
  const CommError error(CommError::Kind::kTimeout,
                        fmt::format("NCCL watchdog: rank {}: {} seq {} timed out: it ran for {} ms, the timeout is {} "
                                    "ms; the communicator of {} was aborted",
                                    options_.rank, comm::DescribeCall(state.collective), state.seq, ran_ms,
                                    options_.timeout.count(), state.group->name));
  std::shared_ptr<NcclWorkState> first;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    for (const auto& pending : pending_) {
      if (pending.get() == &state) first = pending;
    }
  }
  FailGroup(*state.group, error, first);
}

void NcclBackend::Impl::CheckAsyncErrors() {
  for (auto& group : groups_) {
    ncclResult_t result = ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(group->mutex);
      if (group->aborted) continue;
      if (ncclCommGetAsyncError(group->comm, &result) != ncclSuccess) result = ncclInternalError;
    }
    if (result == ncclSuccess || result == ncclInProgress) continue;
    FailGroup(*group, NcclError(result, fmt::format("rank {}: the communicator of {}", options_.rank, group->name)),
              nullptr);
  }
}

// Fails every pending work of `group` (`first` with `error` itself, the others as aborted after
// it), then aborts its communicator.
void NcclBackend::Impl::FailGroup(NcclGroup& group, const CommError& error,
                                  const std::shared_ptr<NcclWorkState>& first) {
  std::vector<std::shared_ptr<NcclWorkState>> victims;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    for (const auto& pending : pending_) {
      if (pending->group == &group) victims.push_back(pending);
    }
  }
  for (const auto& victim : victims) {
    if (victim == first || first == nullptr) {
      Settle(*victim, error);
    } else {
      Settle(*victim,
             CommError(error.kind(), fmt::format("{} seq {}: its communicator was aborted: {}",
                                                 comm::DescribeCall(victim->collective), victim->seq, error.what())));
    }
  }
  Abort(group, error.what());
}

void NcclBackend::Impl::Abort(NcclGroup& group, const std::string& why) {
  std::lock_guard<std::mutex> lock(group.mutex);
  if (group.aborted) return;
  if (group.comm != nullptr) ncclCommAbort(group.comm);
  group.comm = nullptr;
  group.aborted = true;
  group.aborted_because = why;
}

// ---------------------------------------------------------------------------------------------
// Results

std::vector<double> NcclBackend::Impl::ReadBack(const NcclWorkState& state, uint64_t count) const {
  if (count == 0) return {};
  const Collective& c = state.collective;
  if (c.op() == Collective::reduce && options_.rank != 0) {
    std::vector<double> values(count, 0.0);  // a non-root rank keeps its own input (CollectiveOutput)
    std::copy_n(state.own.begin(), std::min<size_t>(count, state.own.size()), values.begin());
    return values;
  }
  UseDevice();
  std::vector<std::byte> bytes(count * DtypeBytes(state.layout.dtype));
  CheckCuda(cudaMemcpyAsync(bytes.data(), state.receive, bytes.size(), cudaMemcpyDeviceToHost, staging_),
            "cudaMemcpyAsync from the GPU");
  CheckCuda(cudaStreamSynchronize(staging_), "cudaStreamSynchronize");
  std::vector<double> values = DecodeValues(state.layout.dtype, bytes);
  if (comm::OpReduces(c.op()) && c.reduce_op() == Collective::avg) {
    for (double& v : values) v = comm::ToDtype(c.dtype(), v / options_.world_size);
  }
  return values;
}

// A work's buffers and events once it is no longer needed: back to the pool when it is done (its
// kernels passed them); kept when it failed or is pending, since an aborted kernel may hold them.
void NcclBackend::Impl::Release(NcclWorkState& state) {
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.phase != NcclWorkState::Phase::kDone) return;
  UseDevice();
  if (state.receive != state.send) cudaFreeAsync(state.receive, staging_);
  cudaFreeAsync(state.send, staging_);
  cudaEventDestroy(state.staged);
  cudaEventDestroy(state.end);
  state.send = state.receive = nullptr;
  state.staged = state.end = nullptr;
}

namespace {

class NcclWork : public comm::Work {
 public:
  NcclWork(std::shared_ptr<NcclBackend::Impl> impl, std::shared_ptr<NcclWorkState> state)
      : impl_(std::move(impl)), state_(std::move(state)) {}
  ~NcclWork() override {
    try {
      impl_->Release(*state_);
    } catch (const std::exception&) {
      // A CUDA error while letting go of memory: nothing the owner can do.
    }
  }

  bool IsCompleted() override {
    impl_->Poll(*state_);
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->Over();
  }

  void Wait() override { WaitUntil(Clock::time_point::max()); }

  bool WaitFor(int64_t timeout_ms) override {
    return WaitUntil(Clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)));
  }

  void OnCompletion(std::function<void()> done) override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (!state_->Over()) {
        PETRSIM_ASSERT(!state_->callback);
        state_->callback = std::move(done);
        return;
      }
    }
    done();
  }

  const std::vector<double>& Result() const override {
    if (!converted_) {
      result_ = impl_->ReadBack(*state_, OutputCount());
      converted_ = true;
    }
    return result_;
  }

  std::vector<double> ResultHead(uint64_t count) const override {
    if (converted_) return comm::Work::ResultHead(count);
    return impl_->ReadBack(*state_, std::min(count, OutputCount()));
  }

 private:
  uint64_t OutputCount() const {
    const Collective& c = state_->collective;
    if (c.op() == Collective::barrier) return 0;
    return state_->layout.receive > 0 ? state_->layout.receive : c.numel();
  }

  // Polls the end event itself (the watchdog's 1 ms would slow a run of blocking collectives),
  // sleeping a little longer each time up to 1 ms, until it is over or `until` came; the
  // watchdog's timeout settles it as failed, so the wait is bounded without `until`.
  bool WaitUntil(Clock::time_point until) {
    auto nap = std::chrono::microseconds(10);
    while (true) {
      impl_->Poll(*state_);
      std::unique_lock<std::mutex> lock(state_->mutex);
      if (state_->Over()) {
        if (state_->error) throw *state_->error;
        return true;
      }
      if (Clock::now() >= until) return false;
      state_->changed.wait_for(
          lock,
          std::min(nap, std::chrono::duration_cast<std::chrono::microseconds>(until - std::min(until, Clock::now()))));
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
  }

  std::shared_ptr<NcclBackend::Impl> impl_;
  std::shared_ptr<NcclWorkState> state_;
  mutable bool converted_ = false;
  mutable std::vector<double> result_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// NcclBackend

NcclBackend::NcclBackend(RendezvousStore& store, NcclOptions options) {
  PETRSIM_ASSERT(options.rank < options.world_size);
  if (const auto why = NcclUnavailable()) throw ScenarioError("NCCL backend: " + *why);
  impl_ = std::make_shared<Impl>(std::move(options));
  try {
    impl_->Connect(store);
  } catch (...) {
    impl_->Shutdown();
    throw;
  }
  impl_->StartWatchdog();
}

NcclBackend::~NcclBackend() { impl_->Shutdown(); }

uint32_t NcclBackend::rank() const { return impl_->options().rank; }
uint32_t NcclBackend::world_size() const { return impl_->options().world_size; }

std::unique_ptr<comm::Work> NcclBackend::Issue(const Collective& collective, std::span<const double> input) {
  return std::make_unique<NcclWork>(impl_, impl_->Start(collective, input));
}

void NcclBackend::DelayNextCollectiveForTesting(std::chrono::milliseconds delay) {
  impl_->delay_next_ms = delay.count();
}

}  // namespace petrsim::real
