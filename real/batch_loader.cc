// A real rank's DataLoader side; see batch_loader.h.
#include "real/batch_loader.h"

#include <algorithm>
#include <string>

#include "base/assert.h"
#include "data/sampler_watchdog.h"
#include "real/renderer.h"
#include "trace/trace_sink.h"

namespace petrsim::real {

BatchLoader::BatchLoader(const Scenario& scenario, const Dataset& dataset, const TrainOptions& options,
                         const DataLoaderShape& shape, const std::vector<Camera>& rig, RankRecorder& recorder)
    : scenario_(scenario),
      dataset_(dataset),
      options_(options),
      shape_(shape),
      rig_(rig),
      recorder_(recorder),
      policy_(MakeResamplePolicy(scenario, dataset)),
      draws_(MakeRankSampler(scenario, dataset, options.rank), static_cast<uint32_t>(scenario.job().samples_per_gpu()),
             [this](uint64_t batch, std::vector<SlotDraw>& drawn) {
               if (options_.replay != nullptr) {
                 for (uint32_t slot = 0; slot < drawn.size(); ++slot) {
                   const auto index = options_.replay->SampleIndex(options_.rank, batch, slot);
                   if (index && *index >= 0 && *index < dataset_.size()) {
                     drawn[slot] = SlotDraw{*index, dataset_.group_of(*index)};
                   }
                 }
               }
               const int64_t t = recorder_.Now();
               for (uint32_t slot = 0; slot < drawn.size(); ++slot) {
                 if (drawn[slot].index < 0) continue;
                 TraceRecord r;
                 r.kind = TraceKind::kSamplerDraw;
                 r.start_ns = r.end_ns = t;
                 r.iteration = batch;
                 r.slot = slot;
                 r.index = drawn[slot].index;
                 r.group = drawn[slot].group;
                 recorder_.Record(r);
               }
             }),
      pipeline_(scenario) {}

void BatchLoader::StartEpoch(uint64_t first_batch) {
  epoch_start_ = first_batch;
  if (shape_.workers == 0) {
    // The main process loads: its numpy RNG was seeded once, by set_random_seed.
    if (rngs_.empty()) rngs_.emplace_back(scenario_.job().seed());
  } else {
    rngs_.clear();
    for (uint32_t w = 0; w < shape_.workers; ++w) {
      rngs_.emplace_back(WorkerNumpySeed(shape_.workers, options_.rank, w, scenario_.job().seed()));
    }
  }
}

LoadedBatch BatchLoader::Load(int32_t worker, uint64_t in_epoch) {
  const uint64_t batch = epoch_start_ + in_epoch;
  const std::vector<SlotDraw> drawn = draws_.Get(batch);
  const uint32_t batch_size = scenario_.job().samples_per_gpu();
  // The sampler draws one index per slot; the loader's workers are those of this epoch.
  PETRSIM_ASSERT(drawn.size() == batch_size);
  PETRSIM_ASSERT(worker < 0 || static_cast<uint32_t>(worker) < rngs_.size());
  NumpyRandomState& rng = rngs_[worker < 0 ? 0 : worker];
  LoadedBatch loaded;
  for (uint32_t slot = 0; slot < batch_size; ++slot) {
    LoadedSlot& out = loaded.slots.emplace_back();
    out.draw = drawn[slot];
    if (out.draw.index < 0) continue;  // padding of a short last batch
    const int64_t load_start = recorder_.Now();
    const RecordedLoad* recorded =
        options_.replay != nullptr ? options_.replay->Load(options_.rank, batch, slot) : nullptr;
    WatchedItem item;
    if (recorded != nullptr && !recorded->livelock && !recorded->error && recorded->final_index >= 0 &&
        recorded->final_index < dataset_.size()) {
      item.result.index = recorded->final_index;
      item.result.attempts = recorded->attempts;
      item.result.outcome = GetItemOutcome::kAccepted;
    } else {
      item = WatchedGetItem(dataset_, *policy_, out.draw.index, rng, pipeline_, options_.rank, worker, batch, slot);
    }
    if (item.livelock) ReportLivelock(worker, batch, slot, out.draw, item);
    TraceRecord r;
    r.kind = TraceKind::kLoad;
    r.worker = worker;
    r.start_ns = load_start;
    r.iteration = batch;
    r.slot = slot;
    r.index = out.draw.index;
    r.final_index = item.result.index;
    r.attempts = item.result.attempts;
    out.final_index = item.result.index;
    RenderSlot(out);
    r.end_ns = recorder_.Now();
    recorder_.Record(r);
  }
  // Without workers the main process loaded the batch; its forward (GridMask) draws from the
  // same RNG before it loads the next one.
  if (worker < 0) pipeline_.Forward(rng);
  TraceRecord ready;
  ready.kind = TraceKind::kBatchReady;
  ready.worker = worker;
  ready.start_ns = ready.end_ns = recorder_.Now();
  ready.iteration = batch;
  recorder_.Record(ready);
  return loaded;
}

// A getitem the sampler watchdog found spinning: recorded now; reported in user terms, stopping
// the whole job, when the main process asks for this batch (the moment the real job would start
// to hang).
void BatchLoader::ReportLivelock(int32_t worker, uint64_t batch, uint32_t slot, const SlotDraw& draw,
                                 const WatchedItem& item) {
  const std::string report = "sampler watchdog: " + item.livelock->Describe();
  TraceRecord r;
  r.kind = TraceKind::kLivelock;
  r.worker = worker;
  r.start_ns = r.end_ns = recorder_.Now();
  r.iteration = batch;
  r.slot = slot;
  r.index = draw.index;
  r.final_index = item.result.index;
  r.attempts = item.result.attempts;
  r.text = report;
  recorder_.Record(r);
  throw SampleLivelockError(item.livelock->Describe());
}

// The slot's frame (out.final_index) rendered: its pixels, boxes and pose.
void BatchLoader::RenderSlot(LoadedSlot& out) const {
  const FrameInfo& frame = dataset_.frame(out.final_index);
  const uint32_t boxes = std::min<uint32_t>(frame.gt_count, options_.boxes_max);
  const RenderedFrame rendered = SceneFrame(Mix(scenario_.job().seed(), frame.scene), frame.frame_in_scene, boxes);
  out.pixels = Render(rig_, rendered.boxes);
  for (const RenderBox& b : rendered.boxes) {
    out.labels.push_back(b.cls);
    out.boxes.push_back({b.x, b.y, b.z, b.w, b.l, b.h, b.yaw});
  }
  out.ego2global = rendered.ego2global;
}

}  // namespace petrsim::real
