// The job an mmdet3d 1.0 / mmcv 1.x training config describes (StreamPETR, PETR, BEVFormer, BEVDet, Sparse4D,
// Far3D, mmdet3d itself), as scenario fields: what `petrsim import mmdet3d-config` takes from a config read by
// formats/mmcv/config.h (never run).
//
// Data flow: Config (merged `_base_` chain, or a log's `Config:` block) → ConfigJob: the info files of the train
// dataset in ConcatDataset order with the filters the dataset applies to them, and a Scenario holding every
// non-dataset field the config sets (job, grouping, filters, resample, sampler, plan, comm, pipeline), with per field
// where its value came from (`file:line`, or the class default and the upstream file:line it rests on). The importer
// then reads the infos with those filters and lays the dataset under the scenario.
//
// What a dataset does is data (dataset_semantics.h, or the class's own source through dataset_source.h when the
// config names a plugin the checkout holds): its group flags, the pool of `_rand_another`, its retry loop, the
// defaults of its GT keys and CLASSES, and the train script that builds its sampler. The sections read, in order:
// - loader: data.samples_per_gpu (None is refused: mmdet's build_dataloader needs the count), data.workers_per_gpu;
// - world: --gpus (a note when it differs from the config's num_gpus that num_iters_per_epoch was computed for),
//   else `num_gpus`, else `gpu_ids` (a log's Config block);
// - train datasets: data.train through ConcatDataset, CBGSDataset and RepeatDataset (the inner dataset's loop
//   resamples) and `ann_file` lists; an unknown type is an error listing the known ones;
// - info paths: --infos, else ann_file under --data-root (the config's data_root replaced by it, compared by path
//   components), else as written;
// - grouping: seq_mode / seq_split_num (StreamPETR, Far3D) or with_seq_flag / sequences_split_num (Sparse4D), the
//   split written only in sequence mode (validation refuses it elsewhere); zeros elsewhere;
// - filters: filter_empty_gt and use_valid_flag with the class's defaults; test_mode=True never rejects a frame;
//   resample.policy from the pool (group: in_group, whole dataset: in_subdataset, a bounded loop: bounded);
//   StreamPETR's sliding window (num_frame_losses) → filters.gt_required_frames;
// - pipeline: ObjectNameFilter / InstanceNameFilter, ObjectRangeFilter (none: no range limit),
//   CircleObjectRangeFilter, ResizeCropFlipRotImage, GlobalRotScaleTransImage; other ops noted as drawing nothing;
// - classes: the dataset's (data.train.classes, else its CLASSES), cut to len(ObjectNameFilter.classes);
// - model: use_grid_mask, decoder layers, with_dn, find_unused_parameters, log and checkpoint intervals;
// - length: runner (IterBasedRunner.max_iters, EpochBasedRunner[_video].max_epochs), total_epochs without runner
//   where the train script turns it into an epoch runner (StreamPETR's fails with AttributeError: an error);
// - sampler: as the train script builds it (mmdet's never reads data.shuffler_sampler; StreamPETR's builds the
//   infinite sampler only for an IterBasedRunner; Sparse4D's picks by runner);
// - evaluation.interval (epochs for an epoch runner), dist_params.backend, seed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "formats/mmcv/config.h"
#include "importers/imported_dataset.h"
#include "proto/scenario.pb.h"

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
  // The release a training log's environment block names, and where ("train.log:7"); set by the import command.
  std::string log_torch_version, log_torch_version_from;
  std::vector<std::string> subdataset_names;
  // Far3D's Argoverse2DatasetT(interval_test=True) reorders its infos before the sequence flags
  // (argoverse2_dataset_t.py:27-31); the info reader applies it (Mmdet3dInfosOptions::interval_test).
  bool interval_test = false;
  // Per scenario field set: "job.world_size = 8  # cfg.py:21 (num_gpus)". In the order set.
  std::vector<std::string> provenance;
  std::vector<std::string> notes;  // what is not modelled or assumed
};

// Throws ScenarioError naming the config's file:line (or key path) and what was expected and found.
ConfigJob ReadConfigJob(const Config& config, const ConfigJobOptions& options);

}  // namespace petrsim
