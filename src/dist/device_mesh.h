// DeviceMesh: the communicators of a validated MeshLayout. It is the single
// authority on process groups for a run: FSDP, tensor parallelism, the data
// loader and the loss all take their group from one DeviceMesh passed to them
// explicitly (no global registry), so every part of a step agrees on who
// shards, who replicates and who splits the batch.
//
// Construction is collective over the world communicator: it splits one
// sub-communicator per named group (MeshLayout::group_specs(), in that fixed
// order), so every rank must construct its mesh at the same point.
#pragma once

#include <c10/core/Device.h>

#include <map>
#include <utility>
#include <vector>
#include <string>
#include <string_view>

#include "dist/communicator.h"
#include "dist/mesh_layout.h"

namespace tessel::dist {

class DeviceMesh {
 public:
  // `world` must have layout.world_size() ranks (tessel::Error otherwise,
  // naming both sizes: the launcher and the config disagree). `device`: where
  // this rank computes (SPEC 10; dist/device_world.h chooses it and the world
  // communicator that moves its tensors).
  DeviceMesh(MeshLayout layout, CommunicatorPtr world, c10::Device device = c10::Device(c10::kCPU));

  const MeshLayout& layout() const { return layout_; }
  const CommunicatorPtr& world() const { return world_; }
  // Where this rank's parameters, gradients, optimizer state and activations live.
  c10::Device device() const { return device_; }

  // The communicator of this rank's group of that name ("tp", "cp",
  // "dp_replicate", "dp_shard", "dp_shard_cp", "dp", "dp_cp"); UsageError
  // listing the names for an unknown one.
  const CommunicatorPtr& group(std::string_view name) const;
  // Ranks in each group of that name.
  int size(std::string_view name) const { return layout_.size(name); }
  // This rank's position in its group of that name; for a single dim ("tp",
  // "dp_shard", ...) that is its coordinate along the dim.
  int coordinate(std::string_view name) const;
  // The world and every group's communicator, by name, in a fixed order.
  std::vector<std::pair<std::string, CommunicatorPtr>> communicators() const;

 private:
  MeshLayout layout_;
  CommunicatorPtr world_;
  c10::Device device_;
  std::map<std::string, CommunicatorPtr, std::less<>> groups_;
};

}  // namespace tessel::dist
