// Outcome, cause and op names; see outcome.h.
#include "scenario/outcome.h"

namespace petrsim {

std::string OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kHang:
      return "hang";
    case Outcome::kDesync:
      return "desync";
    case Outcome::kRankDied:
      return "rank_died";
    case Outcome::kLimitReached:
      return "limit_reached";
  }
  return "unknown";
}

std::string CauseName(Cause cause) {
  switch (cause) {
    case Cause::kNone:
      return "none";
    case Cause::kSamplerLivelock:
      return "sampler_livelock";
    case Cause::kWorkerDied:
      return "worker_died";
    case Cause::kRankDied:
      return "rank_died";
    case Cause::kDatasetError:
      return "dataset_error";
    case Cause::kStragglerTimeout:
      return "straggler_timeout";
    case Cause::kUnevenBatches:
      return "uneven_batches";
    case Cause::kConditionalCollective:
      return "conditional_collective";
  }
  return "unknown";
}

std::string OpTypeName(Collective::Op op) {
  switch (op) {
    case Collective::allreduce:
      return "ALLREDUCE";
    case Collective::broadcast:
      return "BROADCAST";
    case Collective::reduce:
      return "REDUCE";
    case Collective::allgather:
      return "ALLGATHER";
    case Collective::reduce_scatter:
      return "REDUCE_SCATTER";
    case Collective::alltoall:
      return "ALLTOALL_BASE";
    case Collective::barrier:
      return "ALLREDUCE";  // ProcessGroupNCCL implements barrier as a one-element allreduce
  }
  return "UNKNOWN";
}

}  // namespace petrsim
