// The Backend seam (docs/design.md, "Seams"), named and shaped like c10d's Backend (as in PyTorch,
// where torch.distributed.Backend is also the list of kinds, scenario.proto's Comm::Backend names
// which one a job uses): a rank issues one of the plan's collectives on its process group and
// gets a work handle at once; the handle completes when every member of the group has issued the
// matching call. Behind it: the simulated rendezvous run by threads (comm/rendezvous_backend.h),
// Gloo and NCCL process groups (real/c10d_backend.h) and a fake for tests
// (comm/fake_backend.h). tests/backend_test.cc is the one typed suite each passes.
//
// The values travel as doubles: every dtype the plan names (up to int64 values below 2^53) fits
// one exactly, and the implementation converts to the collective's dtype before it reduces, as
// c10d does with the tensor it is given. No LibTorch here: plan/ must not include it.
//
// The discrete-event simulator implements it on its network (sim/sim_backend.h: SimBackend on
// SimNet, with its own contract test in virtual time): its works complete in virtual time and
// call back from the event that completes them, so a simulated rank waits through OnCompletion /
// OnAllCompleted where a real one blocks in Wait(). The simulator's own rank loop drives SimNet
// through its engine-side interface (no object or callback per collective), with the same issue
// and wait rules (RankProgram::Step::wait_at_once, IssueOptions::async_op); docs/design.md,
// "Seams", says why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "proto/scenario.pb.h"

namespace petrsim::comm {

// A collective that failed: what c10d's work.wait() raises, sorted by what the caller can tell.
class CommError : public JobError {
 public:
  enum class Kind {
    kTimeout,   // not every member issued it within the timeout
    kPeerGone,  // a member's process is gone (its connection closed)
    kMismatch,  // members issued different collectives at this sequence number
    kBackend,   // anything else the backend reported
  };
  CommError(Kind kind, const std::string& message) : JobError(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

const char* CommErrorKindName(CommError::Kind kind);

// A collective in flight, as c10d's Work: polled (IsCompleted), waited for (Wait, WaitFor, which
// c10d spells wait() and wait(timeout)), or followed through a callback (OnCompletion, c10d's
// get_future().then()), which is how a driver that must not block (the simulator's event loop)
// learns of it. The owner calls Wait/WaitFor/Result from one thread; an implementation may run
// the callback on another.
class Work {
 public:
  virtual ~Work() = default;
  // Whether the collective has completed or failed; never blocks.
  virtual bool IsCompleted() = 0;
  // Blocks until the collective completes; throws CommError when it failed or the backend's
  // timeout passed first. Calling it again after it returned returns at once.
  virtual void Wait() = 0;
  // Waits at most `timeout_ms` (zero: a poll): true once the collective completed (as after
  // Wait), false when the time passed first with the work still pending (it stays valid; wait
  // again); throws CommError as Wait does when it failed, the backend's own timeout included.
  virtual bool WaitFor(int64_t timeout_ms) = 0;
  // Calls `done` once, when the collective has completed or failed (at once, on this thread, when
  // it already has; otherwise on the thread or event that completes it). `done` learns which by
  // Wait()/WaitFor(0), which then return or throw at once. At most one callback per work; the
  // work must outlive it (an implementation's destructor may wait for a pending one).
  virtual void OnCompletion(std::function<void()> done) = 0;
  // This rank's output once Wait() returned, as CollectiveOutput defines it.
  virtual const std::vector<double>& Result() const = 0;
  // The first `count` values of Result() (all of them when it has fewer), once Wait() returned:
  // for a caller that reads only the head of a large output (a gradient bucket whose tail is
  // padding), which an implementation may then convert alone. This one copies them from Result().
  virtual std::vector<double> ResultHead(uint64_t count) const;
};

// How a collective is issued, as c10d's per-op options: `async_op` is torch.distributed's flag of
// that name (false: the caller waits for the work at once, as RankProgram::Step::wait_at_once
// says). A backend that blocks in Wait() may ignore it; the simulator's wakes its rank by it.
struct IssueOptions {
  bool async_op = true;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string backend_name() const = 0;
  virtual uint32_t rank() const = 0;
  virtual uint32_t world_size() const = 0;
  // Issues `collective` on its process_group ("default_pg": the world) with this rank's
  // `input`: numel values (converted to the collective's dtype; missing values are zeros, so a
  // large collective whose tail is padding needs only its head given). The input is copied: the
  // caller may reuse it at once.
  virtual std::unique_ptr<Work> Issue(const Collective& collective, std::span<const double> input) = 0;
  // The same, with the caller's options; this one ignores them.
  virtual std::unique_ptr<Work> Issue(const Collective& collective, std::span<const double> input,
                                      const IssueOptions& options);
  // Calls `done` once every work of `works` has completed or failed (c10d's
  // torch.futures.collect_all(...).then()): at once, on this thread, when they all have. This one
  // follows them one by one through OnCompletion (so none may have a callback already); a
  // backend may do it more cheaply. The works must outlive the call back.
  virtual void OnAllCompleted(std::span<const std::unique_ptr<Work>> works, std::function<void()> done);
};

// The values `input` becomes in `dtype` (c10d converts the tensor it is given): float32, float16
// and bfloat16 round to nearest even, the integer types truncate toward zero (uint8 wraps).
double ToDtype(Collective::Dtype dtype, double value);

// The values a rank contributes to `collective` from `input`: numel of them in its dtype, zeros
// past the end of `input` (what every Backend sends).
std::vector<double> ContributedValues(const Collective& collective, std::span<const double> input);

// Whether `op` combines the ranks' values with a reduce_op (allreduce, reduce, reduce_scatter).
bool OpReduces(Collective::Op op);

// What a collective leaves on `rank` given every rank's input (index: rank; each numel values,
// already in the dtype): for allreduce the reduction (avg: the sum divided by the world size,
// in the dtype); broadcast rank 0's input; reduce the reduction on rank 0 and the rank's own
// input elsewhere; allgather every input concatenated in rank order. The plan gives
// reduce_scatter and alltoall one chunk's numel, and every rank sends world_size copies of its
// input: reduce_scatter leaves chunk `rank` of the reduction (the reduction of the inputs),
// alltoall the chunks every rank sent this one (the inputs concatenated in rank order). barrier
// leaves nothing. Reductions run in rank order in the dtype. The software backends compute with this; Gloo and NCCL
// agree on every value exactly representable along the way.
std::vector<double> CollectiveOutput(const Collective& collective, const std::vector<std::vector<double>>& inputs,
                                     uint32_t rank);

// The signature members must agree on, for messages: "allreduce float32 x 12 on default_pg".
std::string DescribeCall(const Collective& collective);

}  // namespace petrsim::comm
