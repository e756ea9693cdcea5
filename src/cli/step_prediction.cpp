#include "cli/step_prediction.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "cli/context_split.h"
#include "core/error.h"
#include "loss/chunked_softmax.h"
#include "nn/linear_cross_entropy.h"
#include "nn/tiled_attention.h"

namespace tessel::cli {

namespace {

double mb(int64_t bytes) { return static_cast<double>(bytes) / 1e6; }

// What a rank holds once MPI and the communication engine are up, beyond a
// process that only loaded tessel (measured: a tiny model's ranks report
// 184 MiB after setup where `tessel plan` holds 156 MiB).
constexpr int64_t kCommunicationRuntimeBytes = int64_t{28} << 20;

// Seconds to move `bytes` at `gbit_s`; 0 for nothing to move.
double transfer_s(int64_t bytes, double gbit_s) {
  if (bytes <= 0) return 0;
  TESSEL_CHECK(gbit_s > 0, "a link rate of {} Gbit/s cannot move {} bytes", gbit_s, bytes);
  return static_cast<double>(bytes) * 8.0 / (gbit_s * 1e9);
}

// The share of a mesh group's bytes that the forward sends: an FSDP group's
// forward all-gathers among its gathers (in the compute dtype) and its
// reduce-scatters (fp32); half of the expert token exchange; nothing of the
// rest (HSDP's all-reduce, the gradient norm's sums), which backward sends.
// The decoder layers' share: the root and an untied head, kept unsharded
// from forward to backward, gather once where a layer gathers twice.
double forward_share(const std::string& group, const StepShape& s) {
  if (group == "dp_shard_cp" || group == "ep_shard") {
    const double gather = s.param_element_bytes / 4.0;
    const double forward = s.micro_batches * gather;
    const double backward = (s.reshard_after_forward ? s.micro_batches * gather : 0.0) +
                            (s.reduce_scatter_each_micro_batch ? s.micro_batches : 1);
    return forward / (forward + backward);
  }
  return group == "ep" ? 0.5 : 0.0;
}

// One phase of a step with overlap: the longer of its compute and its
// communication, plus the part of the communication nothing can hide.
double phase_s(double compute, double comm, double exposed) {
  return std::max(compute, comm) + std::min(exposed, std::min(compute, comm));
}

}  // namespace

namespace {

// Bytes decoder layer `layer` keeps for backward per token of a micro batch
// on this rank: the tensors autograd saves, counted from what each piece
// saves and checked against the tensors' high-water mark
// (TESSEL_COUNT_TENSOR_BYTES, docs/bench/memory.md: within 1% per layer on
// llama-31m in float32 and bf16).
int64_t layer_bytes_per_token(const models::ModelConfig& m, int64_t layer, int tp, int cp, const StepShape& s) {
  const int64_t e = s.param_element_bytes;
  const int64_t h = m.hidden_size, heads = m.num_attention_heads / tp;
  const int64_t head_dim = m.head_dim > 0 ? m.head_dim : m.hidden_size / m.num_attention_heads;
  const int64_t kv_heads = m.num_key_value_heads / tp;
  const int64_t q = heads * head_dim, kv = kv_heads * head_dim, inter = m.intermediate_size / tp;
  const bool qk_norm = m.model_type == "qwen3" || m.model_type == "qwen3_moe" || m.model_type == "gemma3_text";
  const bool silu = m.hidden_act == "silu" || m.hidden_act == "swish";
  int64_t bytes = 0;
  if (e == 4) {
    // float32: the hand-written kernels (RMSNorm, rotary, the SiLU product)
    // keep their inputs only. Each norm's input and output (the next
    // products' input), 4h; rotated q and k, v, the attention's output and
    // the output projection's input, 3q + 2kv; gate, up and their product
    // (another activation also keeps its own output); q/k norms' inputs.
    bytes = 4 * (4 * h + 3 * q + 2 * kv + (silu ? 3 : 4) * inter + (qk_norm ? q + kv : 0));
  } else {
    // bf16/fp16: HF's compositions. Each norm keeps a float32 copy of its
    // input, the normalised values and its output in the compute dtype; the
    // rotary products keep both factors of q and k (x and rotate_half(x));
    // the attention as above; the MLP gate, up, act(gate) and the product;
    // q/k norms their float32 copy and normalised values.
    bytes = 2 * (4 * h + 2 * e * h) + e * (3 * q + 2 * kv) + e * 2 * (q + kv) + e * 4 * inter +
            (qk_norm ? (4 + e) * (q + kv) : 0);
  }
  // The attention's per-row log-sum-exp (float32), and on one rank's whole
  // row (no context parallelism) the softmax probabilities where the tiled
  // kernel keeps them (short rows: nn/tiled_attention.h).
  bytes += 4 * heads;
  if (cp == 1) {
    const int64_t kept = nn::tiled_attention_kept_probabilities(s.seq_len, heads, kv_heads, head_dim, e,
                                                                models::layer_sliding_window(m, layer));
    int64_t kept_bytes = kept * std::max<int64_t>(e, 4) / s.seq_len;
    // Packed rows' documents, attended one by one, keep theirs when short
    // enough whatever the row's length: at most what the kernel's rule
    // allows, the size of q, k, v and the output. (Where the whole row keeps
    // its own, its documents' smaller squares keep less.)
    if (s.packed_rows && kept == 0) kept_bytes = (2 * heads + 2 * kv_heads) * head_dim * e;
    bytes += kept_bytes;
  }
  return bytes;
}

}  // namespace

int64_t layer_activation_bytes(const models::ModelConfig& m, int tp, int cp, const StepShape& s) {
  const int64_t tokens = s.micro_batch * context_split(cp, s.seq_len).tokens_per_rank;
  const int64_t layers = m.num_hidden_layers;
  int64_t saved = 0;  // the largest layer's under activation checkpointing (it recomputes one at a time)
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t b = layer_bytes_per_token(m, l, tp, cp, s);
    saved = s.activation_checkpointing ? std::max(saved, b) : saved + b;
  }
  // Under checkpointing each layer keeps its input.
  const int64_t layer_inputs = s.activation_checkpointing ? layers * m.hidden_size * s.param_element_bytes : 0;
  return tokens * (saved + layer_inputs);
}

