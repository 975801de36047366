// The fixes `check` lists: each re-checked on the scenario with it applied (check/fixes.h).
#include "check/fixes.h"
#include "check/user_change.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tests/scenario_text.h"

namespace petrsim {
namespace {

struct Checked {
  Scenario scenario;
  Dataset dataset;
  CheckReport report;
  std::vector<Fix> fixes;
};

Checked CheckWithFixes(const Scenario& scenario) {
  Checked out{scenario, BuildDataset(scenario, "t"), {}, {}};
  out.report = RunPreflight(out.scenario, out.dataset);
  out.fixes = ProveFixes(out.scenario, out.dataset, "t", out.report);
  return out;
}

const Fix* Find(const std::vector<Fix>& fixes, const std::string& set) {
  const auto it = std::find_if(fixes.begin(), fixes.end(), [&](const Fix& fix) { return fix.set == set; });
  return it == fixes.end() ? nullptr : &*it;
}

std::vector<const Fix*> Drops(const std::vector<Fix>& fixes) {
  std::vector<const Fix*> out;
  for (const Fix& fix : fixes) {
    if (fix.kind == "drop_frames") out.push_back(&fix);
  }
  return out;
}

// One sub-dataset; scene "c"'s second chunk (frames 3..5) has no GT: in_group never leaves it.
constexpr const char* kEmptyChunk = R"pb(
  name: "t"
  dataset {
    subdatasets {
      name: "mini"
      explicit {
        scenes {
          name: "a"
          gt_counts: [ 3, 4, 0, 5, 2, 2 ]
        }
        scenes {
          name: "b"
          gt_counts: [ 1, 1, 1, 1 ]
        }
        scenes {
          name: "c"
          gt_counts: [ 2, 6, 1, 0, 0, 0 ]
        }
        scenes {
          name: "d"
          gt_counts: [ 7, 0, 7, 7, 7 ]
        }
      }
    }
  }
  grouping { seq_split_num: 2 }
  resample { policy: in_group }
  job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 40 seed: 0 }
)pb";

TEST(FixesTest, EmptyChunkInGroupHangsGlobalIsProven) {
  const Checked checked = CheckWithFixes(testing::ScenarioFromText(kEmptyChunk));
  // in_group (the scenario's policy) does not terminate ...
  EXPECT_FALSE(checked.report.terminates);
  EXPECT_TRUE(checked.report.job_fails);
  ASSERT_TRUE(NeedsFixes(checked.report));
  EXPECT_EQ(Find(checked.fixes, "resample.policy=in_group"), nullptr);  // not offered as its own fix
  // ... global does, as do the other unbounded policies and filter_empty_gt=false.
  for (const std::string set :
       {"resample.policy=global", "resample.policy=next_valid_in_group", "resample.policy=drop_empty_groups",
        "resample.policy=in_subdataset", "filters.filter_empty_gt=false"}) {
    const Fix* fix = Find(checked.fixes, set);
    ASSERT_NE(fix, nullptr) << set;
    EXPECT_TRUE(fix->proven) << set << ": " << fix->detail;
  }
  EXPECT_EQ(Find(checked.fixes, "resample.policy=global")->kind, "resample_policy");
  EXPECT_EQ(Find(checked.fixes, "filters.filter_empty_gt=false")->kind, "filter_empty_gt");
  EXPECT_NE(Find(checked.fixes, "resample.policy=drop_empty_groups")->detail.find("1 chunk(s) (3 frames) removed"),
            std::string::npos);

  // bounded raises its error on the pool: listed, and not a fix.
  const Fix* bounded = Find(checked.fixes, "resample.policy=bounded");
  ASSERT_NE(bounded, nullptr);
  EXPECT_FALSE(bounded->proven);
  EXPECT_NE(bounded->detail.find("gives up after 100 loads"), std::string::npos) << bounded->detail;

  // Removing the pool's frames from the info files: scene c keeps frames 0..2, which have GT.
  const auto drops = Drops(checked.fixes);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0]->set, "");
  EXPECT_EQ(drops[0]->subdataset_name, "mini");
  EXPECT_EQ(drops[0]->scene_name, "c");
  EXPECT_EQ(drops[0]->first_frame_in_scene, 3u);
  EXPECT_EQ(drops[0]->last_frame_in_scene, 5u);
  EXPECT_EQ(drops[0]->first_index, 13);
  EXPECT_EQ(drops[0]->last_index, 15);
  EXPECT_EQ(drops[0]->frames, 3u);
  EXPECT_TRUE(drops[0]->proven) << drops[0]->detail;

  // Applying a proven fix by hand gives a check that passes (what "proven" claims).
  Scenario fixed = checked.scenario;
  fixed.mutable_resample()->set_policy(Resample::global);
  EXPECT_FALSE(RunPreflight(fixed, BuildDataset(fixed, "t")).job_fails);
}

