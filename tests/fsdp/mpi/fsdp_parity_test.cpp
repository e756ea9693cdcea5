// FSDP2 / HSDP parity at 2, 3 and 4 ranks (SPEC 8): 10 AdamW steps of TinyLM
// (vocab 4W+1 tied to the output projection, Linear dims 7, 15, 17) against
// the single-process run computed on every rank; plus the collective counts
// per microbatch and the unsharded-memory bound. Layouts that do not fit the
// world size are skipped (every rank skips the same ones).
#include <gtest/gtest.h>

#include "fsdp/fsdp_parity.h"

namespace tessel::fsdp::testing {
namespace {

// fp32: the sharded run differs from the reference only in the order of the
// gradient sums (reduce-scatter over ranks vs. one rank after the other).
constexpr double kLossRtol = 1e-5;
constexpr double kParamRtol = 1e-5;
constexpr double kParamAtol = 1e-6;

int world_size() { return dist::world()->size(); }

void expect_close_losses(const RunResult& got, const RunResult& want, double rtol) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], want.losses[i], rtol * std::abs(want.losses[i]) + 1e-7)
        << "step " << i;
  }
}

void expect_close_params(const RunResult& got, const RunResult& want, double rtol, double atol) {
  ASSERT_EQ(got.params.size(), want.params.size());
  for (const auto& [name, w] : want.params) {
    auto it = got.params.find(name);
    ASSERT_NE(it, got.params.end()) << name;
    const at::Tensor& g = it->second;
    ASSERT_EQ(g.sizes(), w.sizes()) << name;
    const double err = (g - w).abs().sub(w.abs() * rtol).max().item<double>();
    EXPECT_LE(err, atol) << name << ": max |got - want| - rtol*|want| = " << err;
  }
}

void expect_every_embedding_row_changed(const RunResult& r) {
  at::Tensor delta = (r.params.at("embed_tokens.weight") - r.initial_embedding).abs().amax(1);
  EXPECT_GT(delta.min().item<double>(), 0.0) << "some rows of the tied embedding never changed";
  EXPECT_TRUE(r.params.at("embed_tokens.weight").equal(r.params.at("lm_head.weight")));
}

void expect_counts(const RunResult& r, const ParityConfig& s, bool backward_gather_from_subgroup) {
  const int64_t layers = s.layers;
  const bool resharded = !(std::holds_alternative<bool>(s.reshard_after_forward) &&
                           !std::get<bool>(s.reshard_after_forward));
  for (size_t i = 0; i < r.counts.size(); ++i) {
    const Counts& c = r.counts[i];
    const bool last = static_cast<int>(i % s.microbatches) + 1 == s.microbatches;
    const bool reduces = s.accumulation != Accumulation::NoGradientSync || last;
    const bool all_reduces =
        s.replicate > 1 && reduces && (s.accumulation != Accumulation::NoAllReduce || last);
    // A one-rank shard group in fp32 computes on its shards: nothing to gather.
    const bool gathers = world_size() / s.replicate > 1 || s.mp.param_dtype.has_value();
    EXPECT_EQ(c.forward_all_gathers, gathers ? layers + 1 : 0) << "microbatch " << i;
    EXPECT_EQ(c.backward_all_gathers, gathers && resharded ? layers : 0) << "microbatch " << i;
    EXPECT_EQ(c.backward_post_forward_gathers, backward_gather_from_subgroup ? layers : 0);
    EXPECT_EQ(c.reduce_scatters, reduces ? layers + 1 : 0) << "microbatch " << i;
    EXPECT_EQ(c.all_reduces, all_reduces ? layers + 1 : 0) << "microbatch " << i;
  }
}

void expect_parity(const ParityConfig& s, bool subgroup = false) {
  const RunResult want = run_reference(world_size(), s);
  const RunResult got = run_fsdp(s);
  expect_close_losses(got, want, kLossRtol);
  expect_close_params(got, want, kParamRtol, kParamAtol);
  expect_every_embedding_row_changed(got);
  expect_counts(got, s, subgroup);
}

TEST(FsdpParity, ReshardAfterForwardTrue) {
  ParityConfig s;
  s.reshard_after_forward = true;
  const RunResult want = run_reference(world_size(), s);
  const RunResult got = run_fsdp(s);
  expect_close_losses(got, want, kLossRtol);
  expect_close_params(got, want, kParamRtol, kParamAtol);
  expect_every_embedding_row_changed(got);
  expect_counts(got, s, false);
  // Prefetch: every layer's gather is issued ahead, in forward from the second
  // step on (the order is learnt in the first), in backward from the first.
  EXPECT_EQ(got.prefetches, s.layers * (s.steps - 1) + s.layers * s.steps);
  // SPEC 4 memory contract: root + about three unsharded layers at most.
  EXPECT_LE(got.max_peak_unsharded, 3 * got.layer_unsharded_bytes + got.root_unsharded_bytes);
  EXPECT_GE(got.max_peak_unsharded, got.layer_unsharded_bytes + got.root_unsharded_bytes);
  EXPECT_EQ(got.memory.unsharded_param_bytes, 0) << "everything is resharded after backward";
  // fp32 grads of the unpadded shards: no more than the padded shards.
  EXPECT_GT(got.memory.sharded_grad_bytes, 0);
  EXPECT_LE(got.memory.sharded_grad_bytes, got.memory.sharded_param_bytes);
}

