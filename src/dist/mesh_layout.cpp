#include "dist/mesh_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/log.h"

namespace tessel::dist {

namespace {

// Valid HSDP replicate sizes for a dp degree: divisors d with 1 < d < dp.
std::string hsdp_choices(int dp_size) {
  std::vector<int> choices;
  for (int d = 2; d < dp_size; ++d) {
    if (dp_size % d == 0) choices.push_back(d);
  }
  if (choices.empty()) {
    return fmt::format("dp_size={} has no divisor between 1 and itself, so HSDP is not possible "
                       "with this world and tp/cp; set dp_replicate_size=1",
                       dp_size);
  }
  return fmt::format("set dp_replicate_size to one of {{{}}} (a typical choice is the number of "
                     "nodes), or to 1 to disable HSDP",
                     fmt::join(choices, ", "));
}

void validate(const MeshSizes& s) {
  if (s.world_size < 1) {
    throw UsageError(fmt::format("world size {} must be at least 1 (cluster.num_nodes * "
                                 "cluster.gpus_per_node, or --world)",
                                 s.world_size));
  }
  auto check_positive = [](int value, const char* key) {
    if (value < 1) {
      throw UsageError(fmt::format("policy.dtensor_cfg.{}={} must be a positive integer; use 1 "
                                   "to disable that kind of parallelism",
                                   key, value));
    }
  };
  check_positive(s.tp, "tensor_parallel_size");
  check_positive(s.cp, "context_parallel_size");
  check_positive(s.ep, "expert_parallel_size");
  if (s.dp_replicate < 1) {
    throw UsageError(fmt::format("policy.dtensor_cfg.dp_replicate_size={} must be a positive "
                                 "integer: use 1 to disable HSDP, or the number of replicas "
                                 "(typically cluster.num_nodes)",
                                 s.dp_replicate));
  }
  const int model_parallel = s.tp * s.cp * s.ep;
  if (s.world_size % model_parallel != 0) {
    throw UsageError(fmt::format(
        "world size {} is not divisible by tp*cp*ep = {} (tensor_parallel_size={}, "
        "context_parallel_size={}, expert_parallel_size={}): choose sizes whose product divides "
        "{}, or run on a multiple of {} ranks",
        s.world_size, model_parallel, s.tp, s.cp, s.ep, s.world_size, model_parallel));
  }
  if (s.dp_replicate == 1) return;
  if (!s.v2) {
    throw UsageError(fmt::format("dp_replicate_size={} asks for HSDP, but HSDP only works on the "
                                 "DTensor v2 backend: set policy.dtensor_cfg._v2=true (or "
                                 "dp_replicate_size=1)",
                                 s.dp_replicate));
  }
  const int dp_size = s.world_size / model_parallel;
  const std::string formula =
      fmt::format("dp_size = world {} / (tp {} * cp {} * ep {}) = {}", s.world_size, s.tp, s.cp,
                  s.ep, dp_size);
  if (s.dp_replicate >= dp_size) {
    throw UsageError(fmt::format("policy.dtensor_cfg.dp_replicate_size={} must be smaller than "
                                 "dp_size ({}), otherwise nothing is left to shard: {}",
                                 s.dp_replicate, formula, hsdp_choices(dp_size)));
  }
  if (dp_size % s.dp_replicate != 0) {
    throw UsageError(fmt::format("policy.dtensor_cfg.dp_replicate_size={} must evenly divide "
                                 "dp_size ({}): {}",
                                 s.dp_replicate, formula, hsdp_choices(dp_size)));
  }
}

std::vector<MeshDim> other_dims(const std::vector<MeshDim>& dims) {
  std::vector<MeshDim> rest;
  for (int d = 0; d < kNumMeshDims; ++d) {
    auto dim = static_cast<MeshDim>(d);
    if (std::find(dims.begin(), dims.end(), dim) == dims.end()) rest.push_back(dim);
  }
  return rest;
}

}  // namespace

const char* to_string(MeshDim dim) {
  switch (dim) {
    case MeshDim::DpReplicate:
      return "dp_replicate";
    case MeshDim::DpShard:
      return "dp_shard";
    case MeshDim::Cp:
      return "cp";
    case MeshDim::Tp:
      return "tp";
  }
  return "?";
}

const std::vector<MeshGroupSpec>& MeshLayout::group_specs() {
  using D = MeshDim;
  static const std::vector<MeshGroupSpec> specs = {
      {"tp", {D::Tp}},
      {"cp", {D::Cp}},
      {"dp_replicate", {D::DpReplicate}},
      {"dp_shard", {D::DpShard}},
      {"dp_shard_cp", {D::DpShard, D::Cp}},
      {"dp", {D::DpReplicate, D::DpShard}},
      {"dp_cp", {D::DpReplicate, D::DpShard, D::Cp}},
      {"ep_shard", {}, MeshGroupKind::ExpertShard},
      {"ep", {}, MeshGroupKind::Expert},
  };
  return specs;
}

const MeshGroupSpec& MeshLayout::group_spec(std::string_view name) {
  std::vector<std::string> names;
  for (const auto& spec : group_specs()) {
    if (spec.name == name) return spec;
    names.push_back(spec.name);
  }
  throw UsageError(fmt::format("unknown mesh group '{}'; the groups are: {}", name,
                               fmt::join(names, ", ")));
}

MeshLayout::MeshLayout(const MeshSizes& sizes) : sizes_(sizes) {
  validate(sizes);
  const int dense_dp = sizes.world_size / (sizes.tp * sizes.cp);
  dims_ = {sizes.dp_replicate, dense_dp / sizes.dp_replicate, sizes.cp, sizes.tp};
}

int MeshLayout::size(std::string_view group) const {
  switch (group_spec(group).kind) {
    case MeshGroupKind::Expert: return ep();
    case MeshGroupKind::ExpertShard: return ep_shard();
    case MeshGroupKind::Dense: break;
  }
  int n = 1;
  for (MeshDim d : group_spec(group).dims) n *= dim_size(d);
  return n;
}

void MeshLayout::check_rank(int rank) const {
  if (rank < 0 || rank >= world_size()) {
    throw Error(fmt::format("rank {} is outside the mesh of world size {}", rank, world_size()));
  }
}

std::array<int, kNumMeshDims> MeshLayout::coordinate(int rank) const {
  check_rank(rank);
  std::array<int, kNumMeshDims> coord{};
  for (int d = kNumMeshDims - 1; d >= 0; --d) {
    coord[d] = rank % dims_[d];
    rank /= dims_[d];
  }
  return coord;
}

int MeshLayout::rank_of(const std::array<int, kNumMeshDims>& coord) const {
  int rank = 0;
  for (int d = 0; d < kNumMeshDims; ++d) rank = rank * dims_[d] + coord[d];
  return rank;
}

namespace {

// Row-major index of `coord` restricted to `dims`, and its inverse.
int index_over(const std::array<int, kNumMeshDims>& coord, const std::array<int, kNumMeshDims>& sz,
               const std::vector<MeshDim>& dims) {
  int index = 0;
  for (MeshDim d : dims) index = index * sz[static_cast<int>(d)] + coord[static_cast<int>(d)];
  return index;
}

void set_over(std::array<int, kNumMeshDims>& coord, const std::array<int, kNumMeshDims>& sz,
              const std::vector<MeshDim>& dims, int index) {
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    const int d = static_cast<int>(*it);
    coord[d] = index % sz[d];
    index /= sz[d];
  }
}

}  // namespace