int64_t activation_bytes(const models::ModelConfig& m, int tp, int cp, const StepShape& s) {
  const int64_t tokens = s.micro_batch * context_split(cp, s.seq_len).tokens_per_rank;
  // The logits and their gradient in the compute dtype (the loss's
  // probabilities exist a block at a time, loss/chunked_softmax.h; measured
  // on a 152k vocabulary, docs/bench/memory.md). The fused head keeps one
  // block of float32 logits at a time (its logits, their exponentials or
  // gradient, a temporary), never more than the unfused head would (where
  // one block holds all the logits, the two hold about the same).
  // Logits other than float32 ones on the CPU go through the loss a block
  // of rows at a time, converted to float32: the block, its exponentials and
  // the gradient's float32 rows (three blocks) beside them. Blocks as on the
  // CPU: the prediction knows no device (on one a block is 128 MiB, so a
  // device's peak can be up to ~0.4 GB above this term's).
  const int64_t vocab = m.vocab_size / tp;
  const int64_t host_block_rows = loss::rows_per_chunk(vocab, c10::Device(c10::kCPU));
  const int64_t loss_blocks = s.param_element_bytes == 4 ? 0 : 3 * std::min(tokens, host_block_rows) * vocab * 4;
  const int64_t unfused_logit_bytes = tokens * 2 * vocab * s.param_element_bytes + loss_blocks;
  const int64_t logit_bytes =
      s.fused_head_loss
          ? std::min(unfused_logit_bytes,
                     3 * std::min(tokens * m.vocab_size * 4, nn::kLinearCrossEntropyBlockBytes))
          : unfused_logit_bytes;
  return layer_activation_bytes(m, tp, cp, s) + logit_bytes;
}

int64_t reduction_copy_bytes(const std::vector<FsdpGroupShard>& groups, int shard_size, int replicate,
                             const StepShape& s) {
  if (shard_size <= 1 && replicate <= 1) return 0;
  int64_t shard = 0;
  for (const auto& g : groups) shard += g.shard_bytes;
  const int64_t full = shard * shard_size;
  const int64_t reductions = s.reduce_scatter_each_micro_batch ? s.micro_batches : 1;
  int64_t bytes = reductions * (full + shard * (shard_size - 1)) + shard * (reductions - 1);
  if (!s.reduce_scatter_each_micro_batch) bytes += full * (s.micro_batches - 1);
  if (replicate > 1) bytes += shard * (replicate - 1) / replicate;
  return bytes;
}

