#include "dist/node_map.h"

#include <algorithm>

#include "core/error.h"

namespace tessel::dist {

NodeMap::NodeMap(int world_size) : node_of_rank_(static_cast<std::size_t>(std::max(world_size, 1)), 0), names_{"local"} {}

NodeMap NodeMap::from_names(const std::vector<std::string>& names) {
  TESSEL_CHECK(!names.empty(), "NodeMap: no ranks");
  NodeMap map(static_cast<int>(names.size()));
  map.names_.clear();
  for (std::size_t r = 0; r < names.size(); ++r) {
    const auto it = std::find(map.names_.begin(), map.names_.end(), names[r]);
    map.node_of_rank_[r] = static_cast<int>(it - map.names_.begin());
    if (it == map.names_.end()) map.names_.push_back(names[r]);
  }
  map.num_nodes_ = static_cast<int>(map.names_.size());
  return map;
}

int NodeMap::node_of(int world_rank) const {
  TESSEL_CHECK(world_rank >= 0 && world_rank < world_size(), "NodeMap: rank {} outside a world of {}", world_rank,
               world_size());
  return node_of_rank_[static_cast<std::size_t>(world_rank)];
}

}  // namespace tessel::dist
