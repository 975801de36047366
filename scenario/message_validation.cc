// Validation of the scenario's messages that the plan and the data read; see message_validation.h.
#include "scenario/message_validation.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "base/host_memory.h"

namespace petrsim {

namespace {

// grad_ready_order: a permutation of [0, trainable), the positions of the parameters that require
// grad. `add` reports a problem (field, rule, what was found).
template <class Add>
void CheckGradReadyOrder(const DdpModel& model, uint64_t trainable, const Add& add) {
  const std::string rule = "must list each position of the " + std::to_string(trainable) +
                           " parameters that require grad (0 to " + std::to_string(trainable - 1) + ") once";
  if (static_cast<uint64_t>(model.grad_ready_order_size()) != trainable) {
    add("grad_ready_order", rule, std::to_string(model.grad_ready_order_size()) + " positions");
  } else {
    std::vector<int> first_at(trainable, -1);
    for (int i = 0; i < model.grad_ready_order_size(); ++i) {
      const uint32_t position = model.grad_ready_order(i);
      const std::string field = "grad_ready_order[" + std::to_string(i) + "]";
      if (position >= trainable) {
        add(field, "must be < " + std::to_string(trainable) + " (the parameters that require grad)", position);
      } else if (first_at[position] >= 0) {
        add(field, rule,
            std::to_string(position) + " again (first at grad_ready_order[" + std::to_string(first_at[position]) +
                "])");
      } else {
        first_at[position] = i;
      }
    }
  }
}

// The state_dict keys `model` stands for (each tensor's repeat unrolled, under 1 +
// state_dict_aliases keys), at most kDdpStateDictKeysMax: the plan unrolls every one, about 100
// bytes apiece. Repeats and aliases beyond their own limits count at those limits.
template <class Add>
void CheckStateDictKeys(const DdpModel& model, const Add& add) {
  uint64_t keys = 0;
  for (const DdpTensor& t : model.tensors()) {
    keys += std::min<uint64_t>(t.repeat(), 1'000'000) * (1 + std::min<uint64_t>(t.state_dict_aliases(), 1000));
  }
  if (keys > kDdpStateDictKeysMax) {
    add("tensors",
        "must stand for at most " + std::to_string(kDdpStateDictKeysMax) +
            " state_dict keys in all (repeat x (1 + state_dict_aliases), summed; about " + FormatBytes(keys * 100) +
            " unrolled)",
        keys);
  }
}

}  // namespace

std::vector<std::string> ValidateDdpModel(const DdpModel& model, const std::string& prefix) {
  std::vector<std::string> problems;
  const auto add = [&](const std::string& field, const std::string& rule, const auto& found) {
    std::ostringstream line;
    line << prefix << "." << field << ": " << rule << ", got " << found;
    problems.push_back(line.str());
  };
  if (!std::isfinite(model.bucket_cap_mb()) || model.bucket_cap_mb() <= 0 || model.bucket_cap_mb() > 1e6) {
    add("bucket_cap_mb", "must be in (0, 10^6] MiB", model.bucket_cap_mb());
  }
  if (!std::isfinite(model.first_bucket_mb()) || model.first_bucket_mb() <= 0 || model.first_bucket_mb() > 1e6) {
    add("first_bucket_mb", "must be in (0, 10^6] MiB", model.first_bucket_mb());
  }
  if (model.process_group().empty()) add("process_group", "must not be empty", "\"\"");
  uint64_t total = 0, trainable = 0;
  std::unordered_map<std::string_view, int> names;  // a repeated name makes the bucket reports ambiguous
  for (int i = 0; i < model.tensors_size(); ++i) {
    const DdpTensor& t = model.tensors(i);
    const std::string field = "tensors[" + std::to_string(i) + "]";
    if (!t.name().empty()) {
      const auto [first, inserted] = names.emplace(t.name(), i);
      if (!inserted) {
        add(field + ".name", "must not repeat the name of tensors[" + std::to_string(first->second) + "]",
            "\"" + t.name() + "\"");
      }
    }
    uint64_t numel = 1;
    for (int d = 0; d < t.shape_size(); ++d) {
      if (t.shape(d) < 1 || t.shape(d) > (uint64_t{1} << 40)) {
        add(field + ".shape[" + std::to_string(d) + "]", "must be in [1, 2^40]", t.shape(d));
        numel = 0;
        break;
      }
      if (numel > (uint64_t{1} << 40) / t.shape(d)) {
        add(field + ".shape", "must hold at most 2^40 elements (the product of the sizes)", t.shape(d));
        numel = 0;
        break;
      }
      numel *= t.shape(d);
    }
    if (t.repeat() < 1 || t.repeat() > 1'000'000) add(field + ".repeat", "must be in [1, 10^6]", t.repeat());
    if (t.kind() == DdpTensor::buffer && t.has_requires_grad()) {
      add(field + ".requires_grad", "is for parameters only (this is a buffer)", t.requires_grad() ? "true" : "false");
    }
    if (t.kind() == DdpTensor::parameter && t.has_persistent()) {
      add(field + ".persistent", "is for buffers only (this is a parameter)", t.persistent() ? "true" : "false");
    }
    if (t.state_dict_aliases() > 1000) add(field + ".state_dict_aliases", "must be <= 1000", t.state_dict_aliases());
    total += numel * std::min<uint64_t>(t.repeat(), 1'000'000);
    if (t.kind() == DdpTensor::parameter && t.requires_grad()) trainable += t.repeat();
    if (total > (uint64_t{1} << 40)) {
      add("tensors", "must hold at most 2^40 elements in all", "more, at " + field);
      break;
    }
  }
  CheckStateDictKeys(model, add);
  if (model.tensors_size() > 0 && trainable == 0) {
    add("tensors", "must list at least one parameter that requires grad", "none");
  }
  if (model.grad_ready_order_size() > 0 && trainable > 0 && total <= (uint64_t{1} << 40)) {
    CheckGradReadyOrder(model, trainable, add);
  }
  return problems;
}

std::vector<std::string> ValidatePipeline(const Pipeline& pipeline) {
  std::vector<std::string> problems;
  const auto add = [&](const std::string& field, const std::string& rule, const auto& found) {
    std::ostringstream line;
    line << "pipeline." << field << ": " << rule << ", got " << found;
    problems.push_back(line.str());
  };
  for (int i = 0; i < pipeline.ops_size(); ++i) {
    const PipelineOp& op = pipeline.ops(i);
    const std::string at = "ops[" + std::to_string(i) + "]";
    if (op.op_case() == PipelineOp::OP_NOT_SET) {
      add(at, "must be one of resize_crop_flip_rot_image, global_rot_scale_trans_image, calls", "an empty op");
    }
    if (!op.has_calls()) continue;
    for (int c = 0; c < op.calls().calls_size(); ++c) {
      const NumpyCall& call = op.calls().calls(c);
      const std::string field = at + ".calls.calls[" + std::to_string(c) + "]";
      if (call.size() < 1 || call.size() > 1'000'000) add(field + ".size", "must be in [1, 10^6]", call.size());
      if ((call.kind() == NumpyCall::choice || call.kind() == NumpyCall::randint) &&
          (call.n() < 1 || call.n() > (uint64_t{1} << 32))) {
        add(field + ".n", "must be in [1, 2^32]", call.n());
      }
    }
  }
  if (pipeline.has_grid_mask()) {
    const GridMask& g = pipeline.grid_mask();
    if (!std::isfinite(g.prob()) || g.prob() < 0 || g.prob() > 1) add("grid_mask.prob", "must be in [0, 1]", g.prob());
    if (g.image_height() < 3 || g.image_height() > 100000) {
      add("grid_mask.image_height", "must be in [3, 10^5]", g.image_height());
    }
    if (g.rotate() < 1 || g.rotate() > 360) add("grid_mask.rotate", "must be in [1, 360]", g.rotate());
  }
  return problems;
}

}  // namespace petrsim