ExpertExchangeEstimate step_expert_exchange(const models::ModelConfig& model, int ep, const StepShape& step,
                                            int64_t tokens_per_row) {
  ExpertExchangeShape shape;
  shape.hidden = model.hidden_size;
  shape.num_experts = model.num_experts;
  shape.ep = ep;
  shape.activation_element_bytes = step.param_element_bytes;
  shape.activation_checkpointing = step.activation_checkpointing;
  return uniform_expert_exchange(model, shape, step.micro_batch * tokens_per_row, step.micro_batches);
}

LayoutPrediction predict_layout(const dist::MeshLayout& layout, const std::vector<std::vector<NamedShape>>& tp_views,
                                const models::ModelConfig& model, const ClusterDescription& c, const StepShape& s) {
  TESSEL_CHECK(c.ranks_per_node >= 1 && c.nodes >= 1, "cluster of {} nodes x {} ranks", c.nodes, c.ranks_per_node);
  TESSEL_CHECK(c.nodes * c.ranks_per_node == layout.world_size(),
               "the cluster has {} nodes x {} ranks = {} but the mesh {} ranks", c.nodes, c.ranks_per_node,
               c.nodes * c.ranks_per_node, layout.world_size());
  LayoutPrediction p;
  p.dp_replicate = layout.size("dp_replicate");
  TrafficInputs in;
  in.layout = &layout;
  in.ranks_per_node = c.ranks_per_node;
  in.tp_views = tp_views;
  in.micro_batches = s.micro_batches;
  in.reshard_after_forward = s.reshard_after_forward;
  in.reduce_scatter_each_micro_batch = s.reduce_scatter_each_micro_batch;
  in.gather_element_bytes = s.param_element_bytes;
  in.algorithm = c.algorithm;
  const int ep = layout.ep();
  if (ep > 1) {
    in.num_experts = model.num_experts;
    in.expert_exchange_bytes_per_rank = step_expert_exchange(model, ep, s, s.seq_len).bytes_per_rank;
  }
  in.tp_collectives = s.tp;
  std::vector<train::NodeBytes> per_rank, per_rank_tp;
  p.bytes = predict_step_traffic(in, &per_rank, &per_rank_tp);
  p.inter_node_bytes = train::total_other_node(p.bytes);

  // The transport's CPU for a rank's sends.
  auto transport_cpu_s = [&](const train::NodeBytes& b, double other_share, double same_share) {
    return static_cast<double>(b.other_node) * other_share * c.transport_cpu_s_per_inter_byte +
           static_cast<double>(b.same_node) * same_share * c.transport_cpu_s_per_intra_byte;
  };
  // Of the ranks' sends: the busiest node link's and the busiest rank's
  // same-node time, and the sends of the rank whose transport CPU costs most.
  struct Busiest {
    double inter_s = 0, intra_s = 0;
    train::NodeBytes transport;
  };
  auto busiest = [&](const std::vector<train::NodeBytes>& sends) {
    std::vector<int64_t> node_out(static_cast<std::size_t>(c.nodes), 0);
    int64_t rank_intra = 0;
    Busiest b;
    for (int r = 0; r < layout.world_size(); ++r) {
      const train::NodeBytes& mine = sends[static_cast<std::size_t>(r)];
      node_out[static_cast<std::size_t>(r / c.ranks_per_node)] += mine.other_node;
      rank_intra = std::max(rank_intra, mine.same_node);
      if (transport_cpu_s(mine, 1, 1) > transport_cpu_s(b.transport, 1, 1)) b.transport = mine;
    }
    b.inter_s = transfer_s(*std::max_element(node_out.begin(), node_out.end()), c.inter_gbit_s);
    b.intra_s = transfer_s(rank_intra, c.intra_gbit_s);
    return b;
  };
  const Busiest links = busiest(per_rank);
  p.transport_cpu_s = transport_cpu_s(links.transport, 1, 1);
  p.inter_s = links.inter_s;
  p.intra_s = links.intra_s;

  // Tensor parallelism: the same link rules for its bytes alone, a latency
  // per collective, and the transport's CPU; split between the phases by
  // the forward's share of the collectives.
  const Busiest tp_links = busiest(per_rank_tp);
  const int64_t tp_forward = s.tp.forward_count() * s.micro_batches;
  const int64_t tp_count = tp_forward + s.tp.backward_count() * s.micro_batches;
  const double tp_forward_share = tp_count > 0 ? static_cast<double>(tp_forward) / static_cast<double>(tp_count) : 0;
  p.tp_s = std::max(tp_links.inter_s, tp_links.intra_s) + static_cast<double>(tp_count) * c.latency_us * 1e-6 +
           transport_cpu_s(tp_links.transport, 1, 1);
  p.tp_forward_s = p.tp_s * tp_forward_share;

  const int tp = layout.size("tp");
  const int shard_size = layout.size("dp_shard_cp");
  const auto& view = tp_views.front();
  // Under expert parallelism: the dense groups and ep position 0's experts
  // (every position holds as many, of equal shapes).
  const std::optional<ExpertSplitGroups> split =
      ep > 1 ? std::optional(expert_split_groups(view, shard_size, model.num_experts, ep, 0, layout.ep_shard()))
             : std::nullopt;
  const auto groups = split ? split->dense : fsdp_group_shards(view, shard_size);
  // Per step and group: the forward (and backward) all-gathers, the
  // reduce-scatters, and HSDP's all-reduce; each expert's gathers and
  // reduce-scatters; the token exchanges (counts and rows, forward and
  // backward) of every sparse-layer forward.
  const int64_t per_group = s.micro_batches * (s.reshard_after_forward ? 2 : 1) +
                            (s.reduce_scatter_each_micro_batch ? s.micro_batches : 1);
  int64_t collectives = static_cast<int64_t>(groups.size()) * (per_group + (p.dp_replicate > 1 ? 2 : 0));
  if (split) {
    collectives += static_cast<int64_t>(split->experts.size()) * (layout.ep_shard() > 1 ? per_group : 0) +
                   sparse_layer_count(model) * s.micro_batches * (s.activation_checkpointing ? 8 : 5);
  }
  p.latency_s = static_cast<double>(collectives) * c.latency_us * 1e-6;
  p.reduction_copy_bytes = reduction_copy_bytes(groups, shard_size, p.dp_replicate, s);
  if (split) p.reduction_copy_bytes += reduction_copy_bytes(split->experts, layout.ep_shard(), 1, s);
  p.reduction_memory_s = static_cast<double>(p.reduction_copy_bytes) * c.memory_copy_s_per_byte;

  // Compute: 6 FLOPs per parameter per token (the embedding lookup is not a
  // product), and causal attention's products.
  int64_t params = 0, embedding = 0;
  for (const auto& sh : view) {
    params += sh.numel();
    if (sh.name.find("embed_tokens") != std::string::npos) embedding += sh.numel();
  }
  const int64_t tokens = s.micro_batch * s.seq_len * s.micro_batches;
  const double flops = 6.0 * static_cast<double>(params - embedding) * static_cast<double>(tokens) +
                       6.0 * static_cast<double>(model.num_hidden_layers * s.seq_len * model.hidden_size / tp) *
                           static_cast<double>(tokens);
  if (c.micro_batch_compute_s) {
    p.compute_s = *c.micro_batch_compute_s * s.micro_batches;
    p.forward_compute_s = c.micro_batch_forward_s.value_or(*c.micro_batch_compute_s / 3) * s.micro_batches;
  } else {
    TESSEL_CHECK(c.gflops > 0, "the compute rate must be positive, got {} GFLOP/s", c.gflops);
    p.compute_s = flops / (c.gflops * 1e9);
    p.forward_compute_s = p.compute_s / 3;  // backward computes two products per forward one
  }

  // Memory of the largest rank: fp32 shards of parameters, gradients and
  // AdamW's two moments; the unsharded root (kept from forward to backward)
  // and, in backward, the group being reduced (its full gradients and the
  // packed reduce-scatter buffer: the root's, at the end, are the largest
  // for small models) and the group computing and the one prefetched (two
  // different groups: the largest and the next largest; an untied head
  // larger than a layer is computed first and prefetches a layer); one
  // micro batch's activations.
  // Under expert parallelism the layer being computed also gathers its
  // experts, one at a time (each its own group over ep_shard).
  for (const auto& v : tp_views) {
    const auto gs = split ? split->dense : fsdp_group_shards(v, shard_size);
    int64_t shards = 0, root_full = 0, layer_full = 0, next_layer_full = 0, expert_full = 0;
    for (const auto& g : gs) {
      shards += g.shard_bytes;
      const int64_t full = g.shard_bytes * shard_size;
      if (g.root) {
        root_full = std::max(root_full, full);
      } else if (full > layer_full) {
        next_layer_full = layer_full;
        layer_full = full;
      } else {
        next_layer_full = std::max(next_layer_full, full);
      }
    }
    if (split) {
      for (const auto& g : split->experts) {
        shards += g.shard_bytes;
        if (layout.ep_shard() > 1) expert_full = std::max(expert_full, g.shard_bytes * layout.ep_shard());
      }
    }
    const int64_t state = 4 * shards;
    // One rank of the shard group gathers nothing, but in a lower compute
    // dtype it keeps every parameter's cast copy from forward to backward.
    const int64_t unsharded =
        (shard_size > 1 ? root_full + 2 * std::max(root_full, layer_full) + layer_full + next_layer_full
                        : s.param_element_bytes < 4 ? shards / 4 * s.param_element_bytes : 0) +
        2 * expert_full;
    if (state + unsharded > p.state_bytes + p.unsharded_peak_bytes) {
      p.state_bytes = state;
      p.unsharded_peak_bytes = unsharded;
    }
  }
  p.activation_bytes = activation_bytes(model, tp, layout.size("cp"), s);
  p.optimizer_s = static_cast<double>(p.state_bytes / 16) * c.optimizer_s_per_element;  // fp32 elements

  // What of the links' time, the transport's CPU and the latencies the
  // forward accounts for; the rest is backward's.
  double forward_other = 0, forward_same = 0;
  int64_t all_other = 0, all_same = 0;
  for (const auto& [group, b] : p.bytes) {
    forward_other += static_cast<double>(b.other_node) * forward_share(group, s);
    forward_same += static_cast<double>(b.same_node) * forward_share(group, s);
    all_other += b.other_node;
    all_same += b.same_node;
  }
  const double inter_forward = all_other > 0 ? forward_other / static_cast<double>(all_other) : 0;
  const double intra_forward = all_same > 0 ? forward_same / static_cast<double>(all_same) : 0;
  const double latency_forward =
      static_cast<double>(s.micro_batches) / static_cast<double>(per_group + (p.dp_replicate > 1 ? 2 : 0));
  const double comm_forward =
      std::max(p.inter_s * inter_forward, p.intra_s * intra_forward) + p.latency_s * latency_forward;
  const double comm_backward = std::max(p.inter_s * (1 - inter_forward), p.intra_s * (1 - intra_forward)) +
                               p.latency_s * (1 - latency_forward);
  const double comm = std::max(p.inter_s, p.intra_s) + p.latency_s;
  p.forward_comm_share = comm > 0 ? comm_forward / comm : 0;
  const double transport_forward = transport_cpu_s(links.transport, inter_forward, intra_forward);

  p.step_s_no_overlap = p.compute_s + p.transport_cpu_s + p.reduction_memory_s + p.optimizer_s + comm + p.tp_s;
  // The root group (embedding, final norm, head) is gathered first and
  // reduced last: its share of each phase's traffic has no compute to hide
  // behind.
  int64_t root = 0, total = 0;
  for (const auto& g : groups) {
    total += g.shard_bytes;
    if (g.root) root = g.shard_bytes;
  }
  const double root_share = total > 0 ? static_cast<double>(root) / static_cast<double>(total) : 0;
  p.step_s_overlap =
      phase_s(p.forward_compute_s + p.tp_forward_s + transport_forward, comm_forward, comm_forward * root_share) +
      phase_s(p.compute_s - p.forward_compute_s + p.tp_s - p.tp_forward_s + p.transport_cpu_s - transport_forward +
                  p.reduction_memory_s,
              comm_backward, comm_backward * root_share) +
      p.optimizer_s;
  if (!c.transport_overlaps) p.step_s_overlap = p.step_s_no_overlap;
  // The tensors' peak: the gradients (a quarter of the sharded state) are
  // made by backward as the activations are released, and freed after the
  // optimizer step, so with one micro batch per step the two do not add up
  // (the larger counts); accumulating micro batches keep the gradients of
  // the earlier ones beside the next one's activations.
  // The fused head is the exception: it accumulates its weight's gradient
  // (float32, this rank's shard of it) block by block beside its blocks.
  const int64_t gradients = p.state_bytes / 4;
  const int64_t head_gradient =
      s.fused_head_loss ? model.vocab_size * model.hidden_size * 4 / (int64_t{tp} * std::max(shard_size, 1)) : 0;
  // On one rank of its shard group the unsharded term is the forward's cast
  // copies, freed group by group as backward makes the gradients: it sits
  // with the activations. Otherwise (gathers, the reductions' buffers) it
  // is counted beside both.
  const bool casts_only = shard_size <= 1;
  const int64_t with_activations = p.activation_bytes + head_gradient + (casts_only ? p.unsharded_peak_bytes : 0);
  p.tensor_bytes = p.state_bytes - gradients + (casts_only ? 0 : p.unsharded_peak_bytes) +
                   (s.micro_batches > 1 ? gradients + with_activations : std::max(gradients, with_activations));
  // The process holds more than its tensors: its code and libraries and
  // the communication runtime, and the pages its allocator keeps after the
  // tensors on them are freed (jemalloc keeps freed pages for reuse:
  // cli/main.cpp). Those come from the tensors made and freed within a step
  // in many sizes, the layers' activations and the unsharded parameters and
  // gradients: a quarter of them is counted (docs/bench/memory.md).
  // (The unfused head's logits are two allocations of one size every step;
  // the fused head's blocks are counted.)
  const int64_t layers_activations = layer_activation_bytes(model, tp, layout.size("cp"), s);
  const int64_t transient = layers_activations + p.unsharded_peak_bytes +
                            (s.fused_head_loss ? p.activation_bytes - layers_activations : 0);
  p.rss_bytes = c.base_rss_bytes + kCommunicationRuntimeBytes + p.tensor_bytes + transient / 4;
  return p;
}

