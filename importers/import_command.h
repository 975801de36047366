// `petrsim import`: scenarios from a user's real dataset metadata.
//   petrsim import mmdet3d-infos A.pkl [B.pkl ...] -o OUT.pbtxt [--name a,b] [filter options]
//   petrsim import mmdet3d-config CONFIG.py [--data-root DIR] [--infos A.pkl ...] [--gpus N] -o OUT.pbtxt
//       (the job and its filters from the config, read without running it; importers/mmdet3d_config_job.h)
//   petrsim import nuscenes --dataroot DIR --version v1.0-trainval --split train,val -o OUT.pbtxt
//       [--split-file splits.json] [filter options]
//   petrsim import probe-trace TRACES/ -o OUT.pbtxt [--into SCENARIO.pbtxt]
//       (plan.ddp from a petrsim_probe trace directory; importers/probe_trace_import.h)
// Filter options (recorded in the scenario's `filters`; defaults are StreamPETR's):
//   --classes car,truck,...  --range -51.2,-51.2,-5,51.2,51.2,3  --no-valid-flag
//   --no-filter-empty-gt  --seq-split-num N
// The scenario is written atomically (nothing is left of it, not even its .tmp, when the import
// fails or is interrupted). mmdet3d-infos, mmdet3d-config and nuscenes record what they read in
// OUT.petrsim-cache (base/run_record.h): run again on unchanged files, they keep OUT and
// print its summary again (--no-cache: import anyway). The summary (frames, scenes, groups, frames and groups with zero
// GT after the filters) goes to standard output. While the files are read, a progress bar with an ETA is drawn on
// stderr when it is a terminal (not with --quiet).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "importers/probe_trace_import.h"

namespace CLI {
class App;
}

namespace petrsim {

struct ImportFlags {
  std::vector<std::string> infos;  // mmdet3d-infos: the pickles, in order
  std::string names;               // mmdet3d-infos: sub-dataset names, comma separated
  std::string dataroot;            // nuscenes
  std::string version = "v1.0-trainval";
  std::string split;  // comma separated
  std::string split_file;
  std::string output;
  std::string classes;  // comma separated; empty: the ten nuScenes classes
  std::string range;
  bool no_valid_flag = false;
  bool no_filter_empty_gt = false;
  uint32_t seq_split_num = 2;
  bool quiet = false;  // no progress bar
  // mmdet3d-config: the config (.py, .json, or a training log with mmcv's `Config:` block), the data root its
  // ann_file paths are joined to, the info files in ann_file's order (instead), and the GPU count.
  std::string config;
  std::string config_data_root;
  std::vector<std::string> config_infos;
  uint32_t gpus = 0;                  // 0: the config's
  std::string log;                    // --log: the job's training log (seed, release, ranks), beside a .py config
  std::string torch_version;          // --torch-version: the job's PyTorch release
  ProbeTraceImportFlags probe_trace;  // probe-trace
  // The import cache (base/run_record.h): the command line it is keyed by (main's argv
  // after the program name; empty: no cache), and --no-cache.
  std::vector<std::string> command_line;
  bool no_cache = false;
};

// Adds `import` with its sources to `app`; returns the `import` subcommand.
CLI::App* AddImportCommand(CLI::App& app, ImportFlags& flags);

// Runs the parsed `import` (after app.parse): writes the scenario, prints the summary to `out`,
// returns 0. Throws ScenarioError on bad input (exit 2 in main).
int RunImport(const CLI::App& import, const ImportFlags& flags, std::FILE* out);

}  // namespace petrsim
