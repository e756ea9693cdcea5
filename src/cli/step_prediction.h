// `tessel plan --predict`: for a described cluster, what one training step
// costs each rank (memory: sharded state, peak unsharded parameters,
// activations; bytes per step by group and link class, traffic_model.h;
// time with and without overlap of communication and compute), and which
// dp_replicate_size to use there, with the reason.
//
// The time model: compute = one micro batch's forward and backward timed on
// this machine (machine_probe.h; or, where not timed, training FLOPs of the
// rank's tokens, 6 x parameters per token plus attention's 12 x layers x seq
// x hidden, at a given per-rank rate) per micro batch; after backward, the
// gradient norm and optimizer update over the rank's shards; communication =
// the longer of the busiest node link's inter-node bytes at the inter-node
// rate and the busiest rank's same-node bytes at the intra-node rate (the
// links work in parallel), plus a latency per collective. Tensor
// parallelism's collectives (tp_traffic.h) are timed alike but apart: each
// result is the next operation's input, so their time adds to the compute of
// their phase and hides nothing. Where the
// transport runs on the ranks' own cores (TCP through the kernel, shared-
// memory copies, no core to spare: this machine's pretend nodes, a CPU
// cluster), moving each byte also takes CPU time from compute.
// Without overlap everything adds (also "with overlap" where the transport
// has no core of its own: ClusterDescription::transport_overlaps). With
// FSDP's prefetch and asynchronous reductions communication hides behind
// compute of its own phase only: the
// forward's all-gathers behind forward compute; backward's all-gathers,
// reduce-scatters and HSDP's all-reduce behind backward compute (the
// optimizer needs every reduction done, the next forward the update);
// within each phase the root group's share (gathered first, reduced last)
// has nothing to hide behind. The optimizer step hides nothing.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "cli/expert_traffic.h"
#include "cli/tp_traffic.h"
#include "cli/traffic_model.h"
#include "dist/mesh_layout.h"
#include "models/model_config.h"