Recommendation recommend(const dist::MeshLayout& layout, const std::vector<std::vector<NamedShape>>& tp_views,
                         const models::ModelConfig& model, const ClusterDescription& c, const StepShape& s) {
  const int dp = layout.size("dp_replicate") * layout.size("dp_shard");
  Recommendation r;
  for (int d = 1; d <= dp; ++d) {
    if (dp % d != 0 || (d > 1 && d == dp)) continue;  // the seed: 1, or a divisor below dp_size
    dist::MeshSizes sizes;
    sizes.world_size = layout.world_size();
    sizes.dp_replicate = d;
    sizes.cp = layout.size("cp");
    sizes.tp = layout.size("tp");
    sizes.ep = layout.ep();
    // The seed's rule for dp_replicate is against world / (tp cp ep).
    const int seed_dp = layout.seed_dp_size();
    if (d > 1 && (seed_dp % d != 0 || d == seed_dp)) continue;
    r.candidates.push_back(predict_layout(dist::MeshLayout(sizes), tp_views, model, c, s));
  }
  const LayoutPrediction* best = &r.candidates.front();
  for (const auto& p : r.candidates) {
    if (p.step_s_overlap < best->step_s_overlap * 0.95) best = &p;
  }
  r.recommended_dp_replicate = best->dp_replicate;
  const LayoutPrediction& fsdp = r.candidates.front();
  if (best->dp_replicate == 1) {
    r.reason = c.nodes == 1
                   ? "dp_replicate_size=1 (plain FSDP): one node, no slow link to spare; HSDP would only add memory"
                   : fmt::format("dp_replicate_size=1 (plain FSDP): the inter-node link does not bind: FSDP sends "
                                 "{:.0f} MB/step across nodes ({:.2f} s at {:g} Gbit/s), which compute ({:.2f} s) "
                                 "hides; HSDP would hold more per rank for no gain",
                                 mb(fsdp.inter_node_bytes), fsdp.inter_s, c.inter_gbit_s, fsdp.compute_s);
  } else {
    r.reason = fmt::format(
        "dp_replicate_size={}{}: the inter-node link binds: FSDP over {} ranks sends {:.0f} MB/step across nodes "
        "({:.2f} s at {:g} Gbit/s), HSDP {}x{} sends {:.0f} MB ({:.2f} s); predicted step {:.2f} s against {:.2f} s",
        best->dp_replicate, best->dp_replicate == c.nodes ? " (= nodes)" : "", dp, mb(fsdp.inter_node_bytes),
        fsdp.inter_s, c.inter_gbit_s, best->dp_replicate, dp / best->dp_replicate, mb(best->inter_node_bytes),
        best->inter_s, best->step_s_overlap, fsdp.step_s_overlap);
  }
  return r;
}

