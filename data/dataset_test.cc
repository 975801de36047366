// Dataset construction: filters, chunks, ConcatDataset flags, prev_exists, synthetic data.
#include "data/dataset.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "base/error.h"
#include "tests/scenario_text.h"

namespace petrsim {
namespace {

using testing::ScenarioFromText;

const char* kTwoSubDatasets = R"pb(
  dataset {
    subdatasets {
      name: "train"
      explicit {
        scenes { gt_counts: [ 1, 1, 1, 1 ] }
        scenes { gt_counts: [ 1, 0, 1, 1, 1 ] }
      }
    }
    subdatasets {
      name: "val"
      explicit { scenes { gt_counts: [ 0, 0, 2 ] } }
    }
  }
  job { world_size: 1 samples_per_gpu: 1 }
)pb";

TEST(DatasetTest, ConcatenatesFlagsWithoutOffset) {
  const Dataset dataset = BuildDataset(ScenarioFromText(kTwoSubDatasets), "t");
  ASSERT_EQ(dataset.size(), 12);
  // train: scene 0 -> chunks [0,2) [2,4) groups 0,1; scene 1 (5 frames) -> [4,7) [7,9) groups 2,3.
  // val: one scene of 3 -> [9,11) [11,12) groups 0,1 again.
  EXPECT_EQ(dataset.groups_num(), 4);
  EXPECT_EQ(std::vector<int64_t>(dataset.group_indices(0).begin(), dataset.group_indices(0).end()),
            (std::vector<int64_t>{0, 1, 9, 10}));
  EXPECT_EQ(std::vector<int64_t>(dataset.group_indices(1).begin(), dataset.group_indices(1).end()),
            (std::vector<int64_t>{2, 3, 11}));
  EXPECT_EQ(dataset.group_of(10), 0);
  EXPECT_EQ(dataset.subdatasets()[1].begin, 9);
}

TEST(DatasetTest, PrevExistsResetsAtEveryChunkStartIncludingSubDatasetSwitch) {
  const Dataset dataset = BuildDataset(ScenarioFromText(kTwoSubDatasets), "t");
  const std::vector<bool> expected = {false, true, false, true, false, true, true, false, true, false, true, false};
  for (int64_t i = 0; i < dataset.size(); ++i) {
    EXPECT_EQ(dataset.frame(i).prev_exists, expected[i]) << "index " << i;
  }
}

TEST(DatasetTest, ResamplePoolIsTheSubDatasetChunkNotTheMergedGroup) {
  const Dataset dataset = BuildDataset(ScenarioFromText(kTwoSubDatasets), "t");
  const ChunkInfo& chunk = dataset.chunks()[dataset.frame(9).chunk];
  EXPECT_EQ(chunk.begin, 9);
  EXPECT_EQ(chunk.end, 11);
  EXPECT_EQ(chunk.accepted_frames, 0u);
  EXPECT_EQ(dataset.accepted_in(9, 11), 0);
  EXPECT_EQ(dataset.accepted_in(0, 12), 9);
}

TEST(DatasetTest, BoxFiltersApplyValidFlagClassAndStrictRange) {
  const Scenario scenario = ScenarioFromText(R"pb(
    dataset {
      subdatasets {
        explicit {
          scenes {
            frames {
              boxes { name: "car" x: 1 y: 1 num_lidar_pts: 3 }
              boxes { name: "car" x: 1 y: 1 num_lidar_pts: 0 num_radar_pts: 2 }
              boxes { name: "car" x: 1 y: 1 num_lidar_pts: 0 num_radar_pts: 0 }
              boxes { name: "animal" x: 1 y: 1 num_lidar_pts: 9 }
              boxes { name: "pedestrian" x: 51.2 y: 0 num_lidar_pts: 9 }
              boxes { name: "pedestrian" x: 0 y: -51.19 num_lidar_pts: 9 }
            }
          }
        }
      }
    }
    grouping { seq_mode: false }
    job { world_size: 1 samples_per_gpu: 1 }
  )pb");
  // Kept: the lidar car, the radar-only car (valid flag), the pedestrian inside the range.
  EXPECT_EQ(BuildDataset(scenario, "t").frame(0).gt_count, 3u);
  Scenario lidar_only = scenario;
  lidar_only.mutable_filters()->set_use_valid_flag(false);
  EXPECT_EQ(BuildDataset(lidar_only, "t").frame(0).gt_count, 2u);
  Scenario cars_only = scenario;
  cars_only.mutable_filters()->add_classes("car");
  EXPECT_EQ(BuildDataset(cars_only, "t").frame(0).gt_count, 2u);
}

TEST(DatasetTest, DropEmptyGroupsRemovesChunksAndRenumbersFlags) {
  Scenario scenario = ScenarioFromText(kTwoSubDatasets);
  scenario.mutable_resample()->set_policy(Resample::drop_empty_groups);
  const Dataset dataset = BuildDataset(scenario, "t");
  EXPECT_EQ(dataset.size(), 10);
  EXPECT_EQ(dataset.subdatasets()[1].chunks_dropped, 1u);
  EXPECT_EQ(dataset.subdatasets()[1].frames_dropped, 2u);
  // val's surviving chunk (one frame with GT) is now val's group 0.
  EXPECT_EQ(dataset.group_of(9), 0);
  EXPECT_EQ(dataset.frame(9).gt_count, 2u);
  EXPECT_FALSE(dataset.frame(9).prev_exists);
}

TEST(DatasetTest, SeqSplitAllMakesEveryFrameItsOwnGroup) {
  Scenario scenario = ScenarioFromText(kTwoSubDatasets);
  scenario.mutable_grouping()->clear_seq_split_num();
  scenario.mutable_grouping()->set_seq_split_all(true);
  const Dataset dataset = BuildDataset(scenario, "t");
  EXPECT_EQ(dataset.groups_num(), 9);  // train has 9 frames, val's 3 share groups 0..2
  for (const auto& frame : dataset.frames()) EXPECT_FALSE(frame.prev_exists);
}

TEST(DatasetTest, WithoutSeqModeEachSubDatasetIsOneGroup) {
  Scenario scenario = ScenarioFromText(kTwoSubDatasets);
  scenario.mutable_grouping()->set_seq_mode(false);
  scenario.mutable_grouping()->clear_seq_split_num();
  const Dataset dataset = BuildDataset(scenario, "t");
  EXPECT_EQ(dataset.groups_num(), 1);
  EXPECT_EQ(dataset.group_indices(0).size(), 12u);
  EXPECT_FALSE(dataset.frame(9).prev_exists);  // val's first frame: its own index 0
  EXPECT_TRUE(dataset.frame(4).prev_exists);   // the scene change does not reset without seq_mode
}

TEST(DatasetTest, KeepEmptyAcceptsEveryFrame) {
  Scenario scenario = ScenarioFromText(kTwoSubDatasets);
  scenario.mutable_resample()->set_policy(Resample::keep_empty);
  const Dataset dataset = BuildDataset(scenario, "t");
  EXPECT_EQ(dataset.accepted_frames(), dataset.size());
  EXPECT_FALSE(dataset.rejects_empty_frames());
}

TEST(DatasetTest, SceneTooShortForTheSplitIsRejectedLikeMmdet3d) {
  Scenario scenario = ScenarioFromText(kTwoSubDatasets);
  scenario.mutable_grouping()->set_seq_split_num(4);  // the 4-frame scene: 4 chunks of 1, fine;
  // the 5-frame scene: ceil(5/4) = 2 -> chunks 2+2+1 = 3 != 4.
  try {
    BuildDataset(scenario, "bad.pbtxt");
    FAIL() << "expected a ScenarioError";
  } catch (const ScenarioError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("bad.pbtxt: dataset.subdatasets[0] ('train') scene 1"), std::string::npos) << message;
    EXPECT_NE(message.find("mmdet3d asserts every scene yields exactly 4"), std::string::npos);
  }
}

