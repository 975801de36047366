// The job an mmdet3d / StreamPETR training config describes, as scenario fields (issue 18): what `petrsim import
// mmdet3d-config` takes from a config read by formats/mmcv/config.h (never run).
//
// Data flow: Config (merged `_base_` chain, or a log's `Config:` block) → ConfigJob: the info files of the train
// dataset in ConcatDataset order with the filters mmdet3d applies to them, and a Scenario holding every non-dataset
// field the config sets (job, grouping, filters, sampler, plan, comm, pipeline), with per field where its value came
// from (`file:line`, or the class default it rests on). The importer then reads the infos with those filters and
// lays the dataset under the scenario.
//
// What is read, and the defaults when a key is absent (the class defaults, read from source: mmdet3d v1.0.0rc6
// Custom3DDataset / NuScenesDataset, StreamPETR's CustomNuScenesDataset, mmdet 2.x build_dataloader, mmcv 1.x runners):
// - data.samples_per_gpu, data.workers_per_gpu → job.samples_per_gpu, job.workers_per_gpu;
// - the GPU count: --gpus, else the config's `num_gpus`, else `gpu_ids` (a log's Config block) → job.world_size;
// - data.train, through ConcatDataset(datasets=[...]) and an `ann_file` list (mmdet's build_dataset concatenates one
//   dataset per file, in order); CBGSDataset / RepeatDataset / ClassBalancedDataset wrappers are refused (they change
//   the sampling petrsim models); its type must be a nuScenes dataset; `ann_file` (joined to --data-root: the
//   config's `data_root` prefix is replaced by it), `seq_mode` (default False), `seq_split_num` (default 1; 'all'),
//   `filter_empty_gt` (default True, Custom3DDataset), `use_valid_flag` (default False, NuScenesDataset),
//   `queue_length`, `num_frame_losses` (recorded; seq_mode sets both to 1);
// - the train pipeline: ObjectNameFilter.classes (else `class_names`), ObjectRangeFilter.point_cloud_range,
//   ResizeCropFlipRotImage (training, data_aug_conf.rand_flip), GlobalRotScaleTransImage → pipeline.ops; ops known to
//   draw nothing are skipped; any other op is recorded as drawing nothing, with a note;
// - model.use_grid_mask and data_aug_conf.final_dim[0] → pipeline.grid_mask;
// - data.shuffler_sampler.type → sampler.kind (absent: mmdet's DistributedGroupSampler);
// - runner (IterBasedRunner.max_iters → job.iterations, EpochBasedRunner.max_epochs → job.epochs),
// `num_iters_per_epoch`
//   → job.iterations_per_epoch;
// - model.pts_bbox_head.transformer.decoder.num_layers, model.pts_bbox_head.with_dn → plan.streampetr;
//   find_unused_parameters → plan.ddp; log_config.interval, checkpoint_config.interval → plan.streampetr;
// - dist_params.backend → comm.backend; `seed` → job.seed (absent: mmdet draws a random seed; the log's
//   `Set random seed to S` names it: a note says so);
// - evaluation.interval: recorded; its hook's collectives are not modelled (a note when it falls within the job).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "importers/imported_dataset.h"
#include "formats/mmcv/config.h"
#include "model/scenario.pb.h"

namespace petrsim {

struct ConfigJobOptions {
  std::string data_root;           // --data-root: replaces the config's data_root in ann_file
  std::vector<std::string> infos;  // --infos: the info files, in ann_file's order (replaces ann_file)
  std::optional<uint32_t> gpus;    // --gpus
};

struct ConfigJob {
  Scenario scenario;                    // every non-dataset field the config sets
  ImportFilters filters;                // the filters the infos are read with
  std::vector<std::string> info_files;  // in ConcatDataset order
  // Per info file, how its path was found ("ann_file 'x.pkl' (cfg.py:40 (data.train.ann_file)) under
  // --data-root D", "--infos F"): a missing file's error says it.
  std::vector<std::string> info_file_origins;
  std::vector<std::string> subdataset_names;
  // Per scenario field set: "job.world_size = 8  # cfg.py:21 (num_gpus)". In the order set.
  std::vector<std::string> provenance;
  std::vector<std::string> notes;  // what is not modelled or assumed
};

// Throws ScenarioError naming the config's file:line (or key path) and what was expected and found.
ConfigJob ReadConfigJob(const Config& config, const ConfigJobOptions& options);

}  // namespace petrsim