const LayoutPrediction& recommended(const Recommendation& r) {
  for (const auto& c : r.candidates) {
    if (c.dp_replicate == r.recommended_dp_replicate) return c;
  }
  return r.candidates.front();
}

TpRecommendation recommend_tp(const std::vector<std::pair<int, Recommendation>>& by_tp, int64_t memory_per_rank_bytes) {
  TESSEL_CHECK(!by_tp.empty(), "recommend_tp: no tensor-parallel size to choose from");
  auto fits = [&](const LayoutPrediction& p) { return memory_per_rank_bytes <= 0 || p.rss_bytes <= memory_per_rank_bytes; };
  const std::pair<int, Recommendation>* best = nullptr;
  for (const auto& option : by_tp) {  // by increasing tp
    const LayoutPrediction& p = recommended(option.second);
    if (!fits(p)) continue;
    if (best == nullptr || p.step_s_overlap < recommended(best->second).step_s_overlap * 0.95) best = &option;
  }
  std::string others;
  for (const auto& [tp, r] : by_tp) {
    const LayoutPrediction& p = recommended(r);
    others += fmt::format("{}tp {}: {:.3f} s, {:.2f} GiB{}", others.empty() ? "" : "; ", tp, p.step_s_overlap,
                          static_cast<double>(p.rss_bytes) / (1 << 30), fits(p) ? "" : " (does not fit)");
  }
  TpRecommendation out;
  if (best == nullptr) {
    best = &by_tp.front();
    for (const auto& option : by_tp) {
      if (recommended(option.second).rss_bytes < recommended(best->second).rss_bytes) best = &option;
    }
    out.reason = fmt::format("no tensor-parallel size fits {:.2f} GiB per rank; tp {} holds least ({})",
                             static_cast<double>(memory_per_rank_bytes) / (1 << 30), best->first, others);
  } else {
    out.reason = fmt::format("tp {} with dp_replicate_size={}: the fastest predicted step{} ({})", best->first,
                             best->second.recommended_dp_replicate,
                             memory_per_rank_bytes > 0 ? " that fits the memory per rank" : "", others);
  }
  out.tp = best->first;
  out.dp_replicate = best->second.recommended_dp_replicate;
  return out;
}

