// `petrsim import probe-trace DIR -o OUT.pbtxt [--into SCENARIO]`: the model a real job ran under
// DistributedDataParallel, from the `ddp_layout` events petrsim_probe recorded (proto/trace.proto,
// DdpLayout), as the scenario's plan.ddp (DdpModel): the tensors in state_dict order, bucket_cap_mb,
// find_unused_parameters, broadcast_buffers, the process group and the gradient-ready order of
// iteration 0; comm.torch_version and job.world_size from the trace headers. With --into, merged
// into an existing scenario (everything else kept); without, a scenario of its own whose custom
// plan holds rank 0's collectives that are not DDP's: those before DDP's construction (startup) and
// those of one steady iteration between DDP's pre-forward and its gradient buckets (per_iteration).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "proto/scenario.pb.h"

namespace CLI {
class App;
}

namespace petrsim {

struct ProbeTraceImportFlags {
  std::string trace_dir;
  std::string output;
  std::string into;
};

// Adds `probe-trace` under `import`; returns it.
CLI::App* AddProbeTraceImport(CLI::App& import, ProbeTraceImportFlags& flags);

// The scenario the import writes (validated, its sampler constructible as `petrsim check` and the
// simulator require), and what it says about it (one line each). Throws ScenarioError on bad
// input: not a directory, no rank files or no rank_0.pbtrace, no DDP layout, ranks that recorded
// different models, a layout petrsim cannot plan (named by rank file and DdpLayout field), a --into
// scenario that does not load or whose sampler cannot be built with the trace's world size.
struct ProbeTraceImport {
  Scenario scenario;
  std::vector<std::string> summary;
};
ProbeTraceImport ImportProbeTrace(const std::string& trace_dir, const std::string& into_path);

// Runs the parsed subcommand: writes flags.output atomically (nothing on error), prints the summary.
int RunProbeTraceImport(const ProbeTraceImportFlags& flags, std::FILE* out);

}  // namespace petrsim