TEST(SyntheticDatasetTest, IsDeterministicAndHitsFramesTotal) {
  const Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset a = BuildDataset(scenario, "a");
  const Dataset b = BuildDataset(scenario, "b");
  ASSERT_EQ(a.size(), 34149);
  EXPECT_EQ(a.subdatasets()[0].end, 28130);
  EXPECT_EQ(a.scenes().size(), 850u);
  EXPECT_EQ(a.groups_num(), 1400);
  for (int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a.frame(i).gt_count, b.frame(i).gt_count);
  for (const auto& scene : a.scenes()) {
    EXPECT_GE(scene.frames_given, 39u);
    EXPECT_LE(scene.frames_given, 41u);
  }
}

TEST(SyntheticDatasetTest, PlantedHalfSceneHasBoxesButNoGt) {
  const Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "t");
  const SceneInfo* planted = nullptr;
  for (const auto& scene : dataset.scenes()) {
    if (scene.name == "val-0110") planted = &scene;  // plants { scene: 110 part: second_half }
  }
  ASSERT_NE(planted, nullptr);
  const int64_t half = planted->begin + (planted->frames_given + 1) / 2;
  for (int64_t i = half; i < planted->end; ++i) {
    EXPECT_EQ(dataset.frame(i).gt_count, 0u);
    EXPECT_GT(dataset.frame(i).boxes, 0u);  // no_points: annotated, all invalid
  }
  EXPECT_GT(dataset.frame(planted->begin).gt_count, 0u);
}