namespace tessel::cli {

struct ClusterDescription {
  int nodes = 1;
  int ranks_per_node = 1;
  double intra_gbit_s = 0;  // per rank, to peers on its node
  double inter_gbit_s = 0;  // per node link, each direction
  double latency_us = 0;    // per collective
  double gflops = 0;        // per rank (used when the micro batch was not timed)
  // One micro batch's forward and backward on one rank, and its forward
  // alone, timed on this machine (machine_probe.h) and divided by the share
  // of a core a rank gets.
  std::optional<double> micro_batch_compute_s, micro_batch_forward_s;
  // After backward, per parameter element of the rank's shards: gradient
  // norm and AdamW (timed here, per core share; 0: not charged).
  double optimizer_s_per_element = 0;
  // CPU seconds a rank's compute loses per byte it sends to another node and
  // to a peer on its node, where the transport shares its cores (0: the
  // transport has cores, a NIC or a GPU of its own).
  double transport_cpu_s_per_inter_byte = 0, transport_cpu_s_per_intra_byte = 0;
  // Seconds per byte of memory copy on a rank's share of its cores, for what
  // the reductions do in memory besides moving bytes (reduction_copy_bytes;
  // 0: not charged, as where a GPU or spare cores do it).
  double memory_copy_s_per_byte = 0;
  // Whether communication overlaps compute at all. Not where the transport
  // has no core of its own: its progress thread runs at a lower priority
  // than compute (dist/progress_engine.h) and gets a core mostly while its
  // own rank waits, so bytes move then (measured: docs/bench/cluster.md).
  bool transport_overlaps = true;
  int64_t base_rss_bytes = 0;  // what a rank holds before any model state
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Direct;  // Direct: this build's MPI collectives
  std::string source;       // where the figures came from
  std::string caveat;       // what the figures are known to leave out here ("" when nothing)
};

struct StepShape {
  int64_t micro_batch = 1;  // sequences per micro batch
  int64_t seq_len = 1;
  int micro_batches = 1;    // per optimizer step, per dp rank
  bool reshard_after_forward = true;
  bool reduce_scatter_each_micro_batch = true;
  bool activation_checkpointing = false;
  // policy.fused_lm_head_loss: the head's loss over vocabulary blocks, so a
  // block of logits instead of the whole [tokens, vocab] (nn/linear_cross_entropy.h).
  bool fused_head_loss = false;
  // policy.sequence_packing: rows of several documents, which attention runs
  // one by one (nn/document_runs.h); their lengths are the data's, so the
  // attention's kept probabilities are counted at the most the kernel keeps.
  bool packed_rows = false;
  int param_element_bytes = 4;  // compute dtype: fp32 4, bf16/fp16 2 (all-gathers move these)
  TpCollectives tp;             // what one micro batch runs on the tp group (tp_traffic.h)
};

struct LayoutPrediction {
  int dp_replicate = 1;
  train::GroupBytes bytes;  // per step, summed over ranks
  int64_t inter_node_bytes = 0;
  double compute_s = 0, forward_compute_s = 0;  // all micro batches; forward_compute_s is part of compute_s
  double optimizer_s = 0, transport_cpu_s = 0;
  // The gradient reductions' own memory work on the rank's cores (packing
  // and adding: reduction_copy_bytes), in backward; hides nothing.
  int64_t reduction_copy_bytes = 0;
  double reduction_memory_s = 0;
  double inter_s = 0, intra_s = 0, latency_s = 0;
  // Tensor parallelism's collectives: their links' time and latency, and the
  // part of it the forward runs; on the critical path, never hidden.
  double tp_s = 0, tp_forward_s = 0;
  double forward_comm_share = 0;  // of the link time: the forward's all-gathers
  double step_s_no_overlap = 0, step_s_overlap = 0;
  // The largest rank's memory: its sharded state (parameters, gradients,
  // AdamW's moments), the unsharded parameters and gradients at their peak,
  // one micro batch's activations; the tensors' high-water mark those make
  // (what a GPU's allocator reports as its peak, TESSEL_COUNT_TENSOR_BYTES on
  // the CPU), and the process's resident set around them.
  int64_t state_bytes = 0, unsharded_peak_bytes = 0, activation_bytes = 0, tensor_bytes = 0, rss_bytes = 0;
};

// Bytes of activations one micro batch keeps for backward on one rank (the
// tensors autograd saves in a decoder layer, per token, with tensor-parallel
// shards where the plan splits them, on the rank's cp share of the row), and
// of the logits (with the fused head: of its blocks).
int64_t activation_bytes(const models::ModelConfig& model, int tp, int cp, const StepShape& step);
// The decoder layers' part of it (without the logits).
int64_t layer_activation_bytes(const models::ModelConfig& model, int tp, int cp, const StepShape& step);

// One step's token exchange per rank under expert parallelism `ep`, for
// uniform routing (cli/expert_traffic.h), `tokens_per_row` tokens per row.
ExpertExchangeEstimate step_expert_exchange(const models::ModelConfig& model, int ep, const StepShape& step,
                                            int64_t tokens_per_row);

// What one rank's gradient reductions do in memory per step besides moving
// bytes, in bytes of memory copy (adding n bytes into n moves what copying
// them does: two reads and a write, the copy's destination read for
// ownership; measured alike here): each reduce-scatter packs the
// group's whole gradients into its send buffer (a copy of the unsharded
// group) and adds the shard_size - 1 shards it receives into its own; each
// reduced micro batch after the first is added into the sharded gradients;
// HSDP's all-reduce over `replicate` replicas adds (r - 1) / r of the shard
// (a ring's share); without a reduction per micro batch, each micro batch
// before the last adds its whole gradients into the accumulated ones. Over
// one rank without replicas there is no reduction.
int64_t reduction_copy_bytes(const std::vector<FsdpGroupShard>& groups, int shard_size, int replicate,
                             const StepShape& step);

// One layout: `tp_views` are the named parameter shapes of each tp rank.
LayoutPrediction predict_layout(const dist::MeshLayout& layout, const std::vector<std::vector<NamedShape>>& tp_views,
                                const models::ModelConfig& model, const ClusterDescription& cluster,
                                const StepShape& step);

// Every dp_replicate_size the seed allows for this world and tp/cp (1, and
// each divisor of dp_size below it), predicted; the recommended one first
// is the fastest with overlap (the smaller dp_replicate on a tie within 5%:
// less memory per rank).
struct Recommendation {
  std::vector<LayoutPrediction> candidates;  // by dp_replicate
  int recommended_dp_replicate = 1;
  std::string reason;  // one line
};
Recommendation recommend(const dist::MeshLayout& layout, const std::vector<std::vector<NamedShape>>& tp_views,
                         const models::ModelConfig& model, const ClusterDescription& cluster, const StepShape& step);

// Across tensor-parallel sizes (each with its own dp_replicate
// recommendation): the fastest predicted step among those whose largest rank
// fits `memory_per_rank_bytes` (0: no limit), a smaller tp kept unless a
// larger one is more than 5% faster (fewer activation collectives to depend
// on); where none fits, the one holding least per rank, and the reason says so.
struct TpRecommendation {
  int tp = 1;
  int dp_replicate = 1;
  std::string reason;  // one line
};
TpRecommendation recommend_tp(const std::vector<std::pair<int, Recommendation>>& by_tp, int64_t memory_per_rank_bytes);

// The recommended candidate of `r`.
const LayoutPrediction& recommended(const Recommendation& r);

nlohmann::json to_json(const LayoutPrediction& p);

}  // namespace tessel::cli
