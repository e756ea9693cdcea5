// The bridge from a run's configuration to the device mesh: the typed
// policy.dtensor_cfg / cluster view (config::ParallelismConfig) becomes the
// sizes MeshLayout validates. It lives in the CLI layer because dist/ must not
// depend on config/; every command that builds a mesh (mesh, train) uses it,
// so they agree on the world size and every size.
#pragma once

#include <optional>

#include "config/parallelism_config.h"
#include "dist/mesh_layout.h"

namespace tessel::cli {

// `world_size` overrides cluster.num_nodes * cluster.gpus_per_node (e.g. the
// size of the MPI world actually launched). UsageError for sizes beyond int.
dist::MeshSizes mesh_sizes_from(const config::ParallelismConfig& parallel,
                                std::optional<int64_t> world_size = std::nullopt);

}  // namespace tessel::cli
