// Far3D's Argoverse 2 info files (importers/mmdet3d_infos.h): read as its Argoverse2DatasetT reads them, over the
// fixtures scripts/make_av2_fixtures.py writes in the converter's shapes (torch tensors, av2 poses, paths and pandas
// objects beside the annotations) with the counts it computes independently in av2_expected.json.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "importers/imported_dataset.h"
#include "importers/mmdet3d_infos.h"

namespace petrsim {
namespace {

const std::string kData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/importers/";

nlohmann::json Expected() {
  std::ifstream file(kData + "av2_expected.json");
  return nlohmann::json::parse(file);
}

ImportedSubDataset Read(const std::string& file, bool interval_test, bool use_valid_flag = false) {
  Mmdet3dInfosOptions options;
  options.use_valid_flag = use_valid_flag;
  options.interval_test = interval_test;
  return ReadMmdet3dInfos(kData + file, options);
}

// Far3D's filters (far3d.py:10,15-20, use_valid_flag=False, seq_split_num=2).
ImportFilters Far3dFilters(const nlohmann::json& expected, bool use_valid_flag = false) {
  ImportFilters filters;
  filters.classes = expected["classes"].get<std::vector<std::string>>();
  filters.bev_range_min_m = -152.4;
  filters.bev_range_max_m = 152.4;
  filters.use_valid_flag = use_valid_flag;
  filters.seq_split_num = 2;
  return filters;
}

void ExpectLike(const ImportedSubDataset& sub, const nlohmann::json& want, const ImportFilters& filters) {
  std::vector<std::string> timestamps;
  for (const ImportedFrame& frame : sub.frames) timestamps.push_back(std::to_string(frame.timestamp));
  EXPECT_EQ(timestamps, want["timestamps"].get<std::vector<std::string>>());
  std::vector<std::string> scenes;
  std::vector<uint32_t> scene_frames;
  for (const ImportedScene& scene : sub.scenes) {
    scenes.push_back(sub.frames[scene.frame_begin].scene_token);
    scene_frames.push_back(scene.frame_end - scene.frame_begin);
  }
  EXPECT_EQ(scenes, want["scenes"].get<std::vector<std::string>>());
  EXPECT_EQ(scene_frames, want["scene_frames"].get<std::vector<uint32_t>>());
  const ImportCounts counts = Summarize({sub}, filters).total;
  EXPECT_EQ(counts.frames, sub.frames.size());
  EXPECT_EQ(counts.boxes, want["boxes"].get<uint64_t>());
  EXPECT_EQ(counts.boxes_kept, want["boxes_kept"].get<uint64_t>());
  EXPECT_EQ(counts.groups, want["groups"].get<uint64_t>());
  EXPECT_EQ(counts.zero_gt_frames, want["zero_gt_frames"].get<uint64_t>());
  EXPECT_EQ(counts.zero_gt_groups, want["zero_gt_groups"].get<uint64_t>());
}

// argoverse2_dataset.py:94-97 never sorts: the second log, recorded first, stays second.
TEST(SyntheticAv2Infos, FramesStayInFileOrderAndScenesFollowSceneId) {
  const nlohmann::json expected = Expected();
  const ImportedSubDataset sub = Read("mini_av2_infos_train.pkl", false);
  ASSERT_EQ(sub.frames.size(), 18u);
  EXPECT_GT(sub.frames[0].timestamp, sub.frames[6].timestamp) << "not sorted by timestamp";
  ASSERT_EQ(sub.scenes.size(), 3u);
  EXPECT_EQ(sub.scenes[1].name, "1f1d0d6f-8b71-3c46-8e3c-d2e5b5d2b2a1") << "named by scene_id";
  EXPECT_EQ(sub.frames[0].token, "0b86f508-5df9-4a46-bc59-5b9536dbde9f/1315350000000000000");
  EXPECT_EQ(sub.scene_token_disagreements, 0u);
  ExpectLike(sub, expected["file_order"], Far3dFilters(expected));
  // The third log's second half: no GT after the filters, one chunk of seq_split_num=2.
  EXPECT_EQ(sub.frames[15].box_end - sub.frames[15].box_begin, 0u);
  EXPECT_EQ(Summarize({sub}, Far3dFilters(expected)).total.zero_gt_groups, 1u);
}

// argoverse2_dataset_t.py:27-31 reorders before _set_sequence_group_flag (:37, :44-55): every log comes back in runs.
TEST(SyntheticAv2Infos, IntervalTestReordersBeforeTheScenesAreCut) {
  const nlohmann::json expected = Expected();
  const ImportedSubDataset sub = Read("mini_av2_infos_train.pkl", true);
  ASSERT_EQ(sub.frames.size(), 18u);
  EXPECT_EQ(sub.scenes.size(), 15u);
  EXPECT_EQ(sub.scenes[3].name, "0b86f508-5df9-4a46-bc59-5b9536dbde9f (part 2)") << "a log seen again";
  ExpectLike(sub, expected["far3d"], Far3dFilters(expected));
}

// argoverse2_dataset.py:198-201: valid_flag with use_valid_flag, num_interior_pts > 0 without it.
TEST(SyntheticAv2Infos, UseValidFlagReadsGt3dInfosValidFlagElseInteriorPoints) {
  const nlohmann::json expected = Expected();
  const ImportedSubDataset flagged = Read("mini_av2_infos_valid_flag.pkl", false, true);
  ExpectLike(flagged, expected["valid_flag"], Far3dFilters(expected, true));
  EXPECT_EQ(flagged.boxes[flagged.frames[0].box_begin].valid_flag, 0) << "points, flagged invalid";
  EXPECT_EQ(flagged.boxes[flagged.frames[16].box_begin].valid_flag, 1) << "no points, flagged valid";
  const ImportedSubDataset counted = Read("mini_av2_infos_valid_flag.pkl", false, false);
  ExpectLike(counted, expected["valid_flag_num_interior_pts"], Far3dFilters(expected, false));
}

std::string ErrorOf(const std::string& file, bool use_valid_flag = false) {
  try {
    Read(file, false, use_valid_flag);
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(SyntheticAv2Infos, BadInfosNameTheFileTheInfoAndTheKey) {
  // The converter writes no valid_flag: use_valid_flag=True fails in Far3D with a KeyError.
  std::string error = ErrorOf("mini_av2_infos_train.pkl", true);
  EXPECT_NE(error.find("mini_av2_infos_train.pkl: infos[0].gt3d_infos: missing key 'valid_flag'"), std::string::npos)
      << error;
  const struct {
    const char* file;
    const char* where;
    const char* what;
  } cases[] = {
      {"no_gt3d_infos.pkl", "infos[2]: missing key 'gt3d_infos'", "test split"},
      {"boxes_list.pkl", "infos[1].gt3d_infos.gt_boxes: expected a float array", "found list of 2 items"},
      {"scene_id_int.pkl", "infos[1].scene_id: expected a str", "found int 7"},
      {"names_short.pkl", "infos[0].gt3d_infos.gt_names: expected a list of 3 str", "found list of 2 items"},
      {"points_float.pkl", "infos[2].gt3d_infos.num_interior_pts: expected an int array of shape (3,)",
       "float32 array"},
  };
  for (const auto& c : cases) {
    error = ErrorOf(std::string("bad_av2/") + c.file);
    EXPECT_NE(error.find(std::string("bad_av2/") + c.file + ": " + c.where), std::string::npos) << error;
    EXPECT_NE(error.find(c.what), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace petrsim