TEST(FixesTest, TerminatingScenarioHasNoFixes) {
  Scenario scenario = testing::ScenarioFromText(kEmptyChunk);
  // Scene c's second chunk gets a frame with GT.
  scenario.mutable_dataset()->mutable_subdatasets(0)->mutable_explicit_()->mutable_scenes(2)->set_gt_counts(4, 1);
  const Checked checked = CheckWithFixes(scenario);
  EXPECT_TRUE(checked.report.terminates);
  EXPECT_FALSE(checked.report.job_fails);
  EXPECT_FALSE(NeedsFixes(checked.report));
  EXPECT_TRUE(checked.fixes.empty());
  EXPECT_TRUE(FixLines(checked.fixes).empty());

  const Checked shipped = CheckWithFixes(testing::ShippedScenario("streampetr_trainval_hang_global.pbtxt"));
  EXPECT_FALSE(shipped.report.job_fails);
  EXPECT_TRUE(shipped.fixes.empty());
}

// Two sub-datasets; val's frames carry sample tokens and its scenes are named by nuScenes scene
// tokens (as `petrsim import mmdet3d-infos` names them). Two pools: the first half of val's
// second scene and the second half of train's first scene.
constexpr const char* kTwoPools = R"pb(
  name: "t"
  dataset {
    subdatasets {
      name: "train"
      explicit {
        scenes {
          name: "train-a"
          gt_counts: [ 1, 2, 3, 0, 0, 0 ]
        }
        scenes {
          name: "train-b"
          gt_counts: [ 1, 1, 1, 1 ]
        }
      }
    }
    subdatasets {
      name: "val"
      explicit {
        scenes {
          name: "0123456789abcdef0123456789abcdef"
          frames { token: "s0" gt_count: 3 }
          frames { token: "s1" gt_count: 1 }
          frames { token: "s2" gt_count: 2 }
          frames { token: "s3" gt_count: 1 }
        }
        scenes {
          name: "fedcba9876543210fedcba9876543210"
          frames { token: "t0" gt_count: 0 }
          frames { token: "t1" gt_count: 0 }
          frames { token: "t2" gt_count: 0 }
          frames { token: "t3" gt_count: 4 }
          frames { token: "t4" gt_count: 5 }
          frames { token: "t5" gt_count: 6 }
        }
      }
    }
  }
  grouping { seq_split_num: 2 }
  resample { policy: in_group }
  job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 40 seed: 0 }
)pb";

