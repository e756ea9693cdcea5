// The step-time model of `tessel plan --predict` (cli/step_prediction.h) on a
// model small enough to count its bytes by hand: one decoder layer's weight
// [64, 32] and a root of an embedding [16, 32] and a norm [32], 2 nodes x 2
// ranks. Each expected time is the arithmetic of the documented model on
// those hand counts and the rates given.
#include <gtest/gtest.h>

#include "cli/step_prediction.h"

namespace tessel::cli {
namespace {

models::ModelConfig tiny_model() {
  models::ModelConfig m;
  m.vocab_size = 16;
  m.hidden_size = 32;
  m.intermediate_size = 64;
  m.num_hidden_layers = 1;
  m.num_attention_heads = 2;
  m.num_key_value_heads = 2;
  return m;
}

std::vector<std::vector<NamedShape>> tiny_view() {
  return {{{"model.embed_tokens.weight", {16, 32}},
           {"model.layers.0.mlp.up_proj.weight", {64, 32}},
           {"model.norm.weight", {32}}}};
}

ClusterDescription timed_cluster(int nodes, int ranks_per_node) {
  ClusterDescription c;
  c.nodes = nodes;
  c.ranks_per_node = ranks_per_node;
  c.micro_batch_compute_s = 0.6;
  c.micro_batch_forward_s = 0.2;
  c.optimizer_s_per_element = 1e-4;
  c.transport_cpu_s_per_inter_byte = 1e-5;
  c.transport_cpu_s_per_intra_byte = 0;
  c.intra_gbit_s = 1e9;  // same-node traffic takes no time here
  c.latency_us = 0;
  return c;
}

// HSDP 2 x 2: ranks {0,1} and {2,3} shard inside a node, replicas across.
dist::MeshLayout hsdp_2x2() {
  dist::MeshSizes sizes;
  sizes.world_size = 4;
  sizes.dp_replicate = 2;
  return dist::MeshLayout(sizes);
}

// The timed 2 x 2 cluster whose node link moves the tiny model's HSDP
// traffic in 1 s (HsdpReductionHidesOnlyBehindBackward).
ClusterDescription one_second_link_cluster() {
  ClusterDescription c = timed_cluster(2, 2);
  c.inter_gbit_s = 10368 * 8 / 1e9;
  return c;
}

TEST(StepPrediction, OneRankIsComputeThenTheOptimizer) {
  dist::MeshSizes sizes;
  const dist::MeshLayout layout(sizes);
  ClusterDescription c = timed_cluster(1, 1);
  c.inter_gbit_s = 1;
  const LayoutPrediction p = predict_layout(layout, tiny_view(), tiny_model(), c, StepShape{});
  // 512 + 2048 + 32 elements, unsharded.
  EXPECT_NEAR(p.optimizer_s, 2592 * 1e-4, 1e-12);
  EXPECT_EQ(p.transport_cpu_s, 0);
  EXPECT_NEAR(p.step_s_no_overlap, 0.6 + 0.2592, 1e-12);
  EXPECT_NEAR(p.step_s_overlap, 0.6 + 0.2592, 1e-12);
}

TEST(StepPrediction, HsdpReductionHidesOnlyBehindBackward) {
  const dist::MeshLayout layout = hsdp_2x2();
  // Shards over 2: the layer 1024 elements (4096 B), the root 8 x 32 + 16 =
  // 272 (1088 B). Across nodes only the replicate all-reduce of each shard:
  // per rank a half in the reduce-scatter and a half in the all-gather, 5184
  // B; a node link carries two ranks' 10368 B, which this rate moves in 1 s.
  const ClusterDescription c = one_second_link_cluster();
  const LayoutPrediction p = predict_layout(layout, tiny_view(), tiny_model(), c, StepShape{});
  ASSERT_EQ(p.inter_node_bytes, 4 * 5184);
  EXPECT_NEAR(p.inter_s, 1.0, 1e-12);
  EXPECT_NEAR(p.optimizer_s, 1296 * 1e-4, 1e-12);
  EXPECT_NEAR(p.transport_cpu_s, 5184 * 1e-5, 1e-12);
  EXPECT_NEAR(p.forward_compute_s, 0.2, 1e-12);
  EXPECT_NEAR(p.forward_comm_share, 0, 1e-9);  // nothing crosses in forward
  EXPECT_NEAR(p.step_s_no_overlap, 0.6 + 0.05184 + 0.1296 + 1.0, 1e-9);
  // Forward: its compute alone. Backward: the link's 1 s hides the 0.4 s of
  // compute and 0.05184 s of transport CPU, and the root's share of the
  // reduction (1088 of 5184 B), last, has nothing to hide behind. Then the
  // optimizer.
  EXPECT_NEAR(p.step_s_overlap, 0.2 + (1.0 + 1088.0 / 5184.0) + 0.1296, 1e-9);
}

TEST(StepPrediction, NothingOverlapsWhereTheTransportHasNoCoreOfItsOwn) {
  const dist::MeshLayout layout = hsdp_2x2();
  ClusterDescription c = one_second_link_cluster();
  c.transport_overlaps = false;
  const LayoutPrediction p = predict_layout(layout, tiny_view(), tiny_model(), c, StepShape{});
  EXPECT_NEAR(p.step_s_no_overlap, 0.6 + 0.05184 + 0.1296 + 1.0, 1e-9);
  EXPECT_NEAR(p.step_s_overlap, p.step_s_no_overlap, 1e-12);
}

TEST(StepPrediction, ReductionsPackAndAddInMemoryOnTheRanksCores) {
  const dist::MeshLayout layout = hsdp_2x2();
  ClusterDescription c = one_second_link_cluster();
  c.memory_copy_s_per_byte = 1e-6;
  // Shards of 4096 + 1088 = 5184 B, whole groups 10368 B. One reduction:
  // the pack copies 10368 B, the reduce-scatter adds the peer's 5184 B, the
  // all-reduce over 2 replicas half of the shard, 2592 B.
  const LayoutPrediction p = predict_layout(layout, tiny_view(), tiny_model(), c, StepShape{});
  EXPECT_EQ(p.reduction_copy_bytes, 10368 + 5184 + 2592);
  EXPECT_NEAR(p.reduction_memory_s, 18144 * 1e-6, 1e-12);
  EXPECT_NEAR(p.step_s_no_overlap, 0.6 + 0.05184 + 0.018144 + 0.1296 + 1.0, 1e-9);
  // Backward's compute, transport CPU and this still hide behind the link's 1 s.
  EXPECT_NEAR(p.step_s_overlap, 0.2 + (1.0 + 1088.0 / 5184.0) + 0.1296, 1e-9);

  StepShape three;
  three.micro_batches = 3;  // reduced each micro batch: three packs and reduce-scatters, two partial adds
  EXPECT_EQ(predict_layout(layout, tiny_view(), tiny_model(), c, three).reduction_copy_bytes,
            3 * (10368 + 5184) + 2 * 5184 + 2592);
  three.reduce_scatter_each_micro_batch = false;  // two whole-gradient accumulations, one reduction
  EXPECT_EQ(predict_layout(layout, tiny_view(), tiny_model(), c, three).reduction_copy_bytes,
            2 * 10368 + (10368 + 5184) + 2592);

  // Over one rank nothing is reduced.
  const dist::MeshLayout one(dist::MeshSizes{});
  ClusterDescription single = timed_cluster(1, 1);
  single.inter_gbit_s = 1;
  single.memory_copy_s_per_byte = 1e-6;
  EXPECT_EQ(predict_layout(one, tiny_view(), tiny_model(), single, StepShape{}).reduction_copy_bytes, 0);
}

TEST(StepPrediction, TheFusedHeadKeepsABlockOfLogitsNotAllOfThem) {
  // Qwen2.5's vocabulary over 4 x 2048 tokens: 2 x 151936 x 4 B per token
  // unfused (the logits and their gradient); fused, three blocks of at most
  // 64 MiB whatever the tokens.
  models::ModelConfig m = tiny_model();
  m.vocab_size = 151936;
  StepShape shape;
  shape.micro_batch = 4;
  shape.seq_len = 2048;
  const int64_t unfused = activation_bytes(m, 1, 1, shape);
  shape.fused_head_loss = true;
  const int64_t fused = activation_bytes(m, 1, 1, shape);
  EXPECT_EQ(unfused - fused, int64_t{8192} * 2 * 151936 * 4 - 3 * (int64_t{64} << 20));
  // Fewer logits than a block: the block is all of them, and the fused head
  // is not counted above the unfused one.
  shape.micro_batch = 1;
  shape.seq_len = 16;
  const int64_t small_fused = activation_bytes(m, 1, 1, shape);
  shape.fused_head_loss = false;
  EXPECT_EQ(activation_bytes(m, 1, 1, shape), small_fused);
}

TEST(StepPrediction, PackedRowsCountTheProbabilitiesTheirDocumentsMayKeep) {
  // 2 query and 2 kv heads of 16 in float32: rows of 2048 keep no
  // probabilities, packed rows' documents up to (2 x 2 + 2 x 2) x 16 x 4 B
  // per token, the kernel's bound.
  StepShape shape;
  shape.micro_batch = 2;
  shape.seq_len = 2048;
  const int64_t rows = layer_activation_bytes(tiny_model(), 1, 1, shape);
  shape.packed_rows = true;
  EXPECT_EQ(layer_activation_bytes(tiny_model(), 1, 1, shape) - rows, int64_t{2} * 2048 * 8 * 16 * 4);
  // Rows short enough to keep theirs already count them: nothing more.
  shape.seq_len = 16;
  const int64_t short_packed = layer_activation_bytes(tiny_model(), 1, 1, shape);
  shape.packed_rows = false;
  EXPECT_EQ(layer_activation_bytes(tiny_model(), 1, 1, shape), short_packed);
  // Under context parallelism the ring keeps none either way.
  shape.seq_len = 2048;
  const int64_t ring = layer_activation_bytes(tiny_model(), 1, 2, shape);
  shape.packed_rows = true;
  EXPECT_EQ(layer_activation_bytes(tiny_model(), 1, 2, shape), ring);
}

TEST(StepPrediction, TensorParallelCollectivesAddToComputeAndHideNothing) {
  dist::MeshSizes sizes;
  sizes.world_size = 2;
  sizes.tp = 2;  // one node, no data parallelism: nothing else to communicate
  const dist::MeshLayout layout(sizes);
  StepShape step;
  // One all-reduce of 1000 fp32 elements in forward and one in backward:
  // over 2 ranks each sends 500 elements there and 500 back, 4000 B; with
  // the gradient norm's fp64 sum over tp, 8008 B per rank, which this
  // same-node rate moves in 1 s.
  step.tp.all_reduces = {{1000, 4, true}, {1000, 4, false}};
  ClusterDescription c = timed_cluster(1, 2);
  c.intra_gbit_s = 8008 * 8 / 1e9;
  c.inter_gbit_s = 1;
  const auto view = tiny_view().front();
  const LayoutPrediction p = predict_layout(layout, {view, view}, tiny_model(), c, step);
  EXPECT_EQ(p.bytes.at("tp").same_node, 2 * 8008);
  EXPECT_NEAR(p.tp_s, 1.0, 1e-12);
  EXPECT_NEAR(p.tp_forward_s, 0.5, 1e-12);  // one of the two collectives per micro batch
  EXPECT_EQ(p.intra_s, 0);                  // FSDP's links carry nothing
  EXPECT_NEAR(p.step_s_no_overlap, 0.6 + 1.0 + 0.2592, 1e-9);
  EXPECT_NEAR(p.step_s_overlap, 0.6 + 1.0 + 0.2592, 1e-9);
}

Recommendation one_candidate(int dp_replicate, double step_s, int64_t rss_bytes) {
  Recommendation r;
  LayoutPrediction p;
  p.dp_replicate = dp_replicate;
  p.step_s_overlap = step_s;
  p.rss_bytes = rss_bytes;
  r.candidates = {p};
  r.recommended_dp_replicate = dp_replicate;
  return r;
}

TEST(StepPrediction, TensorParallelSizeIsTheFastestThatFits) {
  constexpr int64_t GiB = int64_t{1} << 30;
  const std::vector<std::pair<int, Recommendation>> by_tp = {
      {1, one_candidate(2, 1.00, 12 * GiB)}, {2, one_candidate(2, 0.97, 7 * GiB)}, {4, one_candidate(1, 0.90, 5 * GiB)}};
  // No limit: tp 4 is more than 5% faster than tp 1; tp 2 is not.
  TpRecommendation r = recommend_tp(by_tp, 0);
  EXPECT_EQ(r.tp, 4);
  EXPECT_EQ(r.dp_replicate, 1);
  // Without tp 4, tp 2's 3% does not beat the smaller tp.
  r = recommend_tp({by_tp[0], by_tp[1]}, 0);
  EXPECT_EQ(r.tp, 1);
  EXPECT_EQ(r.dp_replicate, 2);
  // 8 GiB per rank: tp 1 does not fit.
  r = recommend_tp({by_tp[0], by_tp[1]}, 8 * GiB);
  EXPECT_EQ(r.tp, 2);
  EXPECT_NE(r.reason.find("tp 1: 1.000 s, 12.00 GiB (does not fit)"), std::string::npos) << r.reason;
  // Nothing fits 4 GiB: the one holding least, said so.
  r = recommend_tp(by_tp, 4 * GiB);
  EXPECT_EQ(r.tp, 4);
  EXPECT_NE(r.reason.find("no tensor-parallel size fits 4.00 GiB"), std::string::npos) << r.reason;
}

TEST(StepPrediction, SlowerLinkNeverMakesAFasterStep) {
  dist::MeshSizes sizes;
  sizes.world_size = 4;
  const dist::MeshLayout fsdp(sizes);
  ClusterDescription c = timed_cluster(2, 2);
  double previous = 0;
  for (double gbit : {1e-3, 1e-4, 1e-5, 1e-6}) {
    c.inter_gbit_s = gbit;
    const LayoutPrediction p = predict_layout(fsdp, tiny_view(), tiny_model(), c, StepShape{});
    EXPECT_LE(p.step_s_overlap, p.step_s_no_overlap + 1e-12) << gbit;
    EXPECT_GE(p.step_s_overlap, p.compute_s + p.optimizer_s) << gbit;
    EXPECT_GT(p.step_s_overlap, previous) << gbit;
    previous = p.step_s_overlap;
  }
}

}  // namespace
}  // namespace tessel::cli