std::vector<std::vector<int>> MeshLayout::groups(std::string_view group) const {
  const MeshGroupSpec& spec = group_spec(group);
  if (spec.kind != MeshGroupKind::Dense) {
    // The flat rank is the world rank (the dense order is row-major too).
    std::vector<std::vector<int>> result;
    const bool expert = spec.kind == MeshGroupKind::Expert;
    const int num_groups = expert ? ep_shard() : ep();
    for (int g = 0; g < num_groups; ++g) {
      std::vector<int> members;
      for (int m = 0; m < size(group); ++m) members.push_back(expert ? g * ep() + m : m * ep() + g);
      result.push_back(std::move(members));
    }
    return result;
  }
  const auto& inner = spec.dims;
  const auto outer = other_dims(inner);
  const int group_size = size(group);
  const int num_groups = world_size() / group_size;
  std::vector<std::vector<int>> result(num_groups);
  for (int g = 0; g < num_groups; ++g) {
    std::array<int, kNumMeshDims> coord{};
    set_over(coord, dims_, outer, g);
    result[g].reserve(group_size);
    for (int m = 0; m < group_size; ++m) {
      set_over(coord, dims_, inner, m);
      result[g].push_back(rank_of(coord));
    }
  }
  return result;
}

int MeshLayout::group_index(std::string_view group, int rank) const {
  switch (group_spec(group).kind) {
    case MeshGroupKind::Expert: check_rank(rank); return rank / ep();
    case MeshGroupKind::ExpertShard: check_rank(rank); return rank % ep();
    case MeshGroupKind::Dense: break;
  }
  return index_over(coordinate(rank), dims_, other_dims(group_spec(group).dims));
}