TEST(FixesTest, DropFramesNamesEachPool) {
  const Checked checked = CheckWithFixes(testing::ScenarioFromText(kTwoPools));
  ASSERT_EQ(checked.report.pools.size(), 2u);
  const auto drops = Drops(checked.fixes);
  ASSERT_EQ(drops.size(), 2u);

  const Fix& train = *drops[0];
  EXPECT_EQ(train.subdataset, 0u);
  EXPECT_EQ(train.subdataset_name, "train");
  EXPECT_EQ(train.scene_name, "train-a");
  EXPECT_EQ(train.scene_token, "");  // not a token
  EXPECT_EQ(train.first_frame_in_scene, 3u);
  EXPECT_EQ(train.last_frame_in_scene, 5u);
  EXPECT_EQ(train.first_index, 3);
  EXPECT_EQ(train.last_index, 5);
  EXPECT_EQ(train.first_sample_token, "");  // given as gt_counts: no tokens

  const Fix& val = *drops[1];
  EXPECT_EQ(val.subdataset, 1u);
  EXPECT_EQ(val.subdataset_name, "val");
  EXPECT_EQ(val.scene_name, "fedcba9876543210fedcba9876543210");
  EXPECT_EQ(val.scene_token, "fedcba9876543210fedcba9876543210");
  EXPECT_EQ(val.last_scene_name, val.scene_name);
  EXPECT_EQ(val.scenes_spanned, 1u);
  EXPECT_EQ(val.first_frame_in_scene, 0u);
  EXPECT_EQ(val.last_frame_in_scene, 2u);
  EXPECT_EQ(val.first_index, 14);  // train has 10 frames, val's first scene 4
  EXPECT_EQ(val.last_index, 16);
  EXPECT_EQ(val.frames, 3u);
  EXPECT_EQ(val.first_sample_token, "t0");
  EXPECT_EQ(val.last_sample_token, "t2");

  // Proven together: val's remaining frames t3..t5 have lidar sweeps, so StreamPETR appends them
  // to the previous scene; the detail says so.
  EXPECT_TRUE(train.proven) << train.detail;
  EXPECT_TRUE(val.proven) << val.detail;
  EXPECT_EQ(train.detail, val.detail);
  EXPECT_NE(val.detail.find("rebuilt without the 2 pools' 6 frames"), std::string::npos) << val.detail;
  EXPECT_NE(val.detail.find("join scene '0123456789abcdef0123456789abcdef'"), std::string::npos) << val.detail;

  const auto lines = FixLines(checked.fixes);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0],
            "fixes (each checked by re-running this check with it applied; --set is its what-if form, the line under "
            "it what you change):");
  // Every frame's sample token, by sub-dataset, for the data fix's script.
  ASSERT_EQ(val.sample_tokens.size(), 3u);
  EXPECT_EQ(val.sample_tokens[0], (std::pair<std::string, std::string>{"val", "t0"}));
  EXPECT_EQ(val.sample_tokens[2], (std::pair<std::string, std::string>{"val", "t2"}));
  // The shared result line is followed by the data change the user makes.
  const auto data_line = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.rfind("      data: drop the frames above from the info files", 0) == 0;
  });
  EXPECT_NE(data_line, lines.end());
  const auto val_line = std::find_if(lines.begin(), lines.end(), [](const std::string& line) {
    return line.find(
               "scene 'fedcba9876543210fedcba9876543210', frames 0..2 of the scene (dataset indices 14..16), "
               "sample tokens t0 .. t2") != std::string::npos;
  });
  ASSERT_NE(val_line, lines.end());
  ASSERT_NE(val_line + 1, lines.end());
  EXPECT_NE((val_line + 1)->find("proven: rebuilt without"), std::string::npos) << *(val_line + 1);
}

