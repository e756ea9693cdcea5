// Single-process FSDP tests (world 1): sharding arithmetic, errors for
// misuse, parity of the hook machinery with one rank, explicit state changes.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fsdp/buffer_pool.h"
#include "fsdp/fsdp_collectives.h"
#include "fsdp/fsdp_parity.h"

namespace tessel::fsdp::testing {
namespace {

FSDPMesh world_mesh() { return FSDPMesh(dist::world()); }

TEST(FsdpParam, ChunksDimZeroLikeTorchChunk) {
  at::Tensor t = at::arange(7 * 3, at::TensorOptions().dtype(at::kFloat)).view({7, 3});
  // 7 rows over 4 ranks: 2, 2, 2, 1.
  for (int r = 0; r < 4; ++r) {
    FSDPParam p("w", t, 4, r);
    EXPECT_EQ(p.padded_rows(), 2);
    EXPECT_EQ(p.local_rows(), r < 3 ? 2 : 1);
    EXPECT_EQ(p.dim0_offset(), 2 * r);
    EXPECT_EQ(p.padded_shard_numel(), 6);
  }
  // 2 rows over 3 ranks: 1, 1, 0 (empty trailing shard).
  at::Tensor b = at::ones({2});
  FSDPParam last("b", b, 3, 2);
  EXPECT_EQ(last.local_rows(), 0);
  EXPECT_EQ(last.dim0_offset(), 2);
  EXPECT_EQ(last.padded_rows(), 1);
}

TEST(FsdpCollectives, PackIsRankMajor) {
  // Two params over a fake 3-rank group: each rank's row of the packed buffer
  // holds its dim-0 chunk of every gradient, zero-padded, parameter after
  // parameter.
  at::Tensor a = at::arange(5 * 2, at::TensorOptions().dtype(at::kFloat)).view({5, 2});
  at::Tensor b = at::arange(4, at::TensorOptions().dtype(at::kFloat)) + 100;
  FSDPParam pa("a", a, 3, 0), pb("b", b, 3, 0);
  pa.set_shard_offset(0);
  pb.set_shard_offset(pa.padded_shard_numel());
  const int64_t L = pa.padded_shard_numel() + pb.padded_shard_numel();  // 4 + 2
  std::vector<FSDPParam*> ps{&pa, &pb};
  at::Tensor packed = at::full({3 * L}, -7.0);  // whatever was in a reused buffer
  pack_for_reduce_scatter(ps, {a, b}, 3, L, packed);
  // a (5 rows of 2, chunks of 2, 2, 1 rows), b (4 elements, chunks 2, 2, 0).
  EXPECT_TRUE(packed.view({3, L}).equal(at::tensor({0.f, 1.f, 2.f, 3.f, 100.f, 101.f,  //
                                                    4.f, 5.f, 6.f, 7.f, 102.f, 103.f,  //
                                                    8.f, 9.f, 0.f, 0.f, 0.f, 0.f})
                                            .view({3, L})));

  // A parameter without a gradient packs as zeros on every rank, whatever
  // the reused buffer held, and the one after it is still in place.
  packed.fill_(-7.0);
  pack_for_reduce_scatter(ps, {at::Tensor(), b}, 3, L, packed);
  EXPECT_TRUE(packed.view({3, L}).equal(at::tensor({0.f, 0.f, 0.f, 0.f, 100.f, 101.f,  //
                                                    0.f, 0.f, 0.f, 0.f, 102.f, 103.f,  //
                                                    0.f, 0.f, 0.f, 0.f, 0.f, 0.f})
                                            .view({3, L})));
}

TEST(BufferPool, ReusesFreedBlocksOfTheSameSize) {
  BufferPool pool(/*max_free_blocks=*/2);
  void* first = nullptr;
  {
    at::Tensor a = pool.empty(1000, at::kFloat);
    first = a.data_ptr();
    EXPECT_EQ(pool.free_bytes(), 0);
  }
  EXPECT_EQ(pool.free_bytes(), 4000);  // back in the pool, not freed
  at::Tensor b = pool.empty(1000, at::kFloat);
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(pool.free_bytes(), 0);
  at::Tensor c = pool.empty(500, at::kFloat);  // another size: a new block
  EXPECT_NE(c.data_ptr(), first);
  at::Tensor d = pool.empty(10, at::kFloat), e = pool.empty(20, at::kFloat), f = pool.empty(30, at::kFloat);
  d = at::Tensor();
  e = at::Tensor();
  f = at::Tensor();
  EXPECT_EQ(pool.free_bytes(), 4 * (20 + 30));  // at most 2 free blocks: the oldest went back to the C library
}

TEST(FullyShard, ReplacesParametersBySharedShards) {
  auto model = make_model(9, 2, 7);
  for (const auto& layer : model->decoder_layers()) fully_shard(*layer, world_mesh());
  fully_shard(*model, world_mesh());
  // Tied embedding and lm_head still share one tensor, now the shard.
  EXPECT_TRUE(
      model->embed_tokens().parameter("weight").is_same(model->lm_head().parameter("weight")));
  EXPECT_EQ(unique_parameters(*model).size(), model->parameters().size() - 1);
  for (const auto& p : unique_parameters(*model)) {
    EXPECT_EQ(p.scalar_type(), at::kFloat);
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
}

TEST(FullyShard, AppliedTwiceIsAnError) {
  auto model = make_model(9, 1, 7);
  fully_shard(*model->decoder_layers()[0], world_mesh());
  EXPECT_THROW(fully_shard(*model->decoder_layers()[0], world_mesh()), tessel::Error);
}

TEST(FullyShard, TiedParametersInDifferentGroupsAreAnError) {
  auto model = make_model(9, 1, 7);
  fully_shard(model->lm_head(), world_mesh());
  try {
    fully_shard(*model, world_mesh());
    FAIL() << "expected an error for the embedding tied to a separately sharded lm_head";
  } catch (const tessel::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("embed_tokens.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("lm_head"), std::string::npos) << what;
    EXPECT_NE(what.find("Tied parameters must live in one parameter group"), std::string::npos)
        << what;
  }
}

TEST(FullyShard, TiedParametersInSiblingGroupsAreAnError) {
  // Neither group is below the other: the embedding's group marked the
  // tensor it took, and lm_head still holds that tensor.
  auto model = make_model(9, 1, 7);
  fully_shard(model->embed_tokens(), world_mesh());
  try {
    fully_shard(model->lm_head(), world_mesh());
    FAIL() << "expected an error for lm_head tied to the separately sharded embedding";
  } catch (const tessel::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("lm_head.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("embed_tokens.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("Tied parameters must live in one parameter group"), std::string::npos) << what;
  }
}

TEST(FullyShard, TopDownOrderIsAnError) {
  auto model = make_model(9, 1, 7);
  fully_shard(*model, world_mesh());
  try {
    fully_shard(*model->decoder_layers()[0], world_mesh());
    FAIL() << "expected an error for a layer whose parameters the root's group already holds";
  } catch (const tessel::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("already a shard of another FSDP group"), std::string::npos) << what;
    EXPECT_NE(what.find("bottom-up"), std::string::npos) << what;
  }
}

TEST(FullyShard, StateBelongsToTheModule) {
  auto model = make_model(9, 1, 7);
  auto& layer = *model->decoder_layers()[0];
  fully_shard(layer, world_mesh());
  // Found from the module itself, and gone with it: no table outlives it.
  std::weak_ptr<tessel::nn::AttachedState> state = layer.attached_state();
  ASSERT_FALSE(state.expired());
  EXPECT_TRUE(fsdp_module(layer).has_value());
  EXPECT_FALSE(fsdp_module(*model).has_value());
  model.reset();
  EXPECT_TRUE(state.expired());
}

TEST(FullyShard, InvalidReshardGroupSize) {
  auto model = make_model(9, 1, 7);
  FSDPOptions options;
  options.reshard_after_forward = 3;  // does not divide world 1
  EXPECT_THROW(fully_shard(*model->decoder_layers()[0], world_mesh(), options), tessel::UsageError);
}

TEST(FullyShard, NodeSharedParamsRefuseASliceKeptAfterForward) {
  auto model = make_model(9, 1, 7);
  FSDPOptions options;
  options.reshard_after_forward = 1;
  options.node_shared_params = true;
  try {
    fully_shard(*model->decoder_layers()[0], world_mesh(), options);
    FAIL() << "no error";
  } catch (const tessel::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("node_shared_params"), std::string::npos) << e.what();
  }
}

TEST(FsdpParityWorld1, MatchesPlainTraining) {
  if (dist::world()->size() != 1) GTEST_SKIP();
  ParityConfig s;
  s.steps = 5;
  const RunResult want = run_reference(1, s);
  const RunResult got = run_fsdp(s);
  for (size_t i = 0; i < want.losses.size(); ++i) EXPECT_NEAR(got.losses[i], want.losses[i], 1e-6);
  for (const auto& [name, w] : want.params) {
    EXPECT_TRUE(at::allclose(got.params.at(name), w, 1e-5, 1e-6)) << name;
  }
}

TEST(FsdpParityWorld1, GradientAccumulationMatches) {
  if (dist::world()->size() != 1) GTEST_SKIP();
  ParityConfig s;
  s.steps = 3;
  s.microbatches = 2;
  s.accumulation = Accumulation::NoGradientSync;
  const RunResult want = run_reference(1, s);
  const RunResult got = run_fsdp(s);
  for (size_t i = 0; i < want.losses.size(); ++i) EXPECT_NEAR(got.losses[i], want.losses[i], 1e-6);
  for (const auto& [name, w] : want.params) {
    EXPECT_TRUE(at::allclose(got.params.at(name), w, 1e-5, 1e-6)) << name;
  }
}

TEST(FsdpParityWorld1, MixedPrecisionRuns) {
  if (dist::world()->size() != 1) GTEST_SKIP();
  ParityConfig s;
  s.steps = 3;
  s.mp.param_dtype = at::kBFloat16;
  s.mp.reduce_dtype = at::kFloat;
  s.mp.output_dtype = at::kFloat;
  const RunResult want = run_reference(1, s);
  const RunResult got = run_fsdp(s);
  for (size_t i = 0; i < want.losses.size(); ++i)
    EXPECT_NEAR(got.losses[i], want.losses[i], 2e-2 * want.losses[i]);
}

TEST(FsdpModule, ExplicitUnshardAndReshardTrackMemory) {
  auto model = make_model(9, 1, 7);
  auto layer = fully_shard(*model->decoder_layers()[0], world_mesh());
  auto* group = layer.param_group();
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->sharded_state(), ShardedState::Sharded);
  layer.unshard();
  EXPECT_EQ(group->sharded_state(), ShardedState::Unsharded);
  EXPECT_EQ(layer.memory_stats().unsharded_param_bytes, group->unsharded_param_bytes());
  // The unsharded param of a 1-rank group equals its shard.
  for (const FSDPParam* p : group->params()) {
    EXPECT_TRUE(p->unsharded_param().equal(p->sharded_param())) << p->fqn();
  }
  layer.reshard();
  EXPECT_EQ(group->sharded_state(), ShardedState::Sharded);
  EXPECT_EQ(layer.memory_stats().unsharded_param_bytes, 0);
  EXPECT_GE(layer.memory_stats().peak_unsharded_param_bytes, group->unsharded_param_bytes());
}

TEST(StateDict, LoadFullStateDictRoundTrips) {
  auto source = make_model(9, 2, 11);
  std::vector<std::pair<std::string, at::Tensor>> full;
  for (const auto& item : source->named_parameters())
    full.emplace_back(item.key(), item.value().detach().clone());
  auto model = make_model(9, 2, 12);
  for (const auto& layer : model->decoder_layers()) fully_shard(*layer, world_mesh());
  fully_shard(*model, world_mesh());
  load_full_state_dict(*model, full);
  auto back = full_state_dict(*model);
  ASSERT_EQ(back.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(back[i].first, full[i].first);
    EXPECT_TRUE(back[i].second.equal(full[i].second)) << full[i].first;
  }
}

}  // namespace
}  // namespace tessel::fsdp::testing
