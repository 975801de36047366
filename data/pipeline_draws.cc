// The pipeline's numpy draws; see pipeline_draws.h. The calls follow StreamPETR's
// projects/mmdet3d_plugin/datasets/pipelines/transform_3d.py (ResizeCropFlipRotImage.
// _sample_augmentation, GlobalRotScaleTransImage.__call__) and models/utils/grid_mask.py
// (GridMask.forward); data/numpy_random_test.cc checks them against real numpy.
#include "data/pipeline_draws.h"

#include <cmath>
#include <sstream>

namespace petrsim {
namespace {

NumpyCall Call(NumpyCall::Kind kind, uint32_t size = 1, uint64_t n = 2) {
  NumpyCall call;
  call.set_kind(kind);
  call.set_size(size);
  call.set_n(n);
  return call;
}

void Append(const PipelineOp& op, std::vector<NumpyCall>* out) {
  switch (op.op_case()) {
    case PipelineOp::kResizeCropFlipRotImage:
      if (!op.resize_crop_flip_rot_image().training()) return;
      // resize, bot_pct (crop_h), crop_w, [flip], rotate.
      out->push_back(Call(NumpyCall::uniform));
      out->push_back(Call(NumpyCall::uniform));
      out->push_back(Call(NumpyCall::uniform));
      if (op.resize_crop_flip_rot_image().rand_flip()) out->push_back(Call(NumpyCall::choice, 1, 2));
      out->push_back(Call(NumpyCall::uniform));
      return;
    case PipelineOp::kGlobalRotScaleTransImage:
      // rot_angle, scale_ratio, trans = normal(scale=translation_std, size=3).
      out->push_back(Call(NumpyCall::uniform));
      out->push_back(Call(NumpyCall::uniform));
      out->push_back(Call(NumpyCall::normal, 3));
      return;
    case PipelineOp::kCalls:
      out->insert(out->end(), op.calls().calls().begin(), op.calls().calls().end());
      return;
    case PipelineOp::OP_NOT_SET:
      return;
  }
}

void Run(const NumpyCall& call, NumpyRandomState& rng) {
  for (uint32_t i = 0; i < call.size(); ++i) {
    switch (call.kind()) {
      case NumpyCall::uniform:
      case NumpyCall::rand:
        rng.Rand();
        break;
      case NumpyCall::normal:
        rng.Gauss();
        break;
      case NumpyCall::choice:
      case NumpyCall::randint:
        rng.RandInt(0, static_cast<int64_t>(call.n()));
        break;
    }
  }
}

}  // namespace

Pipeline ReferencePipeline() {
  Pipeline pipeline;
  pipeline.add_ops()->mutable_resize_crop_flip_rot_image();
  pipeline.add_ops()->mutable_global_rot_scale_trans_image();
  pipeline.mutable_grid_mask();
  return pipeline;
}

PipelineDraws::PipelineDraws(const Scenario& scenario) : extra_(scenario.resample().pipeline_draws_per_attempt()) {
  const Pipeline pipeline = scenario.has_pipeline() ? scenario.pipeline() : ReferencePipeline();
  for (const PipelineOp& op : pipeline.ops()) Append(op, &load_);
  // A pipeline written without grid_mask still has the detector's default one.
  grid_mask_ = pipeline.has_grid_mask() ? pipeline.grid_mask() : ReferencePipeline().grid_mask();
  grid_ = grid_mask_.use();
}

void PipelineDraws::Load(NumpyRandomState& rng) const {
  for (const NumpyCall& call : load_) Run(call, rng);
  rng.Discard(extra_);
}

void PipelineDraws::Forward(NumpyRandomState& rng) const {
  if (!grid_) return;
  if (rng.Rand() > grid_mask_.prob()) return;
  const int64_t d = rng.RandInt(2, grid_mask_.image_height());
  rng.RandInt(0, d);  // st_h
  rng.RandInt(0, d);  // st_w
  rng.RandInt(0, grid_mask_.rotate());
}

std::string PipelineDraws::Describe() const {
  std::ostringstream out;
  for (size_t i = 0; i < load_.size(); ++i) {
    const NumpyCall& call = load_[i];
    out << (i == 0 ? "" : ", ") << NumpyCall::Kind_Name(call.kind());
    if (call.kind() == NumpyCall::choice || call.kind() == NumpyCall::randint) {
      out << "(" << call.n() << (call.size() > 1 ? ", size=" + std::to_string(call.size()) : "") << ")";
    } else if (call.size() > 1) {
      out << "(size=" << call.size() << ")";
    }
  }
  if (extra_ > 0) out << (load_.empty() ? "" : ", ") << extra_ << " more outputs";
  if (load_.empty() && extra_ == 0) out << "none";
  return out.str();
}

}  // namespace petrsim
