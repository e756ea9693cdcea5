// The trainer under context parallelism against one process (SPEC 8): 10
// steps of the same model and data give the same loss, gradient norm and
// valid-token count per step, and the same final parameters, at CP 2, CP 4,
// CP 2 x FSDP 2, CP 2 x TP 2 and at 8 ranks HSDP 2 x (FSDP 2 x CP 2) for
// Llama, Mistral (a sliding window shorter than the rows) and Gemma3
// (local/global layers, softcapping), for Llama also with sequence
// parallelism and CP 2 x TP 2 x FSDP 2; packed rows keep documents apart
// across chunks; a checkpoint written under CP 2 x FSDP 2 resumes on one
// process and on CP 2.
//
// Rows of the tiny SFT set are 30-40 tokens of differing length: they are
// padded to a multiple of 2·cp, so the chunks cut through prompts,
// responses and padding alike.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "train/checkpoint.h"
#include "train/layout_parity.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using testing::expect_same_steps;
using testing::quiet;
using testing::TrainFixture;

struct Layout {
  int world = 1, cp = 1, tp = 1, replicate = 1;
  std::string name() const {
    return "world " + std::to_string(world) + " (cp " + std::to_string(cp) + ", tp " + std::to_string(tp) +
           ", dp_replicate " + std::to_string(replicate) + ")";
  }
};

class ContextParallelParity : public TrainFixture {
 protected:
  std::vector<std::string> base(const std::vector<std::string>& extra) const {
    std::vector<std::string> o = {"sft.max_num_steps=10", "policy.train_global_batch_size=4",
                                  "policy.train_micro_batch_size=1"};
    o.insert(o.end(), extra.begin(), extra.end());
    return o;
  }

  // Every rank builds every mesh (splitting is collective); only the ranks
  // of the first block of `l.world` ranks report, the others run copies.
  TrainResult run(const Layout& l, const std::vector<std::string>& extra = {}) {
    auto o = base(extra);
    o.push_back("policy.dtensor_cfg.context_parallel_size=" + std::to_string(l.cp));
    o.push_back("policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(l.tp));
    o.push_back("policy.dtensor_cfg.dp_replicate_size=" + std::to_string(l.replicate));
    dist::MeshSizes sizes;
    sizes.world_size = l.world;
    sizes.cp = l.cp;
    sizes.tp = l.tp;
    sizes.dp_replicate = l.replicate;
    return train(make_config(o), testing::block_mesh(sizes), quiet());
  }

  void expect_layouts_match_one_process(const std::vector<std::string>& extra, const std::vector<Layout>& layouts,
                                        const std::string& what) {
    // At 8 ranks only the 8-rank layouts run (the others ran at 4).
    const int world = dist::world()->size();
    std::vector<Layout> here;
    for (const Layout& l : layouts) {
      if (l.world <= world && (world < 8 || l.world == 8)) here.push_back(l);
    }
    if (here.empty()) GTEST_SKIP() << "no layout of " << what << " for " << world << " ranks";
    const TrainResult ref = run(Layout{}, extra);
    EXPECT_LT(ref.steps.back().loss, ref.steps.front().loss) << what;
    for (const Layout& l : here) {
      const TrainResult got = run(l, extra);
      expect_same_steps(got.steps, ref.steps, what + " at " + l.name());
      // Final parameters: each rank's shards against the same box of the
      // single process's parameters.
      std::map<std::string, at::Tensor> ref_params;
      for (const auto& item : ref.model.model->named_parameters()) ref_params[item.key()] = item.value().detach();
      for (const auto& [name, p] : mesh_state_dict(got.model)) {
        const at::Tensor expected = p.spec.local_view(ref_params.at(name), p.coords);
        EXPECT_TRUE(at::allclose(p.local.detach(), expected, 1e-4, 1e-5)) << what << " at " << l.name() << ": " << name;
      }
    }
  }
};

TEST_F(ContextParallelParity, LlamaAtEveryLayout) {
  expect_layouts_match_one_process({"policy.model_name=tiny-llama"},
                                   {{2, 2}, {4, 4}, {4, 2}, {4, 2, 2}, {8, 2, 1, 2}, {8, 2, 2, 1}}, "tiny-llama");
}

TEST_F(ContextParallelParity, SequenceParallelInsideContextParallel) {
  expect_layouts_match_one_process({"policy.model_name=tiny-llama", "policy.dtensor_cfg.sequence_parallel=true"},
                                   {{4, 2, 2}}, "tiny-llama tp+sp");
}

// Checkpointed layers run their forward, ring included, again in backward.
TEST_F(ContextParallelParity, ActivationCheckpointingRerunsTheRing) {
  expect_layouts_match_one_process({"policy.model_name=tiny-llama", "policy.dtensor_cfg.activation_checkpointing=true"},
                                   {{4, 2}}, "tiny-llama activation checkpointing");
}

TEST_F(ContextParallelParity, SlidingWindowsAndGemmaLayers) {
  for (const char* preset : {"tiny-mistral", "tiny-gemma3"}) {
    expect_layouts_match_one_process({std::string("policy.model_name=") + preset},
                                     {{2, 2}, {4, 4}, {4, 2}, {4, 2, 2}, {8, 2, 1, 2}}, preset);
  }
}

TEST_F(ContextParallelParity, PackedRowsKeepDocumentsApartAcrossChunks) {
  expect_layouts_match_one_process({"policy.model_name=tiny-llama", "policy.sequence_packing.enabled=true"},
                                   {{2, 2}, {4, 4}, {4, 2}}, "tiny-llama packed");
}

TEST_F(ContextParallelParity, CheckpointResumesOnOtherCpSizes) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  const std::vector<std::string> model = {"policy.model_name=tiny-llama"};
  const TrainResult ref = run(Layout{}, model);
  const fs::path dir = testing::shared_dir("cp_resume");
  auto first_half = model;
  first_half.insert(first_half.end(), {"checkpointing.enabled=true", "checkpointing.save_period=5",
                                       "checkpointing.checkpoint_dir=" + (dir / "saved").string(), "sft.max_num_steps=5"});
  const TrainResult half = run(Layout{4, 2}, first_half);
  expect_same_steps(half.steps, {ref.steps.begin(), ref.steps.begin() + 5}, "first 5 steps at cp 2 x fsdp 2");
  const int rank = dist::world()->rank();
  if (rank == 0) {
    for (const char* copy : {"world1", "cp2"}) fs::copy(dir / "saved", dir / copy, fs::copy_options::recursive);
  }
  dist::world()->barrier();
  auto resume = [&](const char* copy) {
    auto o = model;
    o.insert(o.end(), {"checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + (dir / copy).string()});
    return o;
  };
  // Meshes are built on every rank; world 1 runs on rank 0, CP 2 on ranks 2-3.
  dist::MeshSizes one, cp2;
  cp2.world_size = 2;
  cp2.cp = 2;
  const dist::DeviceMesh mesh_one = testing::block_mesh(one);
  const dist::DeviceMesh mesh_cp2 = testing::block_mesh(cp2);
  if (rank == 0) {
    expect_same_steps(train(make_config(base(resume("world1"))), mesh_one, quiet()).steps, ref.steps,
                      "resumed at world 1", 5);
  }
  if (rank >= 2) {
    auto o = base(resume("cp2"));
    o.push_back("policy.dtensor_cfg.context_parallel_size=2");
    expect_same_steps(train(make_config(o), mesh_cp2, quiet()).steps, ref.steps, "resumed at cp 2", 5);
  }
  dist::world()->barrier();
  if (rank == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace tessel::train