TEST(FixesTest, FixesThatDoNotTerminateAreListedUnproven) {
  // Scene e (8 frames) has GT in frame 0 only: its second chunk (4..7) is a pool. Removing it
  // leaves 4 frames, cut again into 0..1 and 2..3, and 2..3 has no GT; removing that leaves 0..1,
  // and frame 1 alone has none; removing it leaves one frame, which seq_split_num 2 cannot cut
  // into 2 chunks: mmdet3d's assertion fails when the real job builds the dataset.
  // Sub-dataset "blank" has no frame with GT at all: in_subdataset never leaves it.
  const Checked checked = CheckWithFixes(testing::ScenarioFromText(R"pb(
    name: "t"
    dataset {
      subdatasets {
        name: "main"
        explicit {
          scenes {
            name: "a"
            gt_counts: [ 1, 1, 1, 1 ]
          }
          scenes {
            name: "e"
            gt_counts: [ 1, 0, 0, 0, 0, 0, 0, 0 ]
          }
        }
      }
      subdatasets {
        name: "blank"
        explicit {
          scenes {
            name: "z"
            gt_counts: [ 0, 0 ]
          }
        }
      }
    }
    grouping { seq_split_num: 2 }
    resample { policy: in_group }
    job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 40 seed: 0 }
  )pb"));
  ASSERT_TRUE(NeedsFixes(checked.report));

  const Fix* in_subdataset = Find(checked.fixes, "resample.policy=in_subdataset");
  ASSERT_NE(in_subdataset, nullptr);
  EXPECT_FALSE(in_subdataset->proven);
  EXPECT_NE(in_subdataset->detail.find("1 pool(s) the resample loop can never leave remain (first: sub-dataset "
                                       "'blank', scene 'z', frames 0..1 of the scene)"),
            std::string::npos)
      << in_subdataset->detail;
  EXPECT_TRUE(Find(checked.fixes, "resample.policy=global")->proven);

  const auto drops = Drops(checked.fixes);
  ASSERT_EQ(drops.size(), 4u);  // e's second chunk, z's two one-frame chunks, then e's re-cut frames
  EXPECT_EQ(drops[0]->scene_name, "e");
  EXPECT_EQ(drops[0]->first_frame_in_scene, 4u);
  EXPECT_EQ(drops[0]->last_frame_in_scene, 7u);
  EXPECT_FALSE(drops[0]->recut);
  EXPECT_EQ(drops[1]->subdataset_name, "blank");
  EXPECT_EQ(drops[3]->scene_name, "e");
  EXPECT_TRUE(drops[3]->recut);
  EXPECT_EQ(drops[3]->first_frame_in_scene, 1u);
  EXPECT_EQ(drops[3]->last_frame_in_scene, 3u);
  for (const Fix* drop : drops) {
    EXPECT_FALSE(drop->proven) << drop->detail;
    EXPECT_NE(drop->detail.find("mmdet3d asserts every scene yields exactly 2"), std::string::npos) << drop->detail;
    EXPECT_NE(drop->detail.find("sub-dataset 'blank' is left without frames"), std::string::npos) << drop->detail;
  }
  const auto lines = FixLines(checked.fixes);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& line) {
                            return line.find(
                                       "not a fix: rebuilt without the 3 pools' 6 frames and the 3 frame(s) of "
                                       "the chunks that removing them re-cuts without GT (3 rebuilds)") !=
                                   std::string::npos;
                          }),
            1);  // one result line for the four drops
}

TEST(FixesTest, DropFramesAlsoDropsWhatTheRecutLeavesWithoutGt) {
  // Scene s: frames 3..11 have no GT. The pool is the second chunk, 6..11; removing it leaves
  // 6 frames, cut again into 0..2 and 3..5, and 3..5 has no GT: removed too, the scene is proven.
  const Checked checked = CheckWithFixes(testing::ScenarioFromText(R"pb(
    name: "t"
    dataset {
      subdatasets {
        name: "main"
        explicit {
          scenes {
            name: "a"
            gt_counts: [ 1, 1, 1, 1 ]
          }
          scenes {
            name: "s"
            gt_counts: [ 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 ]
          }
        }
      }
    }
    grouping { seq_split_num: 2 }
    resample { policy: in_group }
    job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 40 seed: 0 }
  )pb"));
  const auto drops = Drops(checked.fixes);
  ASSERT_EQ(drops.size(), 2u);
  EXPECT_FALSE(drops[0]->recut);
  EXPECT_EQ(drops[0]->first_frame_in_scene, 6u);
  EXPECT_EQ(drops[0]->last_frame_in_scene, 11u);
  EXPECT_EQ(drops[0]->first_index, 10);
  EXPECT_TRUE(drops[1]->recut);
  EXPECT_EQ(drops[1]->scene_name, "s");
  EXPECT_EQ(drops[1]->first_frame_in_scene, 3u);
  EXPECT_EQ(drops[1]->last_frame_in_scene, 5u);
  EXPECT_EQ(drops[1]->first_index, 7);
  EXPECT_EQ(drops[1]->last_index, 9);
  EXPECT_EQ(drops[1]->frames, 3u);
  for (const Fix* drop : drops) {
    EXPECT_TRUE(drop->proven) << drop->detail;
    EXPECT_NE(drop->detail.find("rebuilt without these 6 frame(s) and the 3 frame(s) of the chunks that removing "
                                "them re-cuts without GT (2 rebuilds): every getitem ends with a sample"),
              std::string::npos)
        << drop->detail;
  }
}

