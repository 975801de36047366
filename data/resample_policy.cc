// Resample policies; see resample_policy.h.
#include "data/resample_policy.h"

#include "base/assert.h"

namespace petrsim {
namespace {

IndexRange ChunkRange(const Dataset& dataset, int64_t index) {
  const ChunkInfo& chunk = dataset.chunks()[dataset.frame(index).chunk];
  return {chunk.begin, chunk.end};
}

// mmdet3d Custom3DDataset._rand_another: np.random.choice(np.where(flag == flag[idx])[0]) in
// the frame's own sub-dataset, i.e. its chunk. Also drop_empty_groups (same loop on a dataset
// built without empty chunks).
class InGroupPolicy final : public ResamplePolicy {
 public:
  explicit InGroupPolicy(const Dataset& dataset) : dataset_(dataset) {}
  IndexRange Candidates(int64_t rejected) const override { return ChunkRange(dataset_, rejected); }
  int64_t Next(int64_t rejected, NumpyRandomState& rng) const override {
    const IndexRange pool = Candidates(rejected);
    return pool.begin + rng.Choice(static_cast<uint32_t>(pool.size()));
  }

 private:
  const Dataset& dataset_;
};

class BoundedPolicy final : public ResamplePolicy {
 public:
  BoundedPolicy(const Dataset& dataset, uint64_t attempts_max) : in_group_(dataset), attempts_max_(attempts_max) {}
  IndexRange Candidates(int64_t rejected) const override { return in_group_.Candidates(rejected); }
  int64_t Next(int64_t rejected, NumpyRandomState& rng) const override { return in_group_.Next(rejected, rng); }
  uint64_t attempts_max() const override { return attempts_max_; }

 private:
  InGroupPolicy in_group_;
  uint64_t attempts_max_;
};

// Uniform over the whole concatenated dataset (np.random.choice(len(dataset))).
class GlobalPolicy final : public ResamplePolicy {
 public:
  explicit GlobalPolicy(const Dataset& dataset) : dataset_(dataset) {}
  IndexRange Candidates(int64_t) const override { return {0, dataset_.size()}; }
  int64_t Next(int64_t, NumpyRandomState& rng) const override {
    return rng.Choice(static_cast<uint32_t>(dataset_.size()));
  }

 private:
  const Dataset& dataset_;
};

// Uniform over the frame's own sub-dataset (np.random.choice(len(self)) in the dataset class).
class InSubDatasetPolicy final : public ResamplePolicy {
 public:
  explicit InSubDatasetPolicy(const Dataset& dataset) : dataset_(dataset) {}
  IndexRange Candidates(int64_t rejected) const override {
    const SubDatasetInfo& sub = dataset_.subdatasets()[dataset_.frame(rejected).subdataset];
    return {sub.begin, sub.end};
  }
  int64_t Next(int64_t rejected, NumpyRandomState& rng) const override {
    const IndexRange pool = Candidates(rejected);
    return pool.begin + rng.Choice(static_cast<uint32_t>(pool.size()));
  }

 private:
  const Dataset& dataset_;
};

// Deterministic: the next accepted frame of the chunk (wrapping), else the next accepted frame
// of the dataset (wrapping). Targets are precomputed once: O(frames).
class NextValidInGroupPolicy final : public ResamplePolicy {
 public:
  explicit NextValidInGroupPolicy(const Dataset& dataset) : target_(dataset.size(), -1) {
    const int64_t n = dataset.size();
    // Next accepted frame in dataset order, wrapping: scan twice from the end.
    std::vector<int64_t> next_global(n, -1);
    int64_t next = -1;
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t i = n - 1; i >= 0; --i) {
        next_global[i] = next;
        if (dataset.frame(i).accepted) next = i;
      }
    }
    for (const ChunkInfo& chunk : dataset.chunks()) {
      int64_t next_in_chunk = -1;
      for (int pass = 0; pass < 2; ++pass) {
        for (int64_t i = chunk.end - 1; i >= chunk.begin; --i) {
          if (pass == 1) target_[i] = next_in_chunk >= 0 ? next_in_chunk : next_global[i];
          if (dataset.frame(i).accepted) next_in_chunk = i;
        }
      }
    }
  }
  IndexRange Candidates(int64_t rejected) const override {
    const int64_t target = target_[rejected];
    // No accepted frame anywhere: the loop stays on the frame itself (a livelock).
    if (target < 0) return {rejected, rejected + 1};
    return {target, target + 1};
  }
  int64_t Next(int64_t rejected, NumpyRandomState&) const override { return Candidates(rejected).begin; }