nlohmann::json to_json(const LayoutPrediction& p) {
  nlohmann::json bytes = nlohmann::json::object();
  for (const auto& [group, b] : p.bytes) bytes[group] = {{"same_node", b.same_node}, {"other_node", b.other_node}};
  return {{"dp_replicate_size", p.dp_replicate},
          {"bytes_per_step", bytes},
          {"inter_node_bytes_per_step", p.inter_node_bytes},
          {"compute_s", p.compute_s},
          {"forward_compute_s", p.forward_compute_s},
          {"optimizer_s", p.optimizer_s},
          {"transport_cpu_s", p.transport_cpu_s},
          {"reduction_copy_bytes", p.reduction_copy_bytes},
          {"reduction_memory_s", p.reduction_memory_s},
          {"forward_comm_share", p.forward_comm_share},
          {"inter_node_s", p.inter_s},
          {"intra_node_s", p.intra_s},
          {"latency_s", p.latency_s},
          {"tp_s", p.tp_s},
          {"step_s_no_overlap", p.step_s_no_overlap},
          {"step_s_overlap", p.step_s_overlap},
          {"memory_per_rank",
           {{"sharded_state_bytes", p.state_bytes},
            {"unsharded_peak_bytes", p.unsharded_peak_bytes},
            {"activation_bytes", p.activation_bytes},
            {"tensor_bytes", p.tensor_bytes},
            {"rss_bytes", p.rss_bytes}}}};
}

}  // namespace tessel::cli