TEST(FixesTest, NothingFixesASamplerThatCannotBeBuilt) {
  // 8 sampler groups for a global batch of 16: StreamPETR's sampler asserts; no candidate
  // changes that, so none is proven, though the pool's frames go.
  Scenario scenario = testing::ScenarioFromText(kEmptyChunk);
  scenario.mutable_job()->set_samples_per_gpu(16);
  const Checked checked = CheckWithFixes(scenario);
  ASSERT_FALSE(checked.report.sampler_failure.empty());
  ASSERT_TRUE(NeedsFixes(checked.report));
  ASSERT_FALSE(checked.fixes.empty());
  for (const Fix& fix : checked.fixes) {
    EXPECT_FALSE(fix.proven) << fix.set;
    EXPECT_NE(fix.detail.find("cannot be built"), std::string::npos) << fix.detail;
  }
  EXPECT_NE(Find(checked.fixes, "resample.policy=global")->detail.find("the sampler still cannot be built"),
            std::string::npos);
  // drop_empty_groups removes a chunk: 7 groups, its own failure.
  EXPECT_NE(Find(checked.fixes, "resample.policy=drop_empty_groups")->detail.find("got 7 < 1 * 16"), std::string::npos);
}

TEST(FixesTest, SeedScenarioFixes) {
  const Checked checked = CheckWithFixes(testing::ShippedScenario("streampetr_trainval_hang.pbtxt"));
  ASSERT_TRUE(NeedsFixes(checked.report));
  EXPECT_TRUE(Find(checked.fixes, "resample.policy=global")->proven);
  EXPECT_TRUE(Find(checked.fixes, "resample.policy=next_valid_in_group")->proven);
  EXPECT_TRUE(Find(checked.fixes, "resample.policy=drop_empty_groups")->proven);
  EXPECT_FALSE(Find(checked.fixes, "resample.policy=bounded")->proven);
  EXPECT_TRUE(Find(checked.fixes, "filters.filter_empty_gt=false")->proven);
  // The fixes are checked on the dataset written out as GT counts: the same figures as checking
  // the shipped fixed scenarios, whose synthetic boxes are generated again.
  for (const std::string policy : {"global", "drop_empty_groups"}) {
    const Scenario shipped = testing::ShippedScenario("streampetr_trainval_hang_" + policy + ".pbtxt");
    const CheckReport direct = RunPreflight(shipped, BuildDataset(shipped, "t"));
    EXPECT_FALSE(direct.job_fails);
    char figures[128];
    std::snprintf(figures, sizeof(figures), "%.1f extra loads, %.1f stream breaks",
                  direct.statistics.extra_loads_per_epoch, direct.statistics.stream_breaks_per_epoch);
    const std::string detail = Find(checked.fixes, "resample.policy=" + policy)->detail;
    EXPECT_NE(detail.find(figures), std::string::npos) << detail << " vs " << figures;
  }
  const auto drops = Drops(checked.fixes);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0]->subdataset_name, "val");
  EXPECT_EQ(drops[0]->scene_name, "val-0110");
  EXPECT_EQ(drops[0]->first_index, checked.report.pools[0].first_frame);
  EXPECT_EQ(drops[0]->last_index, checked.report.pools[0].last_frame);
  EXPECT_TRUE(drops[0]->proven) << drops[0]->detail;
}

