// The launcher's environment of a rank (base/launch_env.h): torchrun's variables, Slurm's in a job
// step, the precedence between them, Slurm's address from the node list and port from the job id,
// and bad values named.
#include "base/launch_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/error.h"

namespace petrsim {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kRanksMax = 1024;

EnvLookup Table(std::map<std::string, std::string> table) {
  return [table = std::move(table)](const std::string& name) -> std::optional<std::string> {
    const auto it = table.find(name);
    if (it == table.end()) return std::nullopt;
    return it->second;
  };
}

// What srun sets for task `procid` of 4 on two nodes (2 per node), job 4242.
std::map<std::string, std::string> SrunTask(int procid) {
  return {{"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", std::to_string(procid % 2)},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"},
          {"SLURM_STEP_NODELIST", "gpu[07-08]"}};
}

TEST(LaunchEnvTest, NoLauncher) {
  EXPECT_EQ(ReadLaunchEnv(Table({}), kRanksMax), std::nullopt);
  EXPECT_EQ(DetectLauncher(Table({{"PATH", "/bin"}})), std::nullopt);
}

TEST(LaunchEnvTest, Torchrun) {
  const auto launch = ReadLaunchEnv(Table({{"RANK", "3"},
                                           {"WORLD_SIZE", "8"},
                                           {"LOCAL_RANK", "1"},
                                           {"MASTER_ADDR", "host1"},
                                           {"MASTER_PORT", "29500"}}),
                                    kRanksMax);
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(launch->launcher, Launcher::kTorchrun);
  EXPECT_EQ(launch->rank, 3u);
  EXPECT_EQ(launch->world_size, 8u);
  EXPECT_EQ(launch->local_rank, 1u);
  EXPECT_EQ(launch->master_addr, "host1");
  EXPECT_EQ(launch->master_port, 29500);
}

TEST(LaunchEnvTest, SlurmStepReadNatively) {
  const auto launch = ReadLaunchEnv(Table(SrunTask(3)), kRanksMax);
  ASSERT_TRUE(launch.has_value());
  EXPECT_EQ(launch->launcher, Launcher::kSlurm);
  EXPECT_EQ(launch->rank, 3u);
  EXPECT_EQ(launch->world_size, 4u);
  EXPECT_EQ(launch->local_rank, 1u);
  EXPECT_EQ(launch->master_addr, "gpu07");  // the first host of the step's node list
  EXPECT_EQ(launch->master_port, kSlurmPortBase + 4242 % kSlurmPortSpan);
  EXPECT_THAT(launch->source, HasSubstr("address from SLURM_STEP_NODELIST"));
}

TEST(LaunchEnvTest, EveryTaskOfAStepAgreesOnTheRendezvous) {
  const auto first = ReadLaunchEnv(Table(SrunTask(0)), kRanksMax);
  for (int procid = 1; procid < 4; ++procid) {
    const auto task = ReadLaunchEnv(Table(SrunTask(procid)), kRanksMax);
    EXPECT_EQ(task->master_addr, first->master_addr);
    EXPECT_EQ(task->master_port, first->master_port);
  }
}

TEST(LaunchEnvTest, SlurmStepNodeListBeforeTheJobs) {
  auto env = SrunTask(0);
  env["SLURM_JOB_NODELIST"] = "login1,gpu[07-08]";
  EXPECT_EQ(ReadLaunchEnv(Table(env), kRanksMax)->master_addr, "gpu07");
  env.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(ReadLaunchEnv(Table(env), kRanksMax)->master_addr, "login1");
}

TEST(LaunchEnvTest, MasterAddrAndPortWinUnderSlurm) {
  auto env = SrunTask(2);
  env["MASTER_ADDR"] = "10.0.0.5";
  env["MASTER_PORT"] = "23456";
  const auto launch = ReadLaunchEnv(Table(env), kRanksMax);
  EXPECT_EQ(launch->launcher, Launcher::kSlurm);
  EXPECT_EQ(launch->rank, 2u);
  EXPECT_EQ(launch->master_addr, "10.0.0.5");
  EXPECT_EQ(launch->master_port, 23456);
}

TEST(LaunchEnvTest, TorchrunUnderSrunWins) {
  // torchrun started by srun: the task's SLURM_* describe torchrun's agent, RANK the worker.
  auto env = SrunTask(1);
  env.insert(
      {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "gpu07"}, {"MASTER_PORT", "29400"}});
  const auto launch = ReadLaunchEnv(Table(env), kRanksMax);
  EXPECT_EQ(launch->launcher, Launcher::kTorchrun);
  EXPECT_EQ(launch->rank, 5u);
  EXPECT_EQ(launch->world_size, 8u);
  EXPECT_EQ(launch->master_port, 29400);
}

TEST(LaunchEnvTest, TheBatchScriptIsNoStep) {
  // sbatch's batch step sets SLURM_PROCID=0 and SLURM_NTASKS, but no SLURM_STEP_ID.
  auto env = SrunTask(0);
  env.erase("SLURM_STEP_ID");
  EXPECT_EQ(ReadLaunchEnv(Table(env), kRanksMax), std::nullopt);
  EXPECT_THAT(NoLauncherMessage(Table(env)), HasSubstr("start the ranks with `srun petrsim train ...`"));
  EXPECT_THAT(NoLauncherMessage(Table({})), Not(HasSubstr("batch script")));
  env["SLURM_STEPID"] = "0";  // older Slurm's name
  EXPECT_EQ(ReadLaunchEnv(Table(env), kRanksMax)->launcher, Launcher::kSlurm);
}

// The message of the ScenarioError reading `env` raises.
std::string ErrorOf(const std::map<std::string, std::string>& env) {
  try {
    ReadLaunchEnv(Table(env), kRanksMax);
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(LaunchEnvTest, BadValuesAreNamed) {
  auto env = SrunTask(0);
  env["SLURM_PROCID"] = "4";
  EXPECT_EQ(ErrorOf(env), "the environment variable SLURM_PROCID=4: expected a whole number in [0, 3]");
  env = SrunTask(0);
  env["SLURM_NTASKS"] = "2x";
  EXPECT_EQ(ErrorOf(env), "the environment variable SLURM_NTASKS=2x: expected a whole number in [1, 1024]");
  env = SrunTask(0);
  env["SLURM_STEP_NODELIST"] = "gpu[07-";
  EXPECT_EQ(ErrorOf(env), "SLURM_STEP_NODELIST=gpu[07-: at column 8: expected a number in the bracket, got the end");
  env = SrunTask(0);
  env.erase("SLURM_NTASKS");
  EXPECT_THAT(ErrorOf(env), HasSubstr("SLURM_NTASKS is not set"));
  env = SrunTask(0);
  env.erase("SLURM_STEP_NODELIST");
  env.erase("SLURM_JOB_NODELIST");
  EXPECT_THAT(ErrorOf(env), HasSubstr("SLURM_STEP_NODELIST is not set: no MASTER_ADDR"));
  env = SrunTask(0);
  env.erase("SLURM_JOB_ID");
  EXPECT_THAT(ErrorOf(env), HasSubstr("SLURM_JOB_ID is not set: no MASTER_PORT"));
  EXPECT_EQ(ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}),
            "the environment variable MASTER_PORT=70000: expected a whole number in [1, 65535]");
  EXPECT_THAT(ErrorOf({{"RANK", "0"}, {"MASTER_PORT", "1234"}}), HasSubstr("WORLD_SIZE is not set"));
  EXPECT_EQ(ErrorOf({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}),
            "the environment variable RANK=-1: expected a whole number in [0, 1]");
}

}  // namespace
}  // namespace petrsim
