// DDP's collectives per release; see ddp_plan.h. Every rule below cites the section of
// docs/research/ddp_collectives.md it follows.
#include "plan/ddp_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "base/assert.h"

namespace petrsim {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
// torch/nn/parallel/distributed.py: self.broadcast_bucket_size = int(250 * 1024 * 1024).
constexpr uint64_t kBroadcastBucketBytes = 250 * kMiB;

// One tensor of the module (a DdpTensor with its repeat unrolled).
struct Tensor {
  DdpTensor::Kind kind = DdpTensor::parameter;
  uint64_t numel = 1;
  uint64_t dims = 0;
  Collective::Dtype dtype = Collective::float32;
  bool requires_grad = true;
  bool persistent = true;
  uint32_t state_dict_aliases = 0;
};

std::vector<Tensor> Unroll(const DdpModel& model) {
  std::vector<Tensor> out;
  for (const DdpTensor& t : model.tensors()) {
    Tensor tensor;
    tensor.kind = t.kind();
    for (const uint64_t size : t.shape()) tensor.numel *= size;
    tensor.dims = static_cast<uint64_t>(t.shape_size());
    tensor.dtype = t.dtype();
    tensor.requires_grad = t.requires_grad();
    tensor.persistent = t.persistent();
    tensor.state_dict_aliases = t.state_dict_aliases();
    for (uint32_t i = 0; i < t.repeat(); ++i) out.push_back(tensor);
  }
  return out;
}

struct Bucket {
  Collective::Dtype dtype = Collective::float32;
  uint64_t numel = 0;
  size_t first = 0;  // the smallest position (in the input list) of its tensors
};

// compute_bucket_assignment_by_size (section 2.3): tensors go whole into the open bucket of
// their dtype, which closes once its size reaches the dtype's current limit; each dtype then
// moves to its next limit (the last one repeats). Closed buckets in the order they closed, then
// the open ones (dtypes in the reverse of their first appearance); sorted by smallest position
// when `sort`.
std::vector<Bucket> AssignBuckets(const std::vector<const Tensor*>& tensors, const std::vector<uint64_t>& limits,
                                  bool sort) {
  struct Open {
    Bucket bucket;
    uint64_t bytes = 0;
    size_t limit = 0;
    bool empty = true;
  };
  std::vector<Bucket> closed;
  std::vector<Collective::Dtype> order;  // dtypes by first appearance
  std::map<Collective::Dtype, Open> open;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = *tensors[i];
    auto [it, inserted] = open.try_emplace(t.dtype);
    if (inserted) order.push_back(t.dtype);
    Open& o = it->second;
    if (o.empty) {
      o.bucket = Bucket{t.dtype, 0, i};
      o.bytes = 0;
      o.empty = false;
    }
    o.bucket.numel += t.numel;
    o.bytes += t.numel * DtypeBytes(t.dtype);
    if (o.bytes >= limits[o.limit]) {
      closed.push_back(o.bucket);
      o.empty = true;
      if (o.limit + 1 < limits.size()) ++o.limit;
    }
  }
  // PyTorch appends the buckets left open by iterating its unordered_map of them, which yields
  // the dtypes in the reverse of their first appearance [ran 1.13: f32, f64, f16 tensors, each
  // bucket left open, come out as f16, f64, f32]; only a layout that is not sorted shows it.
  for (auto dtype = order.rbegin(); dtype != order.rend(); ++dtype) {
    if (!open[*dtype].empty) closed.push_back(open[*dtype].bucket);
  }
  if (sort) {
    std::stable_sort(closed.begin(), closed.end(), [](const Bucket& a, const Bucket& b) { return a.first < b.first; });
  }
  return closed;
}

Collective Make(const std::string& name, Collective::Op op, uint64_t numel, Collective::Dtype dtype, bool blocking,
                const std::string& process_group, const std::string& frame) {
  Collective c;
  c.set_name(name);
  c.set_op(op);
  c.set_reduce_op(Collective::sum);
  c.set_numel(numel);
  c.set_dtype(dtype);
  c.set_blocking(blocking);
  c.set_process_group(process_group);
  c.set_python_frame(frame);
  return c;
}