// Fixes as the change the user makes (check/user_change.h): against the user's own config when the scenario records
// where its values came from (Scenario.user_source, written by `petrsim import mmdet3d-config`), in general terms
// otherwise; nothing for a fix that is not proven.
TEST(UserChangeTest, FixesAreWrittenAsTheUsersChange) {
  Scenario scenario = testing::ScenarioFromText(R"pb(
    name: "t"
    dataset {
      subdatasets {
        name: "train"
        explicit {
          scenes {
            name: "a"
            gt_counts: [ 1, 1, 0, 0 ]
          }
        }
      }
      subdatasets {
        name: "val"
        explicit {
          scenes {
            name: "b"
            gt_counts: [ 1, 1, 1, 1 ]
          }
        }
      }
    }
    grouping { seq_mode: true seq_split_num: 2 }
    job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 50 }
  )pb");
  const Checked plain = CheckWithFixes(scenario);
  const Fix* filter = Find(plain.fixes, "filters.filter_empty_gt=false");
  ASSERT_NE(filter, nullptr);
  ASSERT_TRUE(filter->proven) << filter->detail;
  ASSERT_EQ(filter->change.size(), 1u);
  EXPECT_EQ(filter->change[0],
            "config: add filter_empty_gt=False to the train dataset's dict (data.train) (the dataset class's default "
            "is True)");
  const Fix* sub = Find(plain.fixes, "resample.policy=in_subdataset");
  ASSERT_NE(sub, nullptr);
  ASSERT_TRUE(sub->proven) << sub->detail;
  EXPECT_NE(sub->change.at(0).find("`return np.random.randint(0, len(self))`"), std::string::npos) << sub->change[0];
  // Two info files: a dataset's own _rand_another cannot reach the other one.
  const Fix* global = Find(plain.fixes, "resample.policy=global");
  ASSERT_NE(global, nullptr);
  EXPECT_NE(global->change.at(0).find("merge the 2 info files into one ann_file"), std::string::npos);
  for (const Fix& fix : plain.fixes) {
    if (!fix.proven) EXPECT_TRUE(fix.change.empty()) << fix.set;
  }

  UserSource& user = *scenario.mutable_user_source();
  user.set_config("cfg.py");
  user.set_dataset_dict("data.train");
  user.set_dataset_type("CustomNuScenesDataset");
  user.set_dataset_dict_where("cfg.py:30");
  user.set_filter_empty_gt_where("cfg.py:34");
  user.set_rand_another_where("projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:120");
  user.add_info_files("train.pkl");
  user.add_info_files("val.pkl");
  const Checked imported = CheckWithFixes(scenario);
  const Fix* edit = Find(imported.fixes, "filters.filter_empty_gt=false");
  ASSERT_NE(edit, nullptr);
  EXPECT_EQ(edit->change.at(0),
            "config: cfg.py:34: filter_empty_gt=True -> filter_empty_gt=False, in data.train "
            "(type='CustomNuScenesDataset', cfg.py:30)");
  EXPECT_NE(
      Find(imported.fixes, "resample.policy=in_subdataset")
          ->change.at(0)
          .find("in CustomNuScenesDataset._rand_another (projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:120)"),
      std::string::npos);
  const auto drops = Drops(imported.fixes);
  ASSERT_FALSE(drops.empty());
  EXPECT_NE(drops.back()->change.at(0).find("from the info files (train.pkl, val.pkl)"), std::string::npos);
}

// The data fix's script names each info file and its frames' tokens; without tokens it refuses to guess.
TEST(UserChangeTest, TheDropScriptNamesEachInfoFileAndItsTokens) {
  Scenario scenario = testing::ScenarioFromText(R"pb(
    name: "t"
    dataset {
      subdatasets {
        name: "train"
        explicit {
          scenes {
            name: "a"
            frames { gt_count: 1 token: "t0" }
            frames { gt_count: 1 token: "t1" }
            frames { gt_count: 0 token: "t2" }
            frames { gt_count: 0 token: "t3" }
          }
        }
      }
    }
    grouping { seq_mode: true seq_split_num: 2 }
    job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 50 }
    user_source { info_files: "infos/train.pkl" }
  )pb");
  const Checked checked = CheckWithFixes(scenario);
  std::vector<Fix> drops;
  for (const Fix* fix : Drops(checked.fixes)) drops.push_back(*fix);
  ASSERT_EQ(drops.size(), 1u);
  const std::string script = DropScript(scenario, drops, "s.pbtxt");
  EXPECT_NE(script.find("'info_file': 'infos/train.pkl'"), std::string::npos) << script;
  EXPECT_NE(script.find("            't2',\n            't3',\n"), std::string::npos) << script;
  EXPECT_EQ(script.find("'t1'"), std::string::npos) << script;

  scenario.clear_user_source();
  const std::string untokened = DropScript(scenario, drops, "s.pbtxt");
  EXPECT_NE(untokened.find("'info_file': None"), std::string::npos) << untokened;
}

}  // namespace
}  // namespace petrsim