TEST(SyntheticDatasetTest, ChangingTheSeedChangesTheBoxes) {
  Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset a = BuildDataset(scenario, "a");
  scenario.set_seed(2);
  const Dataset b = BuildDataset(scenario, "b");
  int differences = 0;
  for (int64_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    differences += a.frame(i).boxes != b.frame(i).boxes;
  }
  EXPECT_GT(differences, 1000);
}

}  // namespace
}  // namespace petrsim

namespace petrsim {
namespace {

TEST(DatasetTest, RangeFilterComparesInFloat32LikeMmdet3d) {
  // 51.19999999 rounds to 51.2f, which is not < 51.2f: mmdet3d drops the box.
  const Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset {
      subdatasets {
        explicit {
          scenes {
            frames {
              boxes { name: "car" x: 51.19999999 y: 0 num_lidar_pts: 1 }
              boxes { name: "car" x: 51.1999 y: 0 num_lidar_pts: 1 }
            }
          }
        }
      }
    }
    grouping { seq_mode: false }
    job { world_size: 1 samples_per_gpu: 1 }
  )pb");
  EXPECT_EQ(BuildDataset(scenario, "t").frame(0).gt_count, 1u);
}

TEST(DatasetTest, DropEmptyGroupsWithoutSeqModeDropsAnEmptySubDataset) {
  Scenario scenario = testing::ScenarioFromText(kTwoSubDatasets);
  scenario.mutable_grouping()->set_seq_mode(false);
  scenario.mutable_resample()->set_policy(Resample::drop_empty_groups);
  // val [0, 0, 2] has a frame with GT: kept whole.
  EXPECT_EQ(BuildDataset(scenario, "t").size(), 12);
  auto* val = scenario.mutable_dataset()->mutable_subdatasets(1)->mutable_explicit_();
  val->mutable_scenes(0)->set_gt_counts(2, 0);
  const Dataset dataset = BuildDataset(scenario, "t");
  EXPECT_EQ(dataset.size(), 9);
  EXPECT_EQ(dataset.subdatasets()[1].chunks_dropped, 1u);
  EXPECT_EQ(dataset.subdatasets()[1].frames_dropped, 3u);
  EXPECT_EQ(dataset.groups_num(), 1);
}

}  // namespace
}  // namespace petrsim