// dist._broadcast_coalesced(pg, tensors, 250 MiB, 0): one broadcast per bucket (section 2.3).
void BroadcastCoalesced(const std::vector<const Tensor*>& tensors, const std::string& what, const std::string& pg,
                        const std::string& frame, std::vector<Collective>* out) {
  const std::vector<Bucket> buckets = AssignBuckets(tensors, {kBroadcastBucketBytes}, true);
  for (size_t k = 0; k < buckets.size(); ++k) {
    out->push_back(Make(what + " " + std::to_string(k) + " (" + Collective::Dtype_Name(buckets[k].dtype) + ")",
                        Collective::broadcast, buckets[k].numel, buckets[k].dtype, true, pg, frame));
  }
}

const char kInitFrame[] = "torch/nn/parallel/distributed.py, in __init__";
const char kForwardFrame[] = "mmcv/parallel/distributed.py, in train_step (DDP's pre-forward)";
const char kBackwardFrame[] = "mmcv/runner/hooks/optimizer.py, in after_train_iter: loss.backward()";

// The model's tensors by role (section 2.1).
struct TensorRoles {
  std::vector<const Tensor*> parameters;      // the ones that require grad, in named_parameters() order
  std::vector<const Tensor*> all_parameters;  // frozen ones too
  std::vector<const Tensor*> buffers;
  std::vector<const Tensor*> state_dict;
  uint64_t dims = 0;  // of `parameters`
};

TensorRoles SortTensors(const std::vector<Tensor>& tensors) {
  TensorRoles roles;
  for (const Tensor& t : tensors) {
    if (t.kind == DdpTensor::parameter) {
      roles.all_parameters.push_back(&t);
      if (t.requires_grad) {
        roles.parameters.push_back(&t);
        roles.dims += t.dims;
      }
    } else {
      roles.buffers.push_back(&t);
    }
    if (t.kind == DdpTensor::parameter || t.persistent) {
      // 1.9/1.10 walk state_dict(), which lists a shared tensor under each of its keys.
      for (uint32_t k = 0; k <= t.state_dict_aliases; ++k) roles.state_dict.push_back(&t);
    }
  }
  return roles;
}

// Construction (section 2.1): the parameter count check (1.12+), the shape check, the module
// state broadcast.
void ConstructionCollectives(const DdpModel& model, TorchVersion version, const TensorRoles& roles,
                             const std::string& pg, std::vector<Collective>* construction) {
  if (version >= TorchVersion{1, 12}) {
    // An allgather in 1.13 (run); 1.12 shipped either this or a broadcast (unknown, same count).
    construction->push_back(
        Make("DDP __init__: parameter count check", Collective::allgather, 1, Collective::int64, true, pg, kInitFrame));
  }
  construction->push_back(Make("DDP __init__: parameter shape check", Collective::broadcast, 2 * roles.dims,
                               Collective::int64, true, pg, kInitFrame));
  std::vector<const Tensor*> states;
  if (version <= TorchVersion{1, 10}) {
    states = roles.state_dict;  // parameters and persistent buffers, module by module
  } else {
    states = roles.all_parameters;  // frozen ones too, then the buffers (non-persistent ones too)
    if (version <= TorchVersion{2, 0} || model.broadcast_buffers()) {
      states.insert(states.end(), roles.buffers.begin(), roles.buffers.end());
    }
  }
  BroadcastCoalesced(states, "DDP __init__: module state broadcast", pg, kInitFrame, construction);
}

// The parameters in the order their gradients became ready in iteration 0 (the model's
// grad_ready_order; without it the reverse of registration, a plain stack).
std::vector<const Tensor*> ReadyOrder(const DdpModel& model, const std::vector<const Tensor*>& parameters) {
  std::vector<const Tensor*> ready;
  if (model.grad_ready_order_size() > 0) {
    // ValidateDdpModel proved it a permutation; a model that skipped it stops here, not in memory it never owned.
    PETRSIM_ASSERT(static_cast<uint64_t>(model.grad_ready_order_size()) == parameters.size());
    for (const uint32_t position : model.grad_ready_order()) {
      PETRSIM_ASSERT(position < parameters.size());
      ready.push_back(parameters[position]);
    }
  } else {
    ready.assign(parameters.rbegin(), parameters.rend());
  }
  return ready;
}

