// What each camera-3D codebase's train dataset does, as data (docs/design.md, "Workload semantics are
// data"): the importer looks an entry up by the config's dataset type (and the wrapper around it),
// and writes what the entry says into the scenario's grouping, filters, resample and sampler
// fields. No codebase gets a code path of its own. Every entry cites the upstream file:line it
// rests on (docs/research/camera3d_dataset_semantics.md has the reading behind each).
//
// When the config names a plugin (plugin=True, plugin_dir) and the user's checkout holds it, the
// importer reads the dataset class's own source instead (dataset_source.h) and starts from the entry
// of the class it derives from.
//
// Two codebases register the same class name (PETR's and StreamPETR's CustomNuScenesDataset are
// different classes): an entry may therefore name the config keys that tell them apart
// (`distinguishing_keys`); the lookup takes the first entry of that type whose keys the dataset
// dict sets, else the entry with no such keys.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

// How the sequence-group flags (the pools `_rand_another` draws from) are built.
enum class GroupFlags {
  kZeros,         // mmdet3d Custom3DDataset._set_group_flag: one group for the whole dataset
  kSeqModeSplit,  // StreamPETR: seq_mode + seq_split_num (int or 'all'), scenes cut at sweep-less frames
  kSeqFlagSplit,  // Sparse4D: with_seq_flag + sequences_split_num, the same cut under other key names
};

// Which pool `_rand_another` draws a replacement index from.
enum class ResamplePool {
  kFlagGroup,     // np.random.choice(np.where(self.flag == self.flag[idx])[0]): the frame's own group
  kWholeDataset,  // np.random.choice / randint over len(self): the whole (sub-)dataset
  kNoResample,    // no retry loop: a None goes to the collate function (the job crashes, it does not hang)
};

// The codebase's train script, which decides the sampler and the runner (the same dataset class is
// trained by different scripts in different codebases).
enum class TrainScript {
  // mmdet3d's train_model -> mmdet 2.x train_detector / build_dataloader (mmdet3d, PETR, BEVDet):
  // data.shuffler_sampler is never read; an EpochBasedRunner gets DistributedGroupSampler, an
  // IterBasedRunner mmdet's InfiniteGroupBatchSampler; `total_epochs` without `runner` becomes an
  // EpochBasedRunner.
  kMmdet3dTrainModel,
  // StreamPETR's (and Far3D's, byte-identical) custom_train_model: reads cfg.runner and
  // data.shuffler_sampler before anything else (a config without them fails with AttributeError);
  // the InfiniteGroupEachSampleInBatchSampler only with an IterBasedRunner, else the
  // shuffler_sampler's type (DistributedGroupSampler when None).
  kStreamPetrCustomTrain,
  // BEVFormer's: StreamPETR's builder without the infinite branch: data.shuffler_sampler's type.
  kBevformerCustomTrain,
  // Sparse4D's: no shuffler_sampler; an IterBasedRunner gets its InfiniteGroupEachSampleInBatchSampler
  // (which also skips and flips with numpy draws in the main process), else DistributedGroupSampler.
  kSparse4dCustomTrain,
};

struct DatasetSemantics {
  std::string type;      // the registered class name, e.g. "CustomNuScenesDataset"
  std::string codebase;  // e.g. "StreamPETR (exiawsh/StreamPETR)"
  // Keys of the dataset dict that identify this entry among entries of the same type (empty: the
  // fallback entry for the type).
  std::vector<std::string> distinguishing_keys;

  GroupFlags flags = GroupFlags::kZeros;
  std::string flags_source;
  ResamplePool pool = ResamplePool::kFlagGroup;
  std::string pool_source;
  // 0: the retry loop is unbounded (mmdet3d's `while True`); else at most this many loads, then an
  // error (mmengine's `range(self.max_refetch + 1)`).
  int64_t bounded_attempts = 0;
  // The bound is `range(self.max_refetch + max_refetch_offset)`: a `max_refetch` in the dataset dict
  // overrides the class's default.
  bool bounded_by_max_refetch = false;
  int64_t max_refetch_offset = 0;
  TrainScript script = TrainScript::kMmdet3dTrainModel;
  std::string script_source;

  // The dataset's None conditions: the GT check and its defaults.
  bool filter_empty_gt_default = true;
  std::string filter_empty_gt_source;
  bool use_valid_flag_default = false;
  std::string use_valid_flag_source;
  // The class list when the dict sets no `classes` (the dataset's CLASSES), and where it is.
  std::vector<std::string> default_classes;
  std::string default_classes_source;

  // Without sequence mode, prepare_train_data loads a queue of the frames before the index and returns
  // None when any of the queue's last `num_frame_losses` frames has no GT (StreamPETR's sliding
  // window): the importer reads num_frame_losses (and random_length) into filters.gt_required_frames.
  bool queue_checks_frame_losses = false;
  std::string queue_source;

  // What the entry knows it does not model, said in the import's notes (empty: nothing).
  std::string not_modelled;
};

// The entry for a dataset dict of type `type` whose keys are `keys`; nullptr for a type petrsim does
// not know.
const DatasetSemantics* FindDatasetSemantics(std::string_view type, std::span<const std::string> keys);
// Every known type, for messages ("expected one of ...").
std::vector<std::string_view> KnownDatasetTypes();

// The wrappers around a dataset that the importer unwraps (ConcatDataset, CBGSDataset, RepeatDataset,
// ...), with what each changes.
struct WrapperSemantics {
  std::string_view type;
  std::string_view inner_key;  // "dataset" or "datasets"
  std::string_view effect;     // for the import's notes
  std::string_view source;
};
const WrapperSemantics* FindWrapperSemantics(std::string_view type);

}  // namespace petrsim