namespace petrsim {
namespace {

// A frame's boxes given as BoxColumns count exactly as the same boxes given as Box messages,
// under both use_valid_flag settings: class names in and out of filters.classes, centres at the
// range's float32 edges, boxes with no points, and stored valid flags that differ from the counts.
RC_GTEST_PROP(DatasetTest, BoxColumnsCountAsTheSameBoxes, ()) {
  const std::vector<std::string> names = {"car", "pedestrian", "animal", "barrier", "movable_object.debris"};
  const auto coordinate = rc::gen::oneOf(
      rc::gen::element(51.2f, -51.2f, std::nextafter(51.2f, 0.0f), std::nextafter(-51.2f, 0.0f), 0.0f, 60.0f),
      rc::gen::map(rc::gen::inRange(-6000, 6000), [](int v) { return static_cast<float>(v) / 100.0f; }));
  Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset {
      subdatasets {
        explicit {
          scenes {
            frames {}
            frames {}
          }
        }
      }
    }
    grouping { seq_mode: false }
    job { world_size: 1 samples_per_gpu: 1 }
  )pb");
  ExplicitData* data = scenario.mutable_dataset()->mutable_subdatasets(0)->mutable_explicit_();
  for (const std::string& name : names) data->add_class_names(name);
  Frame* as_boxes = data->mutable_scenes(0)->mutable_frames(0);
  BoxColumns* columns = data->mutable_scenes(0)->mutable_frames(1)->mutable_box_columns();
  const int n = *rc::gen::inRange(0, 40);
  const bool with_radar = *rc::gen::arbitrary<bool>();
  for (int b = 0; b < n; ++b) {
    const auto c = *rc::gen::inRange<uint32_t>(0, names.size());
    const float x = *coordinate;
    const float y = *coordinate;
    const uint32_t lidar = *rc::gen::element(0u, 0u, 1u, 7u);
    const uint32_t radar = with_radar ? *rc::gen::element(0u, 0u, 2u) : 0u;
    const bool differs = *rc::gen::element(false, false, true);
    Box* box = as_boxes->add_boxes();
    box->set_name(names[c]);
    box->set_x(x);
    box->set_y(y);
    box->set_num_lidar_pts(lidar);
    box->set_num_radar_pts(radar);
    if (differs) box->set_valid_flag(lidar + radar == 0);
    columns->add_class_index(c);
    columns->add_x(x);
    columns->add_y(y);
    columns->add_num_lidar_pts(lidar);
    if (with_radar) columns->add_num_radar_pts(radar);
    if (differs) columns->add_valid_flag_differs(static_cast<uint32_t>(b));
  }
  if (*rc::gen::arbitrary<bool>()) {
    scenario.mutable_filters()->add_classes("car");
    scenario.mutable_filters()->add_classes("barrier");
  }
  for (const bool use_valid_flag : {true, false}) {
    scenario.mutable_filters()->set_use_valid_flag(use_valid_flag);
    const Dataset dataset = BuildDataset(scenario, "t");
    RC_ASSERT(dataset.frame(0).gt_count == dataset.frame(1).gt_count);
    RC_ASSERT(dataset.frame(0).boxes == dataset.frame(1).boxes);
  }
}

TEST(DatasetTest, CircleRangeComparesTheFloat32DistanceLikeNumpy) {
  // Sparse4D's CircleObjectRangeFilter: sqrt(sum(center[:, :2] ** 2)) on float32 <= class_dist_thred. With
  // Debian's numpy 1.24, np.sqrt(np.sum(np.float32([[31.5, 1e-5]]) ** 2, axis=-1)) <= 31.5 is True (the
  // float64 distance, 31.500000000001588, is not): the box is kept. A class not listed is dropped.
  const Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset {
      subdatasets {
        explicit {
          scenes {
            frames {
              boxes { name: "car" x: 31.5 y: 1e-5 num_lidar_pts: 1 }
              boxes { name: "car" x: 31.5 y: 0.01 num_lidar_pts: 1 }
              boxes { name: "pedestrian" x: 1 y: 1 num_lidar_pts: 1 }
              boxes { name: "truck" x: 1 y: 1 num_lidar_pts: 1 }
            }
          }
        }
      }
    }
    filters {
      classes: [ "car", "pedestrian", "truck" ]
      circle_range { name: "car" max_m: 31.5 }
      circle_range { name: "pedestrian" max_m: 1.5 }
    }
    grouping { seq_mode: false }
    job { world_size: 1 samples_per_gpu: 1 }
  )pb");
  EXPECT_EQ(BuildDataset(scenario, "t").frame(0).gt_count, 2u) << "car at 31.5 (float32) and the pedestrian";
}

TEST(DatasetTest, GtRequiredFramesRejectsAFrameWhoseQueueHoldsAnEmptyFrame) {
  // StreamPETR's sliding window with num_frame_losses 2: frame i needs GT at i and at max(0, i - 1), by
  // sub-dataset index, across the scene boundary.
  Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset {
      subdatasets {
        explicit {
          scenes { gt_counts: [ 1, 1, 0, 1, 1 ] }
          scenes { gt_counts: [ 1, 0 ] }
        }
      }
      subdatasets { explicit { scenes { gt_counts: [ 1, 1 ] } } }
    }
    grouping { seq_mode: false }
    filters { gt_required_frames: 2 }
    job { world_size: 1 samples_per_gpu: 1 }
  )pb");
  const Dataset dataset = BuildDataset(scenario, "t");
  std::vector<bool> accepted;
  for (int64_t i = 0; i < dataset.size(); ++i) accepted.push_back(dataset.frame(i).accepted);
  EXPECT_EQ(accepted, (std::vector<bool>{true, true, false, false, true, true, false, true, true}));
}

}  // namespace
}  // namespace petrsim
