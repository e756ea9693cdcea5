// ShardSpec: how one parameter is laid out over the device mesh — its global
// shape plus an ordered list of (mesh dim name, Layout) placements, e.g.
// [tp: Shard(0), dp_shard_cp: Shard(0)] for a colwise weight under TP + FSDP.
// Placements apply in list order, each to the tensor the previous ones left on
// this rank (nested sharding: TP chunks the global tensor, then FSDP chunks dim
// 0 of the TP-local tensor). Since a chunk of a chunk is a contiguous range,
// every rank holds one box [offset, offset + shape) of the global tensor; the
// helpers here compute it with pure arithmetic (torch.chunk sizes, so boxes may
// be empty), which checkpoint loading, FSDP and TP share.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/layout.h"

namespace tessel::tensor {

struct Placement {
  std::string mesh_dim;  // e.g. "tp", "dp_shard_cp"
  Layout layout;
  friend bool operator==(const Placement&, const Placement&) = default;
};

// This rank's position in one mesh dimension's group.
struct GroupCoord {
  int size = 1;
  int rank = 0;
};
// Mesh dim name -> this rank's coordinate in it. Only dims that shard are
// looked up; Replicate and Partial placements do not change the local box.
using MeshCoords = std::map<std::string, GroupCoord>;

// The part of the global tensor one rank holds.
struct LocalBox {
  std::vector<int64_t> offset;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

class ShardSpec {
 public:
  // Shard dims may be negative (normalized against global_shape); a mesh dim
  // may appear only once. Throws tessel::Error on violations.
  ShardSpec(std::vector<int64_t> global_shape, std::vector<Placement> placements);

  const std::vector<int64_t>& global_shape() const { return global_shape_; }
  const std::vector<Placement>& placements() const { return placements_; }
  bool is_sharded() const;

  LocalBox local_box(const MeshCoords& coords) const;
  std::vector<int64_t> local_shape(const MeshCoords& coords) const { return local_box(coords).shape; }
  std::vector<int64_t> local_offset(const MeshCoords& coords) const { return local_box(coords).offset; }
  // This rank's piece of `global` (which must have global_shape()), as a view.
  at::Tensor local_view(const at::Tensor& global, const MeshCoords& coords) const;

  // e.g. "[8, 4] tp:Shard(0) dp_shard_cp:Shard(0)"
  std::string to_string() const;

  friend bool operator==(const ShardSpec&, const ShardSpec&) = default;

 private:
  std::vector<int64_t> global_shape_;
  std::vector<Placement> placements_;
};

}  // namespace tessel::tensor
