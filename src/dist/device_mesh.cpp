#include "dist/device_mesh.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::dist {

DeviceMesh::DeviceMesh(MeshLayout layout, CommunicatorPtr world, c10::Device device)
    : layout_(std::move(layout)), world_(std::move(world)), device_(device) {
  TESSEL_CHECK(world_ != nullptr, "DeviceMesh needs a world communicator");
  if (world_->size() != layout_.world_size()) {
    throw Error(fmt::format("the mesh {} needs {} ranks but the world communicator has {}: "
                            "launch with -n {} or set cluster.num_nodes * "
                            "cluster.gpus_per_node to {}",
                            layout_.describe(), layout_.world_size(), world_->size(),
                            layout_.world_size(), world_->size()));
  }
  const int rank = world_->rank();
  // Same order on every rank: split is collective over the world.
  for (const auto& spec : MeshLayout::group_specs()) {
    const int color = layout_.group_index(spec.name, rank);
    const int key = layout_.rank_in_group(spec.name, rank);
    groups_.emplace(spec.name, world_->split(color, key, spec.name));
  }
}

const CommunicatorPtr& DeviceMesh::group(std::string_view name) const {
  auto it = groups_.find(name);
  if (it == groups_.end()) MeshLayout::group_spec(name);  // throws the listing error
  TESSEL_CHECK(it != groups_.end(), "mesh group '{}' was not created", name);
  return it->second;
}

int DeviceMesh::coordinate(std::string_view name) const {
  return layout_.rank_in_group(name, world_->rank());
}

std::vector<std::pair<std::string, CommunicatorPtr>> DeviceMesh::communicators() const {
  std::vector<std::pair<std::string, CommunicatorPtr>> out = {{"world", world_}};
  for (const auto& [name, group] : groups_) out.emplace_back(name, group);
  return out;
}

}  // namespace tessel::dist