// One allreduce per bucket of `layout`, then the used-parameter map with find_unused_parameters.
void BucketCollectives(const std::vector<Bucket>& layout, bool find_unused, uint64_t p, const std::string& pg,
                       std::vector<Collective>* list) {
  for (size_t k = 0; k < layout.size(); ++k) {
    list->push_back(Make("DDP gradient bucket " + std::to_string(k), Collective::allreduce, layout[k].numel,
                         layout[k].dtype, false, pg, kBackwardFrame));
  }
  if (find_unused) {
    // The used-parameter map, after the last bucket (section 2.4).
    list->push_back(
        Make("DDP used-parameter map", Collective::allreduce, p, Collective::int32, false, pg, kBackwardFrame));
  }
}

}  // namespace

uint64_t DtypeBytes(Collective::Dtype dtype) {
  switch (dtype) {
    case Collective::float32:
    case Collective::int32:
      return 4;
    case Collective::float16:
    case Collective::bfloat16:
      return 2;
    case Collective::float64:
    case Collective::int64:
      return 8;
    case Collective::uint8:
      return 1;
  }
  return 4;
}

DdpCollectives DdpPlan(const DdpModel& model, TorchVersion version) {
  DdpCollectives out;
  const std::string& pg = model.process_group();
  const std::vector<Tensor> tensors = Unroll(model);
  const TensorRoles roles = SortTensors(tensors);
  const std::vector<const Tensor*>& parameters = roles.parameters;
  const uint64_t p = parameters.size();
  ConstructionCollectives(model, version, roles, pg, &out.construction);

  // Gradient bucket layouts (section 2.4). Limits in bytes, as DDP computes them.
  const uint64_t first = static_cast<uint64_t>(model.first_bucket_mb() * static_cast<double>(kMiB));
  const uint64_t cap = static_cast<uint64_t>(model.bucket_cap_mb() * static_cast<double>(kMiB));
  const bool find_unused = model.find_unused_parameters();
  // Registration order, [first, cap], sorted and then reversed: bucket 0 holds the last
  // registered parameters.
  std::vector<Bucket> registered = AssignBuckets(parameters, {first, cap}, true);
  std::reverse(registered.begin(), registered.end());
  // 1.12+ without find_unused_parameters: one bucket per dtype in iteration 0.
  std::vector<Bucket> single = AssignBuckets(parameters, {std::numeric_limits<uint64_t>::max()}, true);
  std::reverse(single.begin(), single.end());
  // The rebuilt layout (section 2.5): the parameters in their ready order, [first, cap], not sorted.
  const std::vector<Bucket> rebuilt = AssignBuckets(ReadyOrder(model, parameters), {first, cap}, false);

  for (size_t phase = 0; phase < kDdpPhases; ++phase) {
    std::vector<Collective>& forward = out.forward[phase];
    // The rebuild, first thing in iteration 1's forward, never with find_unused_parameters (2.5).
    if (phase == 1 && !find_unused && p > 0) {
      forward.push_back(Make("DDP bucket rebuild: parameter indices", Collective::broadcast, p + 1, Collective::int32,
                             true, pg, kForwardFrame));
      forward.push_back(Make("DDP bucket rebuild: bucket sizes", Collective::broadcast, rebuilt.size(),
                             Collective::int32, true, pg, kForwardFrame));
    }
    // The buffers, every forward (section 2.2).
    if (model.broadcast_buffers()) {
      BroadcastCoalesced(roles.buffers, "DDP forward: buffer broadcast", pg, kForwardFrame, &forward);
    }
    const std::vector<Bucket>& layout = find_unused  ? registered
                                        : phase == 0 ? (version >= TorchVersion{1, 12} ? single : registered)
                                                     : rebuilt;
    BucketCollectives(layout, find_unused, p, pg, &out.backward[phase]);
  }
  return out;
}

}  // namespace petrsim
