// The real backend's training loop for one rank (issue "real backend", Distributed training):
// the scenario's sampler and resample policy (model/, unchanged) pick the frames; the sampler
// watchdog guards every getitem; the renderer draws them; the scaled-down StreamPETR is trained
// with AdamW; ranks meet in c10d ProcessGroupGloo over a TCPStore: the parameters are broadcast
// from rank 0 at the start, num_total_pos is all-reduced (mean, clamped at 1) before the losses
// as mmdet does, and the gradients are flattened into buckets (bucket_mb, as DDP) and
// all-reduced. Ranks may be threads of one process (tests) or processes (torchrun conventions).
//
// With a trace path, the rank records sampler draws, loads, its collectives (issue, completion,
// or pending when it stopped), iterations, a livelock and its exit, so `petrsim diagnose` reads a
// real run as it reads a simulated one.
//
// Not yet: the rest of the scenario's iteration plan (per-layer reduce_means, log reductions),
// the DataLoader threads and the collective watchdog.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/dataset.h"
#include "model/scenario.pb.h"
#include "real/streampetr_model.h"

namespace petrsim::real {

struct TrainOptions {
  uint32_t rank = 0;
  uint32_t world_size = 1;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;  // the TCPStore's port
  bool serve_store = true;   // rank 0 serves the TCPStore (false: someone else does, e.g. a test)
  uint64_t iterations = 10;
  int64_t timeout_ms = 60000;
  double bucket_mb = 25;
  double learning_rate = 2e-3;
  ModelConfig model;
  uint32_t boxes_max = 8;  // boxes rendered per frame (GT count capped)
  // Records the rank's trace (model/trace.proto) to this file when set: streamed, or the last
  // trace_ring events when trace_ring > 0 (dumped on exit, SIGTERM and SIGABRT).
  std::string trace_path;
  uint64_t trace_ring = 0;
};

struct TrainResult {
  std::vector<double> losses;       // per iteration, this rank's
  uint64_t parameters_hash = 0;     // of every parameter's bytes at the end
  uint64_t gradient_buckets = 0;    // all-reduces of gradient buckets per iteration
};

// Runs `options.iterations` iterations of rank `options.rank`. Throws std::runtime_error on a
// c10d error, and SampleLivelockError when the sampler watchdog fires.
TrainResult TrainRank(const Scenario& scenario, const Dataset& dataset, const TrainOptions& options);

struct SampleLivelockError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A hash of the parameters' bytes (equal on every rank when they are in sync).
uint64_t HashParameters(torch::nn::Module& module);

}  // namespace petrsim::real
