// Where a rank is in a distributed run, read from its launcher's environment (a pure function of
// the environment, so every launcher's variables are testable here):
//
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
//              TORCHELASTIC_USE_AGENT_STORE=True: the agent already runs the store, every rank
//              connects to it as a client.
//   SLURM      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the master is the first host of
//              SLURM_JOB_NODELIST (or SLURM_NODELIST), e.g. "node[07-09],gpu1" -> "node07"; the port
//              is MASTER_PORT, else 29500 + SLURM_JOB_ID % 1000 so that jobs sharing a node differ.
//
// torchrun's variables win when both are present (torchrun inside an salloc).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace wavetrain {

struct DistributedEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool store_exists = false;  // TORCHELASTIC_USE_AGENT_STORE
  std::string launcher;       // "torchrun" or "slurm"
};

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// nullopt when no launcher started this process as one of several ranks. Throws
// std::invalid_argument naming the variable for values that are missing or out of range.
std::optional<DistributedEnv> distributed_env(const EnvLookup& env);

// The first host of a SLURM node list: "node[07-09,11],gpu[1-2]" -> "node07".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace wavetrain
