#include "parallel/param_registry.h"

#include <ATen/ATen.h>

#include "config/suggest.h"
#include "core/error.h"
#include "tensor/chunking.h"
#include "tensor/dim_collectives.h"

namespace tessel::parallel {

void ParamRegistry::record(const std::string& name, TpParam param) { params_.insert_or_assign(name, std::move(param)); }

const TpParam& ParamRegistry::at(const std::string& name) const {
  auto it = params_.find(name);
  if (it == params_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, p] : params_) names.push_back(n);
    throw Error(fmt::format("no tensor-parallel placement recorded for parameter '{}'.{}", name,
                            config::did_you_mean(config::closest_names(names, name))));
  }
  return it->second;
}

namespace {
// The tp placement of a spec (Replicate when it has none).
tensor::Layout tp_layout(const TpParam& p) {
  for (const auto& pl : p.spec.placements()) {
    if (pl.mesh_dim == kTpMeshDim) return pl.layout.normalized(static_cast<int64_t>(p.spec.global_shape().size()));
  }
  return tensor::Layout::replicate();
}
}  // namespace

at::Tensor full_tensor(const at::Tensor& local, const TpParam& param, const dist::CommunicatorPtr& group) {
  const tensor::Layout layout = tp_layout(param);
  if (!layout.is_shard()) return local;
  const int64_t dim = layout.dim();
  const int world = group->size();
  const int64_t global = param.spec.global_shape().at(static_cast<size_t>(dim));
  const int parts = param.packed_parts;
  TESSEL_CHECK(global % parts == 0, "packed parameter of {} elements along dim {} is not {} equal parts", global,
               dim, parts);
  const std::vector<int64_t> sizes = tensor::chunk_sizes(global / parts, world);
  at::Tensor x = local.detach().contiguous();
  if (parts == 1) return tensor::all_gather_dim(x, dim, *group, sizes);
  // Gather each part separately: rank r holds [part0_r, part1_r, ...].
  const int64_t mine = sizes[static_cast<size_t>(group->rank())];
  std::vector<at::Tensor> full_parts;
  for (int k = 0; k < parts; ++k) {
    full_parts.push_back(tensor::all_gather_dim(x.narrow(dim, k * mine, mine).contiguous(), dim, *group, sizes));
  }
  return at::cat(full_parts, dim);
}

at::Tensor local_piece(const at::Tensor& full, const TpParam& param, int tp_size, int tp_rank) {
  const tensor::Layout layout = tp_layout(param);
  if (!layout.is_shard()) return full.detach().clone();
  const int64_t dim = layout.dim();
  const int parts = param.packed_parts;
  const int64_t part = full.size(dim) / parts;
  TESSEL_CHECK(part * parts == full.size(dim), "packed parameter of {} elements along dim {} is not {} equal parts",
               full.size(dim), dim, parts);
  const int64_t off = tensor::chunk_offset(part, tp_size, tp_rank);
  const int64_t n = tensor::chunk_size(part, tp_size, tp_rank);
  std::vector<at::Tensor> pieces;
  for (int k = 0; k < parts; ++k) pieces.push_back(full.detach().narrow(dim, k * part + off, n));
  return (parts == 1 ? pieces[0] : at::cat(pieces, dim)).clone(at::MemoryFormat::Contiguous);
}

std::vector<int64_t> local_piece_shape(const TpParam& param, int tp_size, int tp_rank) {
  std::vector<int64_t> shape = param.spec.global_shape();
  const tensor::Layout layout = tp_layout(param);
  if (!layout.is_shard()) return shape;
  auto& extent = shape.at(static_cast<size_t>(layout.dim()));
  const int64_t part = extent / param.packed_parts;
  extent = param.packed_parts * tensor::chunk_size(part, tp_size, tp_rank);
  return shape;
}

tensor::BoxMap local_piece_map(const TpParam& param, int tp_size, int tp_rank) {
  const std::vector<int64_t>& shape = param.spec.global_shape();
  const tensor::Layout layout = tp_layout(param);
  if (!layout.is_shard()) return tensor::whole_tensor_map(shape);
  const auto dim = static_cast<size_t>(layout.dim());
  const int parts = param.packed_parts;
  const int64_t part = shape.at(dim) / parts;
  const int64_t off = tensor::chunk_offset(part, tp_size, tp_rank);
  const int64_t n = tensor::chunk_size(part, tp_size, tp_rank);
  tensor::BoxMap map;
  for (int k = 0; k < parts; ++k) {
    tensor::BoxSegment s{std::vector<int64_t>(shape.size(), 0), std::vector<int64_t>(shape.size(), 0), shape};
    s.global_offset[dim] = k * part + off;
    s.local_offset[dim] = k * n;
    s.shape[dim] = n;
    map.push_back(std::move(s));
  }
  return map;
}

at::Tensor join_pieces(const std::vector<at::Tensor>& pieces, const TpParam& param) {
  TESSEL_CHECK(!pieces.empty(), "join_pieces needs the piece of every tp rank");
  const tensor::Layout layout = tp_layout(param);
  if (!layout.is_shard()) return pieces.front();
  const int64_t dim = layout.dim();
  const int parts = param.packed_parts;
  // Piece r is [part0_r, part1_r, ...]: regroup as [part0_0, part0_1, ...,
  // part1_0, ...] so packed halves come back in place.
  std::vector<at::Tensor> ordered;
  for (int k = 0; k < parts; ++k) {
    for (const auto& piece : pieces) {
      const int64_t n = piece.size(dim) / parts;
      ordered.push_back(piece.narrow(dim, k * n, n));
    }
  }
  return at::cat(ordered, dim);
}

bool is_tp_sharded(const TpParam& param) { return tp_layout(param).is_shard(); }

}  // namespace tessel::parallel
