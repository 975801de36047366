// Where a rank started by a launcher learns who it is: torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or, in a Slurm job step (srun), Slurm's own
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the first host of SLURM_STEP_NODELIST). petrsim_train
// reads them when it is not given --nproc.
//
// Precedence: RANK set means torchrun's (torchrun under srun sets its own for each rank it
// starts, and they, not the srun task's, describe the rank). Otherwise Slurm's, in a job step
// only: the batch script itself also carries SLURM_PROCID=0 and SLURM_NTASKS, and a rank started
// there by hand would wait for peers that never come. Under Slurm, MASTER_ADDR and MASTER_PORT
// still win when set (an sbatch script may export them); else the address is the first host of
// SLURM_STEP_NODELIST (SLURM_JOB_NODELIST if that is missing) and the port
// kSlurmPortBase + SLURM_JOB_ID % kSlurmPortSpan, the same for every task of the job.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace petrsim {

// The default rendezvous port of a Slurm job: 15000 + SLURM_JOB_ID % 15000 (15000..29999, below
// Linux's ephemeral ports, so that no outgoing connection holds it by chance).
inline constexpr uint32_t kSlurmPortBase = 15000;
inline constexpr uint32_t kSlurmPortSpan = 15000;

// An environment variable's value, or nullopt when it is not set: the process's (ProcessEnv) or,
// in tests, a table.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup ProcessEnv();

enum class Launcher { kTorchrun, kSlurm };

// One rank's place in a launched job.
struct LaunchEnv {
  Launcher launcher = Launcher::kTorchrun;
  uint32_t rank = 0;
  uint32_t world_size = 1;
  std::optional<uint32_t> local_rank;  // LOCAL_RANK or SLURM_LOCALID
  std::string master_addr;             // empty: not given (torchrun without MASTER_ADDR)
  uint16_t master_port = 0;
  std::string source;  // where the address and port came from, for messages
};

// Which launcher started this process, by the rule above; nullopt: none (nothing to read).
std::optional<Launcher> DetectLauncher(const EnvLookup& env);

// The rank's place, read by the rule above; nullopt when no launcher started it. Throws
// ScenarioError naming the variable, its value and what was expected: a number that is not a
// whole decimal within range (a rank >= the world size, a world size above `ranks_max`), a
// required variable missing (torchrun's RANK without WORLD_SIZE or MASTER_PORT; Slurm's
// SLURM_PROCID without SLURM_NTASKS, or without a node list when MASTER_ADDR is not set), a
// node list that is not a hostlist expression.
std::optional<LaunchEnv> ReadLaunchEnv(const EnvLookup& env, uint32_t ranks_max);

// What to tell a user who ran a rank with no launcher and no --nproc: the variables looked for,
// and, in a Slurm batch script outside any step, that the ranks are started with srun.
std::string NoLauncherMessage(const EnvLookup& env);

}  // namespace petrsim
