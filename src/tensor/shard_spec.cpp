#include "tensor/shard_spec.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "tensor/chunking.h"

namespace tessel::tensor {

int64_t LocalBox::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

ShardSpec::ShardSpec(std::vector<int64_t> global_shape, std::vector<Placement> placements)
    : global_shape_(std::move(global_shape)), placements_(std::move(placements)) {
  for (int64_t s : global_shape_) {
    TESSEL_CHECK(s >= 0, "shard spec: global shape {} has a negative size", fmt::join(global_shape_, "x"));
  }
  const auto ndim = static_cast<int64_t>(global_shape_.size());
  for (size_t i = 0; i < placements_.size(); ++i) {
    Placement& p = placements_[i];
    TESSEL_CHECK(!p.mesh_dim.empty(), "shard spec: placement {} has an empty mesh dim name", i);
    for (size_t j = 0; j < i; ++j) {
      TESSEL_CHECK(placements_[j].mesh_dim != p.mesh_dim,
                   "shard spec: mesh dim '{}' is placed twice; each mesh dim places a tensor once",
                   p.mesh_dim);
    }
    p.layout = p.layout.normalized(ndim);
  }
}

bool ShardSpec::is_sharded() const {
  for (const Placement& p : placements_) {
    if (p.layout.is_shard()) return true;
  }
  return false;
}

LocalBox ShardSpec::local_box(const MeshCoords& coords) const {
  LocalBox box{std::vector<int64_t>(global_shape_.size(), 0), global_shape_};
  for (const Placement& p : placements_) {
    if (!p.layout.is_shard()) continue;
    auto it = coords.find(p.mesh_dim);
    if (it == coords.end()) {
      std::vector<std::string> known;
      for (const auto& [name, coord] : coords) known.push_back(name);
      throw Error(fmt::format("shard spec {}: no group size/rank given for mesh dim '{}' (given: {})",
                              to_string(), p.mesh_dim, fmt::join(known, ", ")));
    }
    const GroupCoord& c = it->second;
    TESSEL_CHECK(c.size >= 1 && c.rank >= 0 && c.rank < c.size,
                 "shard spec {}: invalid coordinate rank {} of {} for mesh dim '{}'", to_string(),
                 c.rank, c.size, p.mesh_dim);
    const auto d = static_cast<size_t>(p.layout.dim());
    box.offset[d] += chunk_offset(box.shape[d], c.size, c.rank);
    box.shape[d] = chunk_size(box.shape[d], c.size, c.rank);
  }
  return box;
}

at::Tensor ShardSpec::local_view(const at::Tensor& global, const MeshCoords& coords) const {
  TESSEL_CHECK(global.sizes().vec() == global_shape_,
               "shard spec {}: tensor of shape [{}] does not have the global shape", to_string(),
               fmt::join(global.sizes(), ", "));
  const LocalBox box = local_box(coords);
  at::Tensor view = global;
  for (size_t d = 0; d < box.shape.size(); ++d) {
    view = view.narrow(static_cast<int64_t>(d), box.offset[d], box.shape[d]);
  }
  return view;
}

std::string ShardSpec::to_string() const {
  std::string text = fmt::format("[{}]", fmt::join(global_shape_, ", "));
  for (const Placement& p : placements_) text += fmt::format(" {}:{}", p.mesh_dim, p.layout.to_string());
  return text;
}

}  // namespace tessel::tensor
