// The trainer under tensor parallelism at 4 ranks, in one launch: the same
// tied-embedding model (tiny-qwen2) and data trained for 10 steps on one
// process, on TP 2 with each plan source (optimized, HF fallback, custom
// plans in YAML and in the reference's Python format) and on TP 2 x FSDP 2 gives the same loss and gradient norm per
// step (SPEC 8) and the same final parameters. Every other family's optimized
// plan trains alike, with and without sequence parallelism. Checkpoints written under
// TP 2 x FSDP 2 resume on one process and on TP 2 (another mesh) and continue
// the uninterrupted loss curve.
//
// Sub-meshes: a layout of world 1 or 2 runs on split communicators (ranks
// {0,1} and {2,3} each run their own copy), so many layouts share one
// mpirun.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <unistd.h>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "parallel/optimized_plans.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"
#include "train/layout_parity.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using testing::expect_same_steps;
using testing::quiet;
using testing::TrainFixture;


// A mesh of `world_size` ranks with tensor parallelism `tp` on the group of
// this rank: the world split into consecutive blocks of world_size ranks.
dist::DeviceMesh mesh_of(int world_size, int tp) {
  dist::MeshSizes sizes;
  sizes.world_size = world_size;
  sizes.tp = tp;
  return testing::block_mesh(sizes);
}

fs::path shared_dir(const std::string& tag) { return testing::shared_dir("tp_train_" + tag); }

class TpTrainingParity : public TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
    // The seed's dotted plan path resolves against the source tree.
    ::setenv("TESSEL_PLAN_PATH", testing::source_dir().c_str(), 1);
  }

  std::vector<std::string> base(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> o = {"policy.model_name=tiny-qwen2", "sft.max_num_steps=10",
                                  "policy.train_global_batch_size=4", "policy.train_micro_batch_size=2"};
    o.insert(o.end(), extra.begin(), extra.end());
    return o;
  }

  TrainResult run(int world_size, int tp, const std::vector<std::string>& extra = {}) {
    auto o = base(extra);
    o.push_back("policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(tp));
    return train(make_config(o), mesh_of(world_size, tp), quiet());
  }
};

