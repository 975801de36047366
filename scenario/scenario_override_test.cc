// `--set field.path=value` overrides: every value kind, oneof switching, list indexing and
// appending, all-or-nothing application, and the error messages for bad overrides.
#include "scenario/scenario_override.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_validation.h"

namespace petrsim {
namespace {

using google::protobuf::util::MessageDifferencer;

// Two sub-datasets (one of each source), a two-class filter list, the StreamPETR plan and an
// epoch-based job: enough structure for oneofs and repeated fields of both kinds.
Scenario Base() {
  return ParseScenario(R"pb(
                         name: "base"
                         dataset {
                           subdatasets {
                             name: "a"
                             explicit { scenes { gt_counts: [ 1, 0, 2 ] } }
                           }
                           subdatasets {
                             name: "b"
                             synthetic { scenes: 3 }
                           }
                         }
                         filters { classes: "car" classes: "pedestrian" }
                         plan { streampetr { decoder_layers: 6 } }
                         job { world_size: 2 epochs: 3 }
                       )pb",
                       "base.pbtxt");
}

// The message of the ScenarioError thrown by `override_text`, or "" (and a failure) when none.
std::string ErrorOf(Scenario& scenario, const std::string& override_text) {
  try {
    ApplyOverride(scenario, override_text);
  } catch (const ScenarioError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no ScenarioError for --set " << override_text;
  return "";
}

TEST(ScenarioOverrideTest, SetsScalarsOfEachKind) {
  Scenario scenario = Base();
  ApplyOverride(scenario, "job.world_size=64");              // uint32
  ApplyOverride(scenario, "comm.timeout_ms=600000");         // uint64
  ApplyOverride(scenario, "seed=18446744073709551615");      // uint64, its maximum
  ApplyOverride(scenario, "cost.jitter_fraction=0");         // double
  ApplyOverride(scenario, "filters.bev_range_min_m=-40.5");  // negative double
  ApplyOverride(scenario, "dataset.subdatasets[1].synthetic.boxes_per_frame_mean=2.5e1");
  ApplyOverride(scenario, "filters.use_valid_flag=false");  // bool by name
  ApplyOverride(scenario, "filters.filter_empty_gt=0");     // bool by digit
  ApplyOverride(scenario, "grouping.seq_mode=1");
  ApplyOverride(scenario, "name=what if: a=b");  // string, verbatim
  ApplyOverride(scenario, "description=");       // empty string

  EXPECT_EQ(scenario.job().world_size(), 64u);
  EXPECT_EQ(scenario.comm().timeout_ms(), 600000u);
  EXPECT_EQ(scenario.seed(), 18446744073709551615u);
  EXPECT_TRUE(scenario.cost().has_jitter_fraction());
  EXPECT_EQ(scenario.cost().jitter_fraction(), 0.0);
  EXPECT_EQ(scenario.filters().bev_range_min_m(), -40.5);
  EXPECT_EQ(scenario.dataset().subdatasets(1).synthetic().boxes_per_frame_mean(), 25.0);
  EXPECT_FALSE(scenario.filters().use_valid_flag());
  EXPECT_FALSE(scenario.filters().filter_empty_gt());
  EXPECT_TRUE(scenario.grouping().has_seq_mode());
  EXPECT_TRUE(scenario.grouping().seq_mode());
  EXPECT_EQ(scenario.name(), "what if: a=b");
  EXPECT_TRUE(scenario.has_description());
  EXPECT_EQ(scenario.description(), "");
}

TEST(ScenarioOverrideTest, SetsEnumsByNameAndNumber) {
  Scenario scenario = Base();
  ApplyOverride(scenario, "resample.policy=global");
  EXPECT_EQ(scenario.resample().policy(), Resample::global);
  ApplyOverride(scenario, "resample.policy=2");
  EXPECT_EQ(scenario.resample().policy(), Resample::next_valid_in_group);
  ApplyOverride(scenario, "comm.backend=gloo");
  EXPECT_EQ(scenario.comm().backend(), Comm::gloo);
  ApplyOverride(scenario, "sampler.kind=1");
  EXPECT_EQ(scenario.sampler().kind(), Sampler::distributed_group);
  ApplyOverride(scenario, "dataset.subdatasets[1].synthetic.plants[0].part=second_half");
  EXPECT_EQ(scenario.dataset().subdatasets(1).synthetic().plants(0).part(), EmptyPlant::second_half);
}

TEST(ScenarioOverrideTest, SetsFieldsOfNestedMessagesCreatingThem) {
  Scenario scenario = Base();
  ASSERT_FALSE(scenario.has_cost());
  ApplyOverride(scenario, "cost.sample_load_ns=5");
  EXPECT_TRUE(scenario.has_cost());
  EXPECT_EQ(scenario.cost().sample_load_ns(), 5u);
  ApplyOverride(scenario, "plan.streampetr.decoder_layers=3");
  EXPECT_EQ(scenario.plan().streampetr().decoder_layers(), 3u);
  ApplyOverride(scenario, "dataset.subdatasets[1].synthetic.scenes=200");
  EXPECT_EQ(scenario.dataset().subdatasets(1).synthetic().scenes(), 200u);
}

TEST(ScenarioOverrideTest, ScalarOneofMemberSelectsItsCase) {
  Scenario scenario = Base();
  ASSERT_EQ(scenario.job().length_case(), Job::kEpochs);
  ApplyOverride(scenario, "job.iterations=100");
  EXPECT_EQ(scenario.job().length_case(), Job::kIterations);
  EXPECT_EQ(scenario.job().iterations(), 100u);
  EXPECT_FALSE(scenario.job().has_epochs());
  ApplyOverride(scenario, "job.epochs=24");
  EXPECT_EQ(scenario.job().length_case(), Job::kEpochs);
  EXPECT_EQ(scenario.job().epochs(), 24u);
}

TEST(ScenarioOverrideTest, EnteringAMessageOneofMemberSelectsItsCase) {
  Scenario scenario = Base();
  ApplyOverride(scenario, "plan.custom.checkpoint_interval=7");
  EXPECT_EQ(scenario.plan().plan_case(), IterationPlan::kCustom);
  EXPECT_EQ(scenario.plan().custom().checkpoint_interval(), 7u);

  ASSERT_EQ(scenario.dataset().subdatasets(0).source_case(), SubDataset::kExplicit);
  ApplyOverride(scenario, "dataset.subdatasets[0].synthetic.scenes=4");
  EXPECT_EQ(scenario.dataset().subdatasets(0).source_case(), SubDataset::kSynthetic);
  EXPECT_EQ(scenario.dataset().subdatasets(0).synthetic().scenes(), 4u);
  EXPECT_EQ(scenario.dataset().subdatasets(0).name(), "a");
}

TEST(ScenarioOverrideTest, RepeatedMessagesAreIndexedAndAppendedAtTheEnd) {
  Scenario scenario = Base();
  ApplyOverride(scenario, "faults[0].dead_rank.rank=1");
  ApplyOverride(scenario, "faults[1].slow_rank.factor=3");
  ApplyOverride(scenario, "faults[0].dead_rank.at_ns=500");
  ASSERT_EQ(scenario.faults_size(), 2);
  EXPECT_EQ(scenario.faults(0).dead_rank().rank(), 1u);
  EXPECT_EQ(scenario.faults(0).dead_rank().at_ns(), 500u);
  EXPECT_EQ(scenario.faults(1).kind_case(), Fault::kSlowRank);
  EXPECT_EQ(scenario.faults(1).slow_rank().factor(), 3.0);

  ApplyOverride(scenario, "dataset.subdatasets[2].name=c");
  ASSERT_EQ(scenario.dataset().subdatasets_size(), 3);
  EXPECT_EQ(scenario.dataset().subdatasets(2).name(), "c");
  ApplyOverride(scenario, "dataset.subdatasets[0].explicit.scenes[1].gt_counts=5");
  ASSERT_EQ(scenario.dataset().subdatasets(0).explicit_().scenes_size(), 2);
  EXPECT_EQ(scenario.dataset().subdatasets(0).explicit_().scenes(1).gt_counts(0), 5u);
}

TEST(ScenarioOverrideTest, RepeatedScalarsTakeAnIndexOrTheWholeList) {
  Scenario scenario = Base();
  ApplyOverride(scenario, "filters.classes[1]=bus");
  ApplyOverride(scenario, "filters.classes[2]=truck");
  EXPECT_EQ(std::vector<std::string>(scenario.filters().classes().begin(), scenario.filters().classes().end()),
            (std::vector<std::string>{"car", "bus", "truck"}));

  ApplyOverride(scenario, "filters.classes=barrier,bicycle");
  EXPECT_EQ(std::vector<std::string>(scenario.filters().classes().begin(), scenario.filters().classes().end()),
            (std::vector<std::string>{"barrier", "bicycle"}));

  const std::string gt_counts = "dataset.subdatasets[0].explicit.scenes[0].gt_counts";
  ApplyOverride(scenario, gt_counts + "=4,0,0,7");
  const auto& counts = scenario.dataset().subdatasets(0).explicit_().scenes(0).gt_counts();
  EXPECT_EQ(std::vector<uint32_t>(counts.begin(), counts.end()), (std::vector<uint32_t>{4, 0, 0, 7}));

  ApplyOverride(scenario, "filters.classes=");
  EXPECT_EQ(scenario.filters().classes_size(), 0);
}

struct BadOverride {
  std::string text;
  std::string expected;  // a fragment of the message
};

TEST(ScenarioOverrideTest, BadOverridesAreRejectedWithPathExpectationAndValue) {
  const std::vector<BadOverride> cases = {
      {"job.world_size", "--set job.world_size: expected field.path=value, found no '='"},
      {"=5", "empty field path"},
      {"resample.polcy=global",
       "--set resample.polcy=global: no field 'polcy' in petrsim.Resample; fields: policy, "
       "attempts_max, pipeline_draws_per_attempt"},
      {"job.world_size=abc", "--set job.world_size=abc: job.world_size expects an unsigned 32-bit integer, got 'abc'"},
      {"job.world_size=12x", "job.world_size expects an unsigned 32-bit integer, got '12x'"},
      {"job.world_size=-1", "job.world_size expects an unsigned 32-bit integer, got '-1'"},
      {"job.world_size=+8", "expects an unsigned 32-bit integer, got '+8'"},
      {"job.world_size= 8", "expects an unsigned 32-bit integer, got ' 8'"},
      {"job.world_size=", "expects an unsigned 32-bit integer, got ''"},
      {"job.world_size=4294967296", "got '4294967296' (out of range)"},
      {"comm.timeout_ms=18446744073709551616",
       "comm.timeout_ms expects an unsigned 64-bit integer, got '18446744073709551616' (out of "
       "range)"},
      {"cost.jitter_fraction=nan", "cost.jitter_fraction expects a finite number, got 'nan'"},
      {"cost.jitter_fraction=inf", "got 'inf' (infinite)"},
      {"cost.jitter_fraction=1e999", "got '1e999' (out of range)"},
      {"cost.jitter_fraction=0.5x", "expects a finite number, got '0.5x'"},
      {"cost.jitter_fraction= 0.5", "expects a finite number, got ' 0.5'"},
      {"filters.use_valid_flag=yes", "expects true, false, 1 or 0, got 'yes'"},
      {"resample.policy=globl",
       "resample.policy expects one of in_group, global, next_valid_in_group, drop_empty_groups, "
       "bounded, keep_empty, in_subdataset or its number, got 'globl'"},
      {"resample.policy=99", "got '99'"},
      {"job=8", "job is a message (petrsim.Job); set one of its fields: world_size, samples_per_gpu"},
      {"dataset.subdatasets[0]=x", "dataset.subdatasets[0] is a message (petrsim.SubDataset)"},
      {"job.world_size.x=1", "job.world_size is an unsigned 32-bit integer, not a message, so it has no field 'x'"},
      {"job.bogus.x=1", "no field 'bogus' in petrsim.Job; fields: world_size,"},
      {"dataset.subdatasets.name=x",
       "dataset.subdatasets is a list of petrsim.SubDataset; set a field of one element, "
       "dataset.subdatasets[i].<field>, with <field> one of: name, explicit, synthetic"},
      {"dataset.subdatasets[3].name=x",
       "dataset.subdatasets has 2 elements; index 3 is out of range (index 2 appends one)"},
      {"filters.classes[5]=car", "filters.classes has 2 elements; index 5 is out of range"},
      {"job[0].world_size=1", "job is not a list; drop the index [0]"},
      {"job..world_size=1", "empty field name in 'job..world_size'"},
      {"job.=1", "empty field name in 'job.'"},
      {"dataset.subdatasets[x].name=a", "bad path segment 'subdatasets[x]'"},
      {"dataset.subdatasets[-1].name=a", "bad path segment 'subdatasets[-1]'"},
      {"dataset.subdatasets[0.name=a", "bad path segment 'subdatasets[0'"},
      {"dataset.subdatasets[0].explicit.scenes[0].gt_counts=1,x,3",
       "dataset.subdatasets[0].explicit.scenes[0].gt_counts[1] expects an unsigned 32-bit "
       "integer, got 'x'"},
  };
  EXPECT_GE(cases.size(), 12u);
  for (const BadOverride& bad : cases) {
    SCOPED_TRACE(bad.text);
    Scenario scenario = Base();
    const std::string message = ErrorOf(scenario, bad.text);
    EXPECT_NE(message.find(bad.expected), std::string::npos) << "expected \"" << bad.expected << "\" in:\n" << message;
  }
}

// Navigation appends elements and switches oneof cases before the value is parsed; a rejected
// override must not leave those behind.
TEST(ScenarioOverrideTest, RejectedOverridesLeaveTheScenarioUnchanged) {
  const Scenario base = Base();
  Scenario scenario = base;
  ErrorOf(scenario, "dataset.subdatasets[2].synthetic.scenes=many");
  ErrorOf(scenario, "plan.custom.checkpoint_interval=-1");
  ErrorOf(scenario, "dataset.subdatasets[0].explicit.scenes[0].gt_counts=1,2,");  // cleared first
  EXPECT_TRUE(MessageDifferencer::Equals(scenario, base)) << scenario.DebugString();

  try {
    ApplyOverrides(scenario, {"job.world_size=32", "job.samples_per_gpu=lots"});
    ADD_FAILURE() << "no ScenarioError";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find("job.samples_per_gpu"), std::string::npos);
  }
  EXPECT_TRUE(MessageDifferencer::Equals(scenario, base)) << scenario.DebugString();
}

// Overrides are not validated on their own: the caller re-validates, and an invalid result is
// reported with the usual field path, rule and value.
TEST(ScenarioOverrideTest, InvalidResultIsCaughtByValidation) {
  Scenario scenario = Base();
  ApplyOverride(scenario, "job.world_size=0");
  const std::vector<std::string> violations = FindScenarioViolations(scenario);
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations.front().find("job.world_size: must be in [1, 65536], got 0"), std::string::npos)
      << violations.front();
  EXPECT_THROW(ValidateScenario(scenario, "base.pbtxt"), ScenarioError);
}

