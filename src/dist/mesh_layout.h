// MeshLayout: the rank arithmetic of the device mesh, with no communicator, so
// a layout can be validated and printed before any process starts (`tessel
// mesh`) and tested in one process. The world's ranks are laid out row-major
// over the dims (dp_replicate, dp_shard, cp, tp) — tp varies fastest, so with
// dp_replicate = num_nodes each dp_shard group is one node (SPEC 2, the seed's
// HSDP picture). Named groups are products of dims:
//   tp, cp, dp_replicate, dp_shard   one dim each
//   dp_shard_cp = dp_shard x cp      parameter sharding (FSDP) group
//   dp          = dp_replicate x dp_shard   the batch split
//   dp_cp       = dp_replicate x dp_shard x cp   loss normalisation
// The dense dims cover every rank: dp_shard = world / (dp_replicate * cp * tp),
// whatever ep is, because expert parallelism does not take ranks away from
// the dense part (the ranks of an ep group hold different tokens and the same
// dense parameters).
//
// The MoE mesh (SPEC 2, as torchtitan / NeMo Automodel carve it) is a second
// view of the same ranks: the world flattened in the dense row-major order
// (dp_replicate, dp_shard, cp, tp) and split into (ep_shard, ep), ep fastest:
//   ep        consecutive flat ranks [k*ep, (k+1)*ep): the experts of each
//             MoE layer split over it, tokens move inside it by all-to-all
//   ep_shard  flat ranks with the same position in their ep group: they hold
//             the same experts and FSDP-shard them
// With ep = 1, ep is each rank alone and ep_shard is the world.
// The seed's dp_size = world / (tp * cp * ep) is the number of ep groups per
// (cp, tp) coordinate; it stays the quantity dp_replicate_size is checked
// against (divides it, smaller than it), so every dp_replicate slice holds
// whole ep groups and an ep group never spans two replicas.
// Construction validates the sizes and throws tessel::UsageError naming the
// offending values and the fix.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::dist {

// The user's choice of sizes (policy.dtensor_cfg.* and the world size).
struct MeshSizes {
  int world_size = 1;
  int dp_replicate = 1;  // policy.dtensor_cfg.dp_replicate_size (1: no HSDP)
  int cp = 1;            // policy.dtensor_cfg.context_parallel_size
  int tp = 1;            // policy.dtensor_cfg.tensor_parallel_size
  int ep = 1;            // policy.dtensor_cfg.expert_parallel_size (MoE models only)
  bool v2 = true;        // policy.dtensor_cfg._v2 (HSDP needs it)
};

// The mesh dims in row-major order (last varies fastest).
enum class MeshDim { DpReplicate = 0, DpShard = 1, Cp = 2, Tp = 3 };
constexpr int kNumMeshDims = 4;
const char* to_string(MeshDim dim);

// Which mesh a named group belongs to: the dense dims, or one of the two
// dims of the MoE mesh (ep_shard x ep over the flattened ranks).
enum class MeshGroupKind { Dense, ExpertShard, Expert };

// A named group: which dims it spans (in row-major order; empty for the MoE
// mesh's groups, which cut the flattened ranks instead).
struct MeshGroupSpec {
  std::string name;
  std::vector<MeshDim> dims;
  MeshGroupKind kind = MeshGroupKind::Dense;
};

class MeshLayout {
 public:
  // Validates; throws tessel::UsageError for an impossible or unsupported layout.
  explicit MeshLayout(const MeshSizes& sizes);

  // The named groups in the order DeviceMesh creates them (every rank must
  // split in the same order): tp, cp, dp_replicate, dp_shard, dp_shard_cp, dp,
  // dp_cp, then the MoE mesh's ep_shard and ep.
  static const std::vector<MeshGroupSpec>& group_specs();
  // Throws UsageError listing the valid names for an unknown one.
  static const MeshGroupSpec& group_spec(std::string_view name);

  const MeshSizes& sizes() const { return sizes_; }
  int world_size() const { return sizes_.world_size; }
  // world / (tp * cp): the dense data-parallel degree (replicate x shard),
  // how many ways the batch splits.
  int dp_size() const { return dims_[0] * dims_[1]; }
  // The seed's world / (tp * cp * ep), which dp_replicate_size is checked against.
  int seed_dp_size() const { return sizes_.world_size / (sizes_.tp * sizes_.cp * sizes_.ep); }
  int ep() const { return sizes_.ep; }
  int ep_shard() const { return sizes_.world_size / sizes_.ep; }
  int dim_size(MeshDim dim) const { return dims_[static_cast<int>(dim)]; }
  // {dp_replicate, dp_shard, cp, tp}
  const std::array<int, kNumMeshDims>& dims() const { return dims_; }

  // Number of ranks in each group of that name (product of its dims).
  int size(std::string_view group) const;
  // The rank's position along every dim.
  std::array<int, kNumMeshDims> coordinate(int rank) const;
  // Every group of that name as its member world ranks, in group-rank order;
  // groups ordered row-major over the dims the group does not span.
  std::vector<std::vector<int>> groups(std::string_view group) const;
  // Which of groups(group) holds `rank`.
  int group_index(std::string_view group, int rank) const;
  // The position of `rank` inside its group (its rank in that communicator).
  int rank_in_group(std::string_view group, int rank) const;

  // "dp_replicate=2 x dp_shard=4 x cp=1 x tp=2 (world 16)"
  std::string describe() const;
  // "ep_shard=8 x ep=2 over the flattened (dp_replicate, dp_shard, cp, tp)"
  std::string describe_moe() const;

 private:
  int rank_of(const std::array<int, kNumMeshDims>& coord) const;
  void check_rank(int rank) const;

  MeshSizes sizes_;
  std::array<int, kNumMeshDims> dims_{};
};

// Model-dependent checks of a layout (SPEC 2): attention heads and KV heads
// must split evenly over tp, and with sequence parallel the sequence length
// must too. Throws UsageError; returns (and logs) warnings for choices that
// work but make no sense, such as sequence parallel with tp == 1.
std::vector<std::string> validate_model_for_mesh(int num_heads, int num_kv_heads, int tp,
                                                 int seq_len, bool sequence_parallel);

}  // namespace tessel::dist