TEST(FsdpParity, ReshardAfterForwardFalse) {
  ParityConfig s;
  s.reshard_after_forward = false;
  const RunResult want = run_reference(world_size(), s);
  const RunResult got = run_fsdp(s);
  expect_close_losses(got, want, kLossRtol);
  expect_close_params(got, want, kParamRtol, kParamAtol);
  expect_counts(got, s, false);
  // Forward prefetch only: nothing to re-gather in backward.
  EXPECT_EQ(got.prefetches, s.layers * (s.steps - 1));
  // All layers stay unsharded until their backward.
  EXPECT_GE(got.max_peak_unsharded,
            s.layers * got.layer_unsharded_bytes + got.root_unsharded_bytes);
}

TEST(FsdpParity, ReshardAfterForwardToTwoRankSubgroup) {
  if (world_size() % 2 != 0 || world_size() == 2) GTEST_SKIP() << "needs an even world > 2";
  ParityConfig s;
  s.reshard_after_forward = 2;
  expect_parity(s, /*subgroup=*/true);
}

TEST(FsdpParity, Hsdp) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "HSDP with 2 replicas needs an even world";
  ParityConfig s;
  s.replicate = 2;  // 2 x 2 at 4 ranks, 2 x 1 at 2 ranks
  expect_parity(s);
}

// The checkpointed layers recompute their forward inside backward, after the
// pre-backward hook re-gathered their parameters.
TEST(FsdpParity, ActivationCheckpointing) {
  ParityConfig s;
  s.activation_checkpointing = true;
  expect_parity(s);
}

TEST(FsdpParity, GradientAccumulationWithoutSync) {
  ParityConfig s;
  s.microbatches = 3;
  s.accumulation = Accumulation::NoGradientSync;
  expect_parity(s);
}

TEST(FsdpParity, HsdpAccumulationWithoutAllReduce) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "HSDP with 2 replicas needs an even world";
  ParityConfig s;
  s.replicate = 2;
  s.microbatches = 2;
  s.accumulation = Accumulation::NoAllReduce;
  expect_parity(s);
}

TEST(FsdpParity, HsdpAccumulationWithoutSyncAndResharding) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "HSDP with 2 replicas needs an even world";
  ParityConfig s;
  s.replicate = 2;
  s.microbatches = 2;
  s.reshard_after_forward = false;
  s.accumulation = Accumulation::NoGradientSync;
  expect_parity(s);
}

// bf16 all-gather and compute, fp32 reduction, outputs and masters, against
// the single-process mixed-precision reference (fp32 masters, bf16 copies for
// forward/backward, fp32 gradient sums). Per rank the bf16 math is the same;
// the fp32 gradient sums differ in order (1e-7 relative), and once a master
// lands on the other side of a bf16 rounding boundary its bf16 copy moves by
// one bf16 ulp (2^-8 relative). Tolerances: losses rtol 1e-3, parameters
// |diff| <= 1e-3 + 1e-3 |want|. (Observed at 2-4 ranks: equal to 1e-9, the
// MPI sums happen to run in the reference's rank order; the margin covers
// backends that sum in another order.)
constexpr double kBf16LossRtol = 1e-3;
constexpr double kBf16ParamTol = 1e-3;

TEST(FsdpParity, MixedPrecisionBf16) {
  ParityConfig s;
  s.mp.param_dtype = at::kBFloat16;
  s.mp.reduce_dtype = at::kFloat;
  s.mp.output_dtype = at::kFloat;
  const RunResult want = run_reference(world_size(), s);
  const RunResult got = run_fsdp(s);
  expect_close_losses(got, want, kBf16LossRtol);
  expect_close_params(got, want, kBf16ParamTol, kBf16ParamTol);
  expect_counts(got, s, false);
  EXPECT_EQ(got.unsharded_dtype, at::kBFloat16);
  for (const auto& [name, sp] : got.sharded) EXPECT_EQ(sp.local.scalar_type(), at::kFloat) << name;
}

