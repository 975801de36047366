// The Backend seam (plan/backend.h, docs/design.md, "Seams") directly on NCCL, the library the GPU
// machines have (the CUDA toolkit's nccl.h and libnccl), without LibTorch: one communicator per
// process group, its unique id made by rank 0 and handed to the others through the job's store;
// a collective's values staged to the rank's GPU in its dtype (real/staged_values.h), run there
// on the group's stream, and read back when asked for. Built when CMake finds the toolkit
// (PETRSIM_WITH_NCCL_DIRECT); `petrsim train --backend nccl` runs on it unless the build has
// c10d's ProcessGroupNCCL (PETRSIM_WITH_NCCL, a CUDA LibTorch).
//
// The timeout is enforced by a watchdog thread, as ProcessGroupNCCL's: it completes works whose
// stream passed their end, and when a work is still pending after the timeout (from its issue) it
// hands the lines the scenario's PyTorch release prints for it to NcclOptions::watchdog_lines,
// fails every pending work of that group with CommError kTimeout and aborts the group's
// communicator (ncclCommAbort). Communicators are nonblocking (NCCL 2.14's ncclConfig_t
// blocking = 0), so no NCCL call waits for a peer: the init and each enqueue return at once and
// are polled (ncclCommGetAsyncError), a peer that never comes is the watchdog's, and the abort
// cannot wait behind a call stuck in NCCL. An asynchronous NCCL error (a peer gone) fails the
// group's works the same way (kPeerGone for ncclRemoteError, else kBackend).
//
// Thread safety: Issue and the works' Wait/WaitFor/Result from one thread (the rank's); callbacks
// run on the watchdog thread or on the thread that waits.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plan/backend.h"
#include "proto/scenario.pb.h"
#include "scenario/torch_version.h"

namespace petrsim::real {

// The key-value store the ranks meet through (the job's TCPStore in petrsim_train, adapted by
// real/c10d_rendezvous_store.h; a map in tests). Called from the constructing thread only.
class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual void Set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // The value under `key`, waiting until some rank sets it (throws after the store's timeout).
  virtual std::vector<uint8_t> Get(const std::string& key) = 0;
};

// A communicator's unique id, shared: rank 0 makes it (`make_id`) and sets it under `key`; every
// other rank reads it there. Throws CommError (kBackend) when what it reads is not `id_bytes` long.
std::vector<uint8_t> ShareUniqueId(RendezvousStore& store, const std::string& key, uint32_t rank, size_t id_bytes,
                                   const std::function<std::vector<uint8_t>()>& make_id);

// The store key of a group's unique id.
std::string UniqueIdKey(const std::string& process_group);

// Why this machine cannot run the NCCL backend (no GPU: cudaGetDeviceCount failed, with CUDA's
// error, or found none), as a sentence for the user; nullopt when it can.
std::optional<std::string> NcclUnavailable();

// The NCCL library's version as "2.28.9" (the one loaded, not the header's).
std::string NcclVersion();

struct NcclOptions {
  uint32_t rank = 0;
  uint32_t world_size = 1;
  int32_t device = 0;  // the rank's GPU (its local rank)
  std::chrono::milliseconds timeout{1'800'000};
  // The job's groups in creation order, the world group ("default_pg") first (ProcessGroupNames);
  // "default_pg" is added first when missing. Every group spans the world.
  std::vector<std::string> process_group_names = {"default_pg"};
  TorchVersion version;  // whose watchdog lines a timeout gives
  // Called by the watchdog with the lines the release prints for a timed-out collective (one
  // entry a line), before its works fail; empty: nobody prints them here (petrsim_train prints
  // them from the failed wait, with the lines' heading, as for Gloo).
  std::function<void(const std::vector<std::string>&)> watchdog_lines;
};

class NcclBackend : public comm::Backend {
 public:
  // Creates every group's communicator on `options.device`, each unique id through `store`.
  // Throws ScenarioError where NcclUnavailable says why not or the device does not exist, and
  // CommError when a communicator cannot be made: kTimeout when not every rank joined within the
  // timeout (the half-made communicator aborted).
  NcclBackend(RendezvousStore& store, NcclOptions options);
  // Aborts the communicators (ncclCommAbort: a peer that still waits fails, nothing here hangs)
  // after stopping the watchdog.
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string backend_name() const override { return "nccl"; }
  uint32_t rank() const override;
  uint32_t world_size() const override;
  // Stages `input` to the GPU and enqueues the collective on its group's stream. Throws
  // CommError when the group's communicator was aborted (an earlier timeout or error).
  using comm::Backend::Issue;  // the overload with options ignores them: Wait() blocks
  std::unique_ptr<comm::Work> Issue(const Collective& collective, std::span<const double> input) override;

  // For tests of the watchdog on one GPU (NCCL refuses two ranks on one): the next collective's
  // group stream is held for `delay` (a host function that sleeps) before it, so that it stays
  // pending past a shorter timeout as if a peer had not come.
  void DelayNextCollectiveForTesting(std::chrono::milliseconds delay);

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace petrsim::real
