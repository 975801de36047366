// The Backend seam's shared definitions: errors, dtype conversion and what each collective leaves
// on a rank; see comm.h.
#include "plan/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/assert.h"

namespace petrsim::comm {
namespace {

// bfloat16: the top 16 bits of the float32, rounded to nearest even (NaN kept a NaN).
float RoundToBfloat16(float value) {
  if (std::isnan(value)) return value;
  uint32_t bits = std::bit_cast<uint32_t>(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  return std::bit_cast<float>(bits);
}

// float16 (IEEE binary16), rounded to nearest even; beyond the largest finite half, infinity.
// By hand: clang 14 has no _Float16 on x86-64 (the fuzz build uses it).
float RoundToHalf(float value) {
  if (std::isnan(value) || std::isinf(value)) return value;
  const float magnitude = std::fabs(value);
  if (magnitude >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), value);
  float quantum = 5.9604644775390625e-08f;  // 2^-24: the subnormals' step
  if (magnitude >= 6.103515625e-05f) {      // 2^-14: normal halves have 11 significant bits
    int exponent = 0;
    std::frexp(magnitude, &exponent);
    quantum = std::ldexp(1.0f, exponent - 11);
  }
  return std::copysign(std::nearbyint(magnitude / quantum) * quantum, value);
}

double Truncated(double value, double lo, double hi) {
  if (std::isnan(value)) return 0;
  const double t = std::trunc(value);
  return t < lo ? lo : (t > hi ? hi : t);
}

double Reduce(Collective::ReduceOp op, Collective::Dtype dtype, double a, double b) {
  switch (op) {
    case Collective::sum:
    case Collective::avg:
      return ToDtype(dtype, a + b);
    case Collective::max:
      return std::max(a, b);
    case Collective::min:
      return std::min(a, b);
    case Collective::product:
      return ToDtype(dtype, a * b);
  }
  return a;
}

}  // namespace

const char* CommErrorKindName(CommError::Kind kind) {
  switch (kind) {
    case CommError::Kind::kTimeout:
      return "timeout";
    case CommError::Kind::kPeerGone:
      return "peer gone";
    case CommError::Kind::kMismatch:
      return "mismatch";
    case CommError::Kind::kBackend:
      return "backend error";
  }
  return "?";
}

double ToDtype(Collective::Dtype dtype, double value) {
  switch (dtype) {
    case Collective::float32:
      return static_cast<float>(value);
    case Collective::float16:
      // Through float32 first, as PyTorch converts a double to half.
      return RoundToHalf(static_cast<float>(value));
    case Collective::bfloat16:
      // Through float32 first, as PyTorch converts a double to bfloat16: the double rounding
      // differs from a direct conversion only on exact ties below float32's precision.
      return RoundToBfloat16(static_cast<float>(value));
    case Collective::float64:
      return value;
    case Collective::int32:
      return Truncated(value, -2147483648.0, 2147483647.0);
    case Collective::int64:
      return Truncated(value, -9223372036854775808.0, 9223372036854775807.0);
    case Collective::uint8: {
      const double t = Truncated(value, -9223372036854775808.0, 9223372036854775807.0);
      return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(t)));
    }
  }
  return value;
}

std::vector<double> Work::ResultHead(uint64_t count) const {
  const std::vector<double>& all = Result();
  return std::vector<double>(all.begin(), all.begin() + static_cast<ptrdiff_t>(std::min<uint64_t>(count, all.size())));
}

std::vector<double> ContributedValues(const Collective& collective, std::span<const double> input) {
  std::vector<double> values(collective.numel(), 0.0);
  for (size_t i = 0; i < values.size() && i < input.size(); ++i) values[i] = ToDtype(collective.dtype(), input[i]);
  return values;
}

bool OpReduces(Collective::Op op) {
  return op == Collective::allreduce || op == Collective::reduce || op == Collective::reduce_scatter;
}

std::vector<double> CollectiveOutput(const Collective& collective, const std::vector<std::vector<double>>& inputs,
                                     uint32_t rank) {
  const uint32_t world = static_cast<uint32_t>(inputs.size());
  PETRSIM_ASSERT(rank < world);
  const auto reduced = [&] {
    std::vector<double> out = inputs[0];
    for (uint32_t r = 1; r < world; ++r) {
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = Reduce(collective.reduce_op(), collective.dtype(), out[i], inputs[r][i]);
      }
    }
    if (collective.reduce_op() == Collective::avg) {
      for (double& v : out) v = ToDtype(collective.dtype(), v / world);
    }
    return out;
  };
  const auto concatenated = [&] {
    std::vector<double> out;
    for (const auto& input : inputs) out.insert(out.end(), input.begin(), input.end());
    return out;
  };
  switch (collective.op()) {
    case Collective::allreduce:
    case Collective::reduce_scatter:
      return reduced();
    case Collective::reduce:
      return rank == 0 ? reduced() : inputs[rank];
    case Collective::broadcast:
      return inputs[0];
    case Collective::allgather:
    case Collective::alltoall:
      return concatenated();
    case Collective::barrier:
      return {};
  }
  return {};
}

std::string DescribeCall(const Collective& collective) {
  std::string op = Collective::Op_Name(collective.op());
  if (OpReduces(collective.op())) {
    op += "(" + Collective::ReduceOp_Name(collective.reduce_op()) + ")";
  }
  return fmt::format("{} {} x {} on {}", op, Collective::Dtype_Name(collective.dtype()), collective.numel(),
                     collective.process_group());
}

std::unique_ptr<Work> Backend::Issue(const Collective& collective, std::span<const double> input,
                                     const IssueOptions& /*options*/) {
  return Issue(collective, input);
}

namespace {

// OnAllCompleted's default: a chain through the works, each callback registering the next
// pending work's, so one callback runs at a time (on whichever thread) and no count is shared.
struct CompletionChain {
  std::vector<Work*> works;
  size_t next = 0;
  std::function<void()> done;
};

void FollowChain(const std::shared_ptr<CompletionChain>& chain) {
  while (chain->next < chain->works.size()) {
    Work* work = chain->works[chain->next++];
    if (!work->IsCompleted()) {
      work->OnCompletion([chain] { FollowChain(chain); });
      return;
    }
  }
  chain->done();
}

}  // namespace

void Backend::OnAllCompleted(std::span<const std::unique_ptr<Work>> works, std::function<void()> done) {
  auto chain = std::make_shared<CompletionChain>();
  for (const auto& work : works) {
    PETRSIM_ASSERT(work != nullptr);
    chain->works.push_back(work.get());
  }
  chain->done = std::move(done);
  FollowChain(chain);
}

}  // namespace petrsim::comm