TEST(FsdpParity, ShardedStateDict) {
  ParityConfig s;
  s.steps = 2;
  const RunResult got = run_fsdp(s);
  const int world = world_size();
  const int rank = dist::world()->rank();
  for (const auto& [name, sp] : got.sharded) {
    const at::Tensor& full = got.params.at(name);
    EXPECT_EQ(sp.spec.global_shape(), full.sizes().vec()) << name;
    EXPECT_EQ(sp.shard.size, world);
    EXPECT_EQ(sp.shard.rank, rank);
    const int64_t rows = full.size(0);
    const int64_t chunk = (rows + world - 1) / world;
    const int64_t begin = std::min(rows, chunk * rank);
    const int64_t local = std::min(rows, begin + chunk) - begin;
    EXPECT_EQ(sp.dim0_offset, begin) << name;
    ASSERT_EQ(sp.local.size(0), local) << name;
    EXPECT_TRUE(sp.local.equal(full.narrow(0, begin, local))) << name;
    tensor::MeshCoords coords{{kShardMeshDim, tensor::GroupCoord{world, rank}}};
    EXPECT_EQ(sp.spec.local_offset(coords)[0], begin) << name;
  }
}

// Node-shared parameters (every rank of these tests runs on one machine): the
// run of one process, with no all-gather at all, for FSDP and HSDP, bf16
// compute, activation checkpointing and micro batches without reduction.
TEST(FsdpParity, NodeSharedParams) {
  for (int replicate : {1, 2}) {
    if (world_size() % replicate != 0 || world_size() / replicate < 2) continue;
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(::testing::Message() << "replicate " << replicate << ", variant " << variant);
      ParityConfig s;
      s.replicate = replicate;
      s.node_shared_params = true;
      s.steps = 4;
      double loss_rtol = kLossRtol, param_rtol = kParamRtol, param_atol = kParamAtol;
      if (variant == 1) {
        s.mp.param_dtype = at::kBFloat16;
        s.mp.reduce_dtype = at::kFloat;
        loss_rtol = kBf16LossRtol;
        param_rtol = param_atol = kBf16ParamTol;
      } else if (variant == 2) {
        s.activation_checkpointing = true;
        s.microbatches = 2;
        s.accumulation = Accumulation::NoGradientSync;
      }
      const RunResult want = run_reference(world_size(), s);
      const RunResult got = run_fsdp(s);
      expect_close_losses(got, want, loss_rtol);
      expect_close_params(got, want, param_rtol, param_atol);
      expect_every_embedding_row_changed(got);
      for (size_t i = 0; i < got.counts.size(); ++i) {
        EXPECT_EQ(got.counts[i].forward_all_gathers, 0) << "microbatch " << i;
        EXPECT_EQ(got.counts[i].backward_all_gathers, 0) << "microbatch " << i;
        const bool reduces = s.accumulation != Accumulation::NoGradientSync || i % 2 == 1;
        EXPECT_EQ(got.counts[i].reduce_scatters, reduces ? s.layers + 1 : 0) << "microbatch " << i;
      }
    }
  }
}

// Reduce as you go: when backward reaches the first layer's input (all
// later layers done), the later layers' reduce-scatters have completed, their
// packed inputs are freed and their HSDP all-reduces issued, while backward
// still runs; only the last layers' buffers are alive.
TEST(FsdpParity, ReductionsFinishDuringBackward) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "HSDP with 2 replicas needs an even world";
  constexpr int kLayers = 6;
  const Groups& g = groups_for(2);
  const int64_t vocab = vocab_for(world_size());
  auto model = make_model(vocab, kLayers, 77);
  FSDPMesh mesh(g.shard, g.replicate);
  std::vector<FSDPModule> layers;
  for (const auto& layer : model->decoder_layers()) layers.push_back(fully_shard(*layer, mesh));
  FSDPModule root = fully_shard(*model, mesh);
  int64_t all_reduces_seen = -1;
  int64_t buffers_seen = -1;
  model->decoder_layers().front()->add_pre_hook([&](nn::Module&, nn::Tensors inputs) {
    inputs[0].register_hook([&](const at::Tensor&) {
      all_reduces_seen = g.replicate->counters().count(dist::CollectiveKind::AllReduce);
      buffers_seen = root.memory_stats().gradient_buffer_bytes;
    });
    return inputs;
  });
  g.replicate->reset_counters();
  const at::Tensor ids = batch(vocab, 0, 0, g.world->rank());
  lm_loss(model->call(ids), ids).backward();
  // Layers kLayers-1 .. 2 finished at the post-backward of the layer before them.
  EXPECT_GE(all_reduces_seen, kLayers - 2);
  int64_t layer_packed = 0;  // fp32 bytes of one layer's unsharded gradient, padded
  for (auto& l : layers) {
    int64_t bytes = 0;
    for (const FSDPParam* p : l.param_group()->params()) bytes += 4 * p->padded_shard_numel() * mesh.shard_size();
    layer_packed = std::max(layer_packed, bytes);
  }
  // At most the packed input of one layer (layer 1's, in flight) and the
  // sharded-size reduce outputs awaiting the final callback.
  EXPECT_LE(buffers_seen, layer_packed + kLayers * layer_packed / mesh.shard_size());
  EXPECT_EQ(g.replicate->counters().count(dist::CollectiveKind::AllReduce), kLayers + 1);
}

}  // namespace
}  // namespace tessel::fsdp::testing
