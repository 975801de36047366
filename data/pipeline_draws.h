// The data pipeline's draws from numpy's global RNG (scenario.pipeline), call by call: every
// __getitem__ attempt runs the train pipeline's random ops before the empty-GT check, so where
// each resample draw falls in the worker's stream depends on them, and a constant number of
// draws per attempt cannot be right (the legacy Gaussian cache carries from one load to the
// next). With workers_per_gpu: 0 the main process loads too, and the detector's GridMask draws
// from the same RNG at every forward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/numpy_random.h"
#include "proto/scenario.pb.h"

namespace petrsim {

class PipelineDraws {
 public:
  // Draws nothing.
  PipelineDraws() = default;
  // The scenario's pipeline (the reference config's when it has none), then
  // resample.pipeline_draws_per_attempt more outputs per load.
  explicit PipelineDraws(const Scenario& scenario);
  // A pipeline of `outputs` raw 32-bit draws per load and no GridMask (tests, old scenarios).
  static PipelineDraws RawOutputs(uint32_t outputs) {
    PipelineDraws draws;
    draws.extra_ = outputs;
    return draws;
  }

  // One load (__getitem__ attempt).
  void Load(NumpyRandomState& rng) const;
  // One forward of the main process (GridMask), after its batch is loaded.
  void Forward(NumpyRandomState& rng) const;

  // "uniform, uniform, uniform, choice(2), uniform, uniform, uniform, normal(3)": for reports.
  std::string Describe() const;

 private:
  std::vector<NumpyCall> load_;
  uint32_t extra_ = 0;
  GridMask grid_mask_;
  bool grid_ = false;
};

// The reference config's pipeline (stream_petr_r50_flash_704_bs2_seq_24e.py):
// ResizeCropFlipRotImage(training=True, rand_flip=True), GlobalRotScaleTransImage, and the
// detector's GridMask(prob=0.7) on 256-pixel-high images.
Pipeline ReferencePipeline();

}  // namespace petrsim
