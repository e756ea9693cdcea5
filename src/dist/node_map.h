// Which node (machine) each world rank runs on, from the launch itself: ranks
// whose processor names (hostnames) are equal share a node. Nodes are
// numbered in order of their first rank. The communicators use it to count
// the bytes each collective sends to peers on the same node and on other
// nodes (CollectiveCounters), the figure that says what crosses the slow
// inter-node links (SPEC 4, HSDP).
#pragma once

#include <string>
#include <vector>

namespace tessel::dist {

class NodeMap {
 public:
  // Every rank on one node.
  explicit NodeMap(int world_size = 1);
  // names[r] is world rank r's processor name.
  static NodeMap from_names(const std::vector<std::string>& names);

  int world_size() const { return static_cast<int>(node_of_rank_.size()); }
  int num_nodes() const { return num_nodes_; }
  // Throws tessel::Error for a rank outside the world.
  int node_of(int world_rank) const;
  bool same_node(int world_rank_a, int world_rank_b) const { return node_of(world_rank_a) == node_of(world_rank_b); }
  const std::vector<std::string>& names() const { return names_; }  // one per node

 private:
  std::vector<int> node_of_rank_;
  std::vector<std::string> names_;
  int num_nodes_ = 1;
};

}  // namespace tessel::dist
