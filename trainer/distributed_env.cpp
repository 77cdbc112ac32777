// Launcher environments; see distributed_env.h.
#include "trainer/distributed_env.h"

#include <stdexcept>

namespace wavetrain {
namespace {

int integer(const EnvLookup& env, const std::string& name, int min, std::optional<int> fallback = std::nullopt) {
  const std::optional<std::string> v = env(name);
  if (!v) {
    if (fallback) return *fallback;
    throw std::invalid_argument(name + " is not set (the launcher's environment is incomplete)");
  }
  size_t used = 0;
  long n = 0;
  try {
    n = std::stol(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v->size() || v->empty() || n < min || n > 1000000)
    throw std::invalid_argument(name + "='" + *v + "' is not a whole number >= " + std::to_string(min));
  return static_cast<int>(n);
}

void check_rank(const DistributedEnv& d, const std::string& rank_var, const std::string& world_var) {
  if (d.rank >= d.world_size)
    throw std::invalid_argument(rank_var + "=" + std::to_string(d.rank) + " is not below " + world_var + "=" +
                                std::to_string(d.world_size));
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets.
  int depth = 0;
  size_t end = nodelist.size();
  for (size_t i = 0; i < nodelist.size(); ++i) {
    if (nodelist[i] == '[') ++depth;
    else if (nodelist[i] == ']') --depth;
    else if (nodelist[i] == ',' && depth == 0) {
      end = i;
      break;
    }
  }
  const std::string first = nodelist.substr(0, end);
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  const size_t close = first.find(']', open);
  if (close == std::string::npos) throw std::invalid_argument("SLURM node list '" + nodelist + "' has an unclosed '['");
  const std::string ranges = first.substr(open + 1, close - open - 1);
  const std::string start = ranges.substr(0, ranges.find_first_of(",-"));  // keeps zero padding: "07"
  return first.substr(0, open) + start + first.substr(close + 1);
}

std::optional<DistributedEnv> distributed_env(const EnvLookup& env) {
  DistributedEnv d;
  if (env("RANK")) {
    d.launcher = "torchrun";
    d.world_size = integer(env, "WORLD_SIZE", 1);
    d.rank = integer(env, "RANK", 0);
    d.local_rank = integer(env, "LOCAL_RANK", 0, d.rank);
    check_rank(d, "RANK", "WORLD_SIZE");
    d.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
    d.master_port = integer(env, "MASTER_PORT", 1, 29500);
    d.store_exists = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    if (d.world_size == 1) return std::nullopt;
    return d;
  }
  if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    d.launcher = "slurm";
    d.world_size = integer(env, "SLURM_NTASKS", 1);
    if (d.world_size == 1) return std::nullopt;  // one task: an ordinary single-process run
    d.rank = integer(env, "SLURM_PROCID", 0);
    d.local_rank = integer(env, "SLURM_LOCALID", 0, 0);
    check_rank(d, "SLURM_PROCID", "SLURM_NTASKS");
    const std::optional<std::string> nodes = env("SLURM_JOB_NODELIST") ? env("SLURM_JOB_NODELIST") : env("SLURM_NODELIST");
    if (!nodes) throw std::invalid_argument("SLURM_JOB_NODELIST is not set (needed for the master address)");
    d.master_addr = env("MASTER_ADDR").value_or(first_slurm_host(*nodes));
    d.master_port = integer(env, "MASTER_PORT", 1, 29500 + integer(env, "SLURM_JOB_ID", 0, 0) % 1000);
    return d;
  }
  return std::nullopt;
}

}  // namespace wavetrain
