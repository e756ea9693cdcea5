#include "cli/mesh_sizes_from_config.h"

#include <fmt/format.h>

#include <limits>

#include "core/error.h"

namespace tessel::cli {

namespace {

int narrow(int64_t value, const char* key) {
  if (value > std::numeric_limits<int>::max() || value < std::numeric_limits<int>::min()) {
    throw UsageError(fmt::format("{}={} is out of range for a process count", key, value));
  }
  return static_cast<int>(value);
}

}  // namespace

dist::MeshSizes mesh_sizes_from(const config::ParallelismConfig& p,
                                std::optional<int64_t> world_size) {
  dist::MeshSizes s;
  s.world_size = world_size ? narrow(*world_size, "world size")
                            : narrow(p.world_size(), "cluster.num_nodes * cluster.gpus_per_node");
  s.dp_replicate = narrow(p.dp_replicate_size, "policy.dtensor_cfg.dp_replicate_size");
  s.cp = narrow(p.context_parallel_size, "policy.dtensor_cfg.context_parallel_size");
  s.tp = narrow(p.tensor_parallel_size, "policy.dtensor_cfg.tensor_parallel_size");
  s.ep = narrow(p.expert_parallel_size, "policy.dtensor_cfg.expert_parallel_size");
  s.v2 = p.v2;
  return s;
}

}  // namespace tessel::cli
