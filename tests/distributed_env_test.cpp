// Launcher environments: torchrun's and SLURM's variables, their precedence, and their errors.
#include <gtest/gtest.h>

#include <map>

#include "trainer/distributed_env.h"

namespace wavetrain {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(DistributedEnv, Torchrun) {
  const auto d = distributed_env(env_of({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                         {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29600"},
                                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->launcher, "torchrun");
  EXPECT_EQ(d->rank, 3);
  EXPECT_EQ(d->world_size, 8);
  EXPECT_EQ(d->local_rank, 1);
  EXPECT_EQ(d->master_addr, "10.1.2.3");
  EXPECT_EQ(d->master_port, 29600);
  EXPECT_TRUE(d->store_exists);
  EXPECT_FALSE(distributed_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}})));  // one rank: not distributed
  EXPECT_FALSE(distributed_env(env_of({})));
}

TEST(DistributedEnv, SlurmWithTheMasterFromTheNodeList) {
  const auto d = distributed_env(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                         {"SLURM_JOB_NODELIST", "gpu[07-09,11],cpu1"}, {"SLURM_JOB_ID", "123456"}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->launcher, "slurm");
  EXPECT_EQ(d->rank, 5);
  EXPECT_EQ(d->local_rank, 1);
  EXPECT_EQ(d->master_addr, "gpu07");
  EXPECT_EQ(d->master_port, 29500 + 456);
  EXPECT_FALSE(distributed_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})));
  // torchrun inside an allocation: torchrun's variables win.
  const auto both = distributed_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"},
                                            {"SLURM_JOB_NODELIST", "n1"}}));
  EXPECT_EQ(both->launcher, "torchrun");
}

TEST(DistributedEnv, SlurmNodeLists) {
  EXPECT_EQ(first_slurm_host("node01"), "node01");
  EXPECT_EQ(first_slurm_host("node[01-04]"), "node01");
  EXPECT_EQ(first_slurm_host("node[3,5-6],other[1-2]"), "node3");
  EXPECT_EQ(first_slurm_host("a,b[1-2]"), "a");
  EXPECT_EQ(first_slurm_host("rack[2-3]-gpu"), "rack2-gpu");
  EXPECT_THROW(first_slurm_host("node[01-04"), std::invalid_argument);
}

TEST(DistributedEnv, ErrorsNameTheVariable) {
  auto error = [](std::map<std::string, std::string> vars) {
    try {
      distributed_env(env_of(std::move(vars)));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error({{"RANK", "0"}}), "WORLD_SIZE is not set (the launcher's environment is incomplete)");
  EXPECT_EQ(error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), "RANK=2 is not below WORLD_SIZE=2");
  EXPECT_EQ(error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), "RANK='x' is not a whole number >= 0");
  EXPECT_EQ(error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}),
            "SLURM_JOB_NODELIST is not set (needed for the master address)");
}

}  // namespace
}  // namespace wavetrain