 private:
  std::vector<int64_t> target_;
};

// filter_empty_gt off: every frame is accepted, Next is never called.
class KeepEmptyPolicy final : public ResamplePolicy {
 public:
  IndexRange Candidates(int64_t rejected) const override { return {rejected, rejected + 1}; }
  int64_t Next(int64_t rejected, NumpyRandomState&) const override { return rejected; }
};

}  // namespace

std::unique_ptr<ResamplePolicy> MakeResamplePolicy(const Scenario& scenario, const Dataset& dataset) {
  switch (scenario.resample().policy()) {
    case Resample::in_group:
    case Resample::drop_empty_groups:
      return std::make_unique<InGroupPolicy>(dataset);
    case Resample::global:
      return std::make_unique<GlobalPolicy>(dataset);
    case Resample::in_subdataset:
      return std::make_unique<InSubDatasetPolicy>(dataset);
    case Resample::next_valid_in_group:
      return std::make_unique<NextValidInGroupPolicy>(dataset);
    case Resample::bounded:
      return std::make_unique<BoundedPolicy>(dataset, scenario.resample().attempts_max());
    case Resample::keep_empty:
      return std::make_unique<KeepEmptyPolicy>();
  }
  PETRSIM_ASSERT(false && "unknown resample policy");
  return nullptr;
}

std::string OutcomeName(GetItemOutcome outcome) {
  switch (outcome) {
    case GetItemOutcome::kAccepted:
      return "accepted";
    case GetItemOutcome::kLivelock:
      return "livelock";
    case GetItemOutcome::kAttemptsExhausted:
      return "attempts_exhausted";
    case GetItemOutcome::kAttemptsLimit:
      return "attempts_limit";
  }
  return "unknown";
}

GetItemResult GetItem(const Dataset& dataset, const ResamplePolicy& policy, int64_t index, NumpyRandomState& rng,
                      const PipelineDraws& pipeline, uint64_t attempts_limit, GetItemObserver* observer) {
  GetItemResult result;
  result.index = index;
  while (true) {
    ++result.attempts;
    pipeline.Load(rng);
    if (dataset.frame(result.index).accepted) {
      result.outcome = GetItemOutcome::kAccepted;
      if (observer != nullptr) observer->Attempt(result.index, true, -1);
      return result;
    }
    if (policy.attempts_max() != 0 && result.attempts >= policy.attempts_max()) {
      result.outcome = GetItemOutcome::kAttemptsExhausted;
      if (observer != nullptr) observer->Attempt(result.index, false, -1);
      return result;
    }
    const IndexRange candidates = policy.Candidates(result.index);
    // A bounded loop is run to its end (attempts_max is validated to stay below petrsim's own
    // limit), so its draws match the Python job's before the error.
    if (policy.attempts_max() == 0 && dataset.accepted_in(candidates.begin, candidates.end) == 0) {
      // Every candidate is rejected too, and (for every policy here) their candidates are the
      // same range: the Python loop would never end.
      result.outcome = GetItemOutcome::kLivelock;
      if (observer != nullptr) observer->Attempt(result.index, false, -1);
      return result;
    }
    if (result.attempts >= attempts_limit) {
      result.outcome = GetItemOutcome::kAttemptsLimit;
      if (observer != nullptr) observer->Attempt(result.index, false, -1);
      return result;
    }
    const int64_t next = policy.Next(result.index, rng);
    if (observer != nullptr) observer->Attempt(result.index, false, next);
    result.index = next;
  }
}

}  // namespace petrsim