TEST_F(TpTrainingParity, EveryPlanSourceAndTpTimesFsdpMatchOneProcess) {
  const TrainResult ref = run(1, 1);
  EXPECT_LT(ref.steps.back().loss, ref.steps.front().loss);

  expect_same_steps(run(2, 2).steps, ref.steps, "tp2 optimized");
  expect_same_steps(run(2, 2, {"policy.dtensor_cfg.sequence_parallel=true"}).steps, ref.steps, "tp2 optimized+sp");
  // The seed's dotted path names custom_parallel.py (it wins over the YAML
  // file of the same name; both are run, see PythonPlanFilesMatchOneProcess).
  expect_same_steps(run(2, 2, {"policy.dtensor_cfg.custom_parallel_plan="
                               "examples/custom_parallel/custom_parallel.yaml:custom_parallel_plan"})
                        .steps,
                    ref.steps, "tp2 YAML custom plan");
  {
    // No optimized plan registered: resolution falls back to the HF plan.
    const auto builder = parallel::find_optimized_plan("Qwen2ForCausalLM");
    ASSERT_TRUE(builder.has_value());
    parallel::unregister_optimized_plan("Qwen2ForCausalLM");
    const TrainResult hf = run(2, 2);
    parallel::register_optimized_plan("Qwen2ForCausalLM", *builder);
    expect_same_steps(hf.steps, ref.steps, "tp2 hf plan");
  }

  // TP 2 x FSDP 2, checkpointed at the end; its parameters, gathered from
  // the rank files, equal the single process's.
  const fs::path ckpt = shared_dir("final");
  const TrainResult two_d = run(4, 2, {"checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + ckpt.string()});
  expect_same_steps(two_d.steps, ref.steps, "tp2 x fsdp2");
  const auto saved = load_full_tensors(ckpt / "step_10");
  std::map<std::string, at::Tensor> ref_params;
  for (const auto& item : ref.model.model->named_parameters()) ref_params[item.key()] = item.value().detach();
  ASSERT_EQ(saved.size(), ref_params.size());
  for (const auto& [name, full] : saved) {
    ASSERT_TRUE(ref_params.count(name)) << name;
    EXPECT_TRUE(at::allclose(full, ref_params.at(name), 1e-4, 1e-5))
        << name << " max diff " << (full - ref_params.at(name)).abs().max().item<float>();
  }
  // Each rank's live shard is the box its ShardSpec [tp, dp_shard_cp] names
  // in the single-process parameters.
  for (const auto& [name, p] : mesh_state_dict(two_d.model)) {
    const at::Tensor expected = p.spec.local_view(ref_params.at(name), p.coords);
    ASSERT_EQ(expected.sizes(), p.local.sizes()) << name << " " << p.spec.to_string();
    EXPECT_TRUE(at::allclose(p.local.detach(), expected, 1e-4, 1e-5)) << name << " " << p.spec.to_string();
  }
  dist::world()->barrier();
  if (dist::world()->rank() == 0) fs::remove_all(ckpt);
}

// Node-shared parameters through the trainer (all four ranks share this
// machine): FSDP 2 (two copies of it, on ranks {0,1} and {2,3}: each pair
// shares its own memory), and TP 2 x FSDP 2 (each tp rank's FSDP group has
// its own copy), against one process.
TEST_F(TpTrainingParity, NodeSharedParamsMatchOneProcess) {
  const TrainResult ref = run(1, 1);
  expect_same_steps(run(2, 1, {"policy.dtensor_cfg.node_shared_params=true"}).steps, ref.steps,
                    "fsdp2 node-shared");
  expect_same_steps(run(4, 2, {"policy.dtensor_cfg.node_shared_params=true"}).steps, ref.steps,
                    "tp2 x fsdp2 node-shared");
}

// The reference's plan format: each plan of examples/custom_parallel/
// custom_parallel.py (plain Megatron, output projections that gather instead
// of summing, sequence parallel by keyword inputs), selected by the seed's
// dotted path, at TP 2 and TP 2 x FSDP 2.
TEST_F(TpTrainingParity, PythonPlanFilesMatchOneProcess) {
  const TrainResult ref = run(1, 1);
  for (const char* plan : {"custom_parallel_plan", "gathered_output_projections", "sequence_parallel_plan"}) {
    const std::string choice =
        std::string("policy.dtensor_cfg.custom_parallel_plan=examples.custom_parallel.custom_parallel.") + plan;
    expect_same_steps(run(2, 2, {choice}).steps, ref.steps, std::string("tp2 ") + plan);
    expect_same_steps(run(4, 2, {choice}).steps, ref.steps, std::string("tp2 x fsdp2 ") + plan);
  }
}

TEST_F(TpTrainingParity, EveryFamilysOptimizedPlanWithAndWithoutSequenceParallel) {
  for (const char* preset : {"tiny-llama", "tiny-mistral", "tiny-qwen3", "tiny-gemma3"}) {
    const std::string model = std::string("policy.model_name=") + preset;
    const TrainResult ref = run(1, 1, {model});
    expect_same_steps(run(2, 2, {model}).steps, ref.steps, std::string(preset) + " tp2");
    expect_same_steps(run(4, 2, {model, "policy.dtensor_cfg.sequence_parallel=true"}).steps, ref.steps,
                      std::string(preset) + " tp2+sp x fsdp2");
  }
}

TEST_F(TpTrainingParity, CheckpointFromTpTimesFsdpResumesOnOtherMeshes) {
  const TrainResult ref = run(1, 1);
  const fs::path dir = shared_dir("resume");
  const fs::path saved = dir / "tp2_x_fsdp2";
  const std::vector<std::string> ckpt = {"checkpointing.enabled=true", "checkpointing.save_period=5",
                                         "checkpointing.checkpoint_dir=" + saved.string()};
  auto first_half = base(ckpt);
  first_half.push_back("sft.max_num_steps=5");
  first_half.push_back("policy.dtensor_cfg.tensor_parallel_size=2");
  const TrainResult half = train(make_config(first_half), mesh_of(4, 2), quiet());
  expect_same_steps(half.steps, {ref.steps.begin(), ref.steps.begin() + 5}, "first 5 steps at tp2 x fsdp2");

  // Each resumed run gets its own copy (it writes its own step_10).
  const int rank = dist::world()->rank();
  if (rank == 0) {
    for (const char* copy : {"world1", "tp2"}) fs::copy(saved, dir / copy, fs::copy_options::recursive);
  }
  dist::world()->barrier();
  auto resume = [&](const char* copy) {
    return std::vector<std::string>{"checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + (dir / copy).string()};
  };
  // Meshes are built on every rank (splitting is collective over the world).
  // World 1 runs on rank 0 only (one writer of its checkpoint), TP 2 on
  // ranks 2-3.
  const dist::DeviceMesh one = mesh_of(1, 1);
  const dist::DeviceMesh tp2 = mesh_of(2, 2);
  if (rank == 0) {
    expect_same_steps(train(make_config(base(resume("world1"))), one, quiet()).steps, ref.steps,
                      "resumed at world 1", 5);
  }
  if (rank >= 2) {
    auto o = base(resume("tp2"));
    o.push_back("policy.dtensor_cfg.tensor_parallel_size=2");
    expect_same_steps(train(make_config(o), tp2, quiet()).steps, ref.steps, "resumed at tp 2", 5);
  }
  dist::world()->barrier();
  if (rank == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace tessel::train