int MeshLayout::rank_in_group(std::string_view group, int rank) const {
  switch (group_spec(group).kind) {
    case MeshGroupKind::Expert: check_rank(rank); return rank % ep();
    case MeshGroupKind::ExpertShard: check_rank(rank); return rank / ep();
    case MeshGroupKind::Dense: break;
  }
  return index_over(coordinate(rank), dims_, group_spec(group).dims);
}

std::string MeshLayout::describe() const {
  return fmt::format("dp_replicate={} x dp_shard={} x cp={} x tp={} (world {})", dims_[0],
                     dims_[1], dims_[2], dims_[3], world_size());
}

std::string MeshLayout::describe_moe() const {
  return fmt::format("ep_shard={} x ep={} over the flattened (dp_replicate, dp_shard, cp, tp)", ep_shard(), ep());
}

std::vector<std::string> validate_model_for_mesh(int num_heads, int num_kv_heads, int tp,
                                                 int seq_len, bool sequence_parallel) {
  if (tp < 1) {
    throw UsageError(fmt::format("policy.dtensor_cfg.tensor_parallel_size={} must be a positive "
                                 "integer",
                                 tp));
  }
  if (num_heads % tp != 0) {
    throw UsageError(fmt::format("the model's {} attention heads do not split evenly over "
                                 "tensor_parallel_size={}: choose a tensor_parallel_size that "
                                 "divides {}",
                                 num_heads, tp, num_heads));
  }
  if (num_kv_heads % tp != 0) {
    throw UsageError(fmt::format("the model's {} key/value heads do not split evenly over "
                                 "tensor_parallel_size={}: choose a tensor_parallel_size that "
                                 "divides {}",
                                 num_kv_heads, tp, num_kv_heads));
  }
  std::vector<std::string> warnings;
  if (sequence_parallel && tp == 1) {
    warnings.push_back(fmt::format(
        "policy.dtensor_cfg.sequence_parallel=true has no effect with tensor_parallel_size={} "
        "(sequence parallel splits activations over the tp group); set it to false or raise "
        "tensor_parallel_size",
        tp));
  } else if (sequence_parallel && seq_len % tp != 0) {
    throw UsageError(fmt::format(
        "sequence length {} is not divisible by tensor_parallel_size={}, which sequence "
        "parallel needs: set policy.make_sequence_length_divisible_by={} (pads every batch), or "
        "choose a sequence length that is a multiple of {}",
        seq_len, tp, tp, tp));
  }
  for (const auto& w : warnings) log::warn("{}", w);
  return warnings;
}

}  // namespace tessel::dist