TEST(ScenarioOverrideTest, AppliesToTheShippedSeedScenario) {
  Scenario scenario = LoadScenarioFile(std::string(PETRSIM_SOURCE_DIR) + "/scenarios/streampetr_trainval_hang.pbtxt");
  ASSERT_EQ(scenario.resample().policy(), Resample::in_group);
  ASSERT_EQ(scenario.job().world_size(), 4u);  // the ranks the seed job's real log shows
  const Scenario before = scenario;

  ApplyOverrides(scenario, {"resample.policy=global", "job.world_size=16"});
  EXPECT_EQ(scenario.resample().policy(), Resample::global);
  EXPECT_EQ(scenario.job().world_size(), 16u);
  EXPECT_NO_THROW(ValidateScenario(scenario, "streampetr_trainval_hang.pbtxt"));

  // Nothing else moved.
  Scenario expected = before;
  expected.mutable_resample()->set_policy(Resample::global);
  expected.mutable_job()->set_world_size(16);
  EXPECT_TRUE(MessageDifferencer::Equals(scenario, expected));
}

// Issue 33, point 4: a --set value is text; bytes that are not UTF-8 are refused, escaped, with the offset (they
// aborted every --json before).
TEST(ScenarioOverrideTest, RefusesBytesThatAreNotUtf8) {
  Scenario scenario;
  EXPECT_EQ(ErrorOf(scenario, "name=\xff\xfe"),
            "--set name=\\xff\\xfe: not text: invalid UTF-8 at byte 5 of 7 ('name=\\xff\\xfe'); expected UTF-8");
  EXPECT_NE(ErrorOf(scenario, "description=a\xed\xa0\x80").find("invalid UTF-8 at byte 13 of 16"), std::string::npos);
  EXPECT_FALSE(scenario.has_name());
  ApplyOverride(scenario, "name=caf\xc3\xa9");
  EXPECT_EQ(scenario.name(), "caf\xc3\xa9");
}

}  // namespace
}  // namespace petrsim
