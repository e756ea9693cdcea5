// The bytes one training step's parameter collectives send, by mesh group and
// by link class (same node / other node), in closed form from the shapes
// alone: what `tessel plan --predict` reports and what the run's own counters
// (train/link_traffic.h) must equal. The forms are the direct-exchange ones
// the communicators count (dist/communicator.h):
//   all-gather of a group's shard s over n ranks: each rank sends s to each peer;
//   reduce-scatter: each rank sends its s-sized chunk j to rank j;
//   all-reduce of b bytes (HSDP, over the replicate group): a reduce-scatter
//     of ceil-sized chunks then an all-gather of each rank's reduced chunk.
// Per step, for every FSDP group (each decoder layer, an untied lm_head, and
// the root holding the rest): an all-gather per micro batch in forward and,
// for layers resharded after forward, another in backward; a reduce-scatter per micro
// batch (or only on the last, with accumulate_unsharded_grads); the
// replicate all-reduce on the last micro batch; and the gradient norm's two
// fp64 sums over the shard group. Under expert parallelism each expert is a
// group over ep_shard (all-gathers and reduce-scatters, no replicate
// all-reduce: ep_shard spans the replicas), the gradient norm adds one fp64
// sum over ep_shard and one over ep, and the token exchange sends each ep peer
// an equal share of the rank's bytes. Under tensor parallelism the tp group
// carries the plan's activation collectives per micro batch (tp_traffic.h)
// and the gradient norm's fp64 sum of the tp-sharded set.
// Ranks fill nodes in order (node = rank / ranks_per_node), as mpirun's
// default by-slot mapping places them.
//
// CollectiveAlgorithm::Ring models a device cluster's collectives instead
// (NCCL's rings, the NCCL-tests bus-bandwidth convention): every rank sends
// to its successor in the group, (n-1)/n of the data for an all-gather or a
// reduce-scatter and 2(n-1)/n for an all-reduce, so only the ring's edges
// between nodes cross them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/tp_traffic.h"
#include "dist/mesh_layout.h"
#include "train/link_traffic.h"

namespace tessel::cli {

struct NamedShape {
  std::string name;  // "model.layers.3.mlp.up_proj.weight"
  std::vector<int64_t> shape;  // this tp rank's (tp-local) shape
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

enum class CollectiveAlgorithm { Direct, Ring };

struct TrafficInputs {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Direct;
  const dist::MeshLayout* layout = nullptr;
  int ranks_per_node = 1;
  std::vector<std::vector<NamedShape>> tp_views;  // parameters of each tp rank
  int micro_batches = 1;                          // per optimizer step, per dp rank
  bool reshard_after_forward = true;
  bool reduce_scatter_each_micro_batch = true;    // false: accumulate_unsharded_grads
  int gather_element_bytes = 4;                   // the parameters' compute dtype (bf16: 2); reductions are fp32
  // Expert parallelism (layout->ep() > 1): each rank's experts (those of its
  // ep position; "experts.{e}" parameters) are FSDP groups of their own over
  // ep_shard, every other parameter as above; and each rank sends this many
  // bytes of tokens per step to its ep peers, an equal share to each
  // (cli/expert_traffic.h).
  int64_t num_experts = 0;
  int64_t expert_exchange_bytes_per_rank = 0;
  // Tensor parallelism (layout->size("tp") > 1): the plan's collectives per
  // micro batch, on every tp rank.
  TpCollectives tp_collectives;
};

// Per mesh group ("dp_shard_cp", "dp_replicate", "tp"), summed over ranks;
// with `per_rank`, also each world rank's own sends (every group but tp,
// whose collectives nothing hides: those in `per_rank_tp`).
train::GroupBytes predict_step_traffic(const TrafficInputs& in, std::vector<train::NodeBytes>* per_rank = nullptr,
                                       std::vector<train::NodeBytes>* per_rank_tp = nullptr);

// The padded fp32 bytes of each rank's shard of each FSDP group, in the
// order FSDP builds them (layer 0..L-1, lm_head, then the root).
struct FsdpGroupShard {
  std::string name;  // "model.layers.3", "lm_head" or "root"
  int64_t shard_bytes = 0;
  bool root = false;
};
std::vector<FsdpGroupShard> fsdp_group_shards(const std::vector<NamedShape>& shapes, int shard_size);

// Under expert parallelism (ep > 1): the FSDP groups of the parameters that
// are not experts (over dp_shard_cp), and one group per expert the ep
// position `ep_rank` holds (over ep_shard of `ep_shard_size`, named
// "expert {e}" and summed over layers: the experts of one index in all layers
// have equal shapes).
struct ExpertSplitGroups {
  std::vector<FsdpGroupShard> dense;
  std::vector<FsdpGroupShard> experts;  // one per (layer, local expert)
};
ExpertSplitGroups expert_split_groups(const std::vector<NamedShape>& shapes, int shard_size, int64_t num_experts,
                                      int ep, int ep_rank, int ep_shard_size);

}  // namespace tessel::cli
