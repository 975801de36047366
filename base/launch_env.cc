// The launcher's environment of a rank; see launch_env.h.
#include "base/launch_env.h"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "base/error.h"
#include "base/hostlist.h"

namespace petrsim {
namespace {

// A variable as a whole decimal number in [min, max].
uint64_t EnvNumber(const std::string& name, const std::string& text, uint64_t min, uint64_t max) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || at != end || value < min || value > max) {
    throw ScenarioError(
        fmt::format("the environment variable {}={}: expected a whole number in [{}, {}]", name, text, min, max));
  }
  return value;
}

std::string Required(const EnvLookup& env, const std::string& name, std::string_view why) {
  const std::optional<std::string> value = env(name);
  if (!value) throw ScenarioError(fmt::format("the environment variable {} is not set: {}", name, why));
  return *value;
}

bool InSlurmStep(const EnvLookup& env) {
  return env("SLURM_PROCID").has_value() && (env("SLURM_STEP_ID").has_value() || env("SLURM_STEPID").has_value());
}

LaunchEnv ReadTorchrun(const EnvLookup& env, uint32_t ranks_max) {
  constexpr std::string_view kWhy = "RANK is set, so torchrun's WORLD_SIZE and MASTER_PORT are needed too";
  LaunchEnv launch;
  launch.launcher = Launcher::kTorchrun;
  launch.world_size = static_cast<uint32_t>(EnvNumber("WORLD_SIZE", Required(env, "WORLD_SIZE", kWhy), 1, ranks_max));
  launch.rank = static_cast<uint32_t>(EnvNumber("RANK", *env("RANK"), 0, launch.world_size - 1));
  if (const auto local = env("LOCAL_RANK")) {
    launch.local_rank = static_cast<uint32_t>(EnvNumber("LOCAL_RANK", *local, 0, ranks_max - 1));
  }
  launch.master_addr = env("MASTER_ADDR").value_or("");
  launch.master_port = static_cast<uint16_t>(EnvNumber("MASTER_PORT", Required(env, "MASTER_PORT", kWhy), 1, 65535));
  launch.source = "torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT";
  return launch;
}

LaunchEnv ReadSlurm(const EnvLookup& env, uint32_t ranks_max) {
  constexpr std::string_view kWhy = "SLURM_PROCID is set in a job step, so Slurm's SLURM_NTASKS is needed too";
  LaunchEnv launch;
  launch.launcher = Launcher::kSlurm;
  const std::string ntasks_name = env("SLURM_NTASKS") || !env("SLURM_NPROCS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  launch.world_size = static_cast<uint32_t>(EnvNumber(ntasks_name, Required(env, ntasks_name, kWhy), 1, ranks_max));
  launch.rank = static_cast<uint32_t>(EnvNumber("SLURM_PROCID", *env("SLURM_PROCID"), 0, launch.world_size - 1));
  if (const auto local = env("SLURM_LOCALID")) {
    launch.local_rank = static_cast<uint32_t>(EnvNumber("SLURM_LOCALID", *local, 0, ranks_max - 1));
  }
  std::string addr_from = "MASTER_ADDR";
  if (const auto addr = env("MASTER_ADDR")) {
    launch.master_addr = *addr;
  } else {
    addr_from = env("SLURM_STEP_NODELIST") || !env("SLURM_JOB_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
    const std::string nodes =
        Required(env, addr_from, "no MASTER_ADDR, so the rendezvous host is the first of the step's node list");
    launch.master_addr = FirstHostOfHostlist(nodes, addr_from);
  }
  std::string port_from = "MASTER_PORT";
  if (const auto port = env("MASTER_PORT")) {
    launch.master_port = static_cast<uint16_t>(EnvNumber("MASTER_PORT", *port, 1, 65535));
  } else {
    const std::string job = Required(env, "SLURM_JOB_ID", "no MASTER_PORT, so the port is derived from the job id");
    const uint64_t id = EnvNumber("SLURM_JOB_ID", job, 0, UINT64_MAX);
    launch.master_port = static_cast<uint16_t>(kSlurmPortBase + id % kSlurmPortSpan);
    port_from = fmt::format("{} + SLURM_JOB_ID % {}", kSlurmPortBase, kSlurmPortSpan);
  }
  launch.source = fmt::format("Slurm's SLURM_PROCID, {}, SLURM_LOCALID; address from {}, port from {}", ntasks_name,
                              addr_from, port_from);
  return launch;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<Launcher> DetectLauncher(const EnvLookup& env) {
  if (env("RANK")) return Launcher::kTorchrun;
  if (InSlurmStep(env)) return Launcher::kSlurm;
  return std::nullopt;
}

std::optional<LaunchEnv> ReadLaunchEnv(const EnvLookup& env, uint32_t ranks_max) {
  const std::optional<Launcher> launcher = DetectLauncher(env);
  if (!launcher) return std::nullopt;
  return *launcher == Launcher::kTorchrun ? ReadTorchrun(env, ranks_max) : ReadSlurm(env, ranks_max);
}

std::string NoLauncherMessage(const EnvLookup& env) {
  std::string message =
      "give --nproc N, or run one rank per process under a launcher: torchrun (RANK, WORLD_SIZE, MASTER_ADDR, "
      "MASTER_PORT, LOCAL_RANK) or Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_NODELIST)";
  if (env("SLURM_PROCID") && !InSlurmStep(env)) {
    message +=
        "; this is a Slurm batch script, not a job step (SLURM_PROCID is set, SLURM_STEP_ID is not): start the ranks "
        "with `srun petrsim train ...`";
  }
  return message;
}

}  // namespace petrsim
