// Where a layout's groups fall on the machines (`tessel mesh` with
// cluster.num_nodes > 1). Collectives inside a node use its fast links;
// a group that crosses nodes pays the network on every collective, so the
// question a person asks of a multi-node layout is which groups cross. Ranks
// are laid out node-major, as the launcher places them: node n holds ranks
// n * per_node .. (n + 1) * per_node - 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/mesh_layout.h"

namespace tessel::cli {

// One line per node listing its ranks, then one line per named group
// (MeshLayout::group_specs order) saying whether its groups stay inside a
// node, all cross nodes, or some do (naming those). When the world does not
// split evenly over `num_nodes`, one line saying so instead.
std::string node_picture(const dist::MeshLayout& layout, int64_t num_nodes);

// "0-3" for consecutive ranks, "0,4" otherwise.
std::string rank_span(const std::vector<int>& ranks);

}  // namespace tessel::cli
