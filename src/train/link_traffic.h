// What a step sent between nodes: the bytes each mesh group's collectives
// sent to peers on the same node and on other nodes (the communicators'
// counters, dist/communicator.h), summed over all ranks. On one node
// everything is "same node"; across nodes, `other_node` is what crossed the
// inter-node links (payload; headers come on top), which is what HSDP saves.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dist/device_mesh.h"

namespace tessel::train {

struct NodeBytes {
  int64_t same_node = 0;
  int64_t other_node = 0;
};
using GroupBytes = std::map<std::string, NodeBytes>;  // mesh group name -> bytes

// This rank's cumulative sends per mesh group (the world included).
GroupBytes sent_bytes(const dist::DeviceMesh& mesh);
// after - before, per group.
GroupBytes difference(const GroupBytes& after, const GroupBytes& before);
// The values to gather from every rank, and their sum over ranks back into
// per-group figures (`flat` holds each rank's values one after another).
std::vector<int64_t> flatten(const GroupBytes& bytes);
GroupBytes sum_over_ranks(const GroupBytes& layout, const std::vector<int64_t>& flat);
int64_t total_other_node(const GroupBytes& bytes);

}  // namespace tessel::train
