// The trainer with expert parallelism on the MoE presets (tiny-qwen3-moe,
// tiny-mixtral) against one process, 10 steps. At 4 ranks, in one launch: EP 2
// (each half of the world runs its own copy), EP 4, and EP 2 x FSDP 2 (the
// experts FSDP-sharded over ep_shard of 2, the dense part over dp_shard of 4).
// At 8 ranks: EP 2 with HSDP 2 (the seed's dp_size = 8 / 2 = 4 admits
// dp_replicate 2; dense HSDP 2 x 4, experts over ep_shard of 4).
// Loss (cross-entropy plus the load-balancing term), aux loss and gradient
// norm per step, and the final parameters: every rank compares the experts
// it holds and the dense parameters, and the experts of the ep group
// together are all of them. The presets' routing leaves experts without
// tokens from some ranks (asserted through the dispatch's counters).
// EP 2 x FSDP 2 with activation checkpointing.
// Checkpoints written under EP 2 x FSDP 2 resume at world 1, EP 2 and EP 4,
// one written under EP 2 x HSDP 2 at world 1 (steps 6-10 as one process's,
// each element in one rank file); Hugging Face weights load under EP 2 x
// FSDP 2. A dense model with ep > 1 is refused naming the key.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "io/safetensors_file.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/pretrained.h"
#include "train/layout_parity.h"
#include "train/moe_parity.h"
#include "train/train_fixture.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using testing::quiet;
using testing::TrainFixture;

dist::MeshSizes sizes_of(int world_size, int ep, int dp_replicate = 1) {
  return testing::moe_sizes(world_size, dp_replicate, ep);
}

class MoeExpertParallelParity : public TrainFixture {
 protected:
  TrainResult run(const std::string& preset, const dist::MeshSizes& sizes, int micro_batch,
                  const std::vector<std::string>& extra = {}) {
    std::vector<std::string> o = testing::moe_run_overrides(preset, sizes, micro_batch);
    o.insert(o.end(), extra.begin(), extra.end());
    return train(make_config(o), testing::block_mesh(sizes), quiet());
  }

  fs::path save_half(const std::string& preset, const dist::MeshSizes& save_sizes,
                     const std::vector<std::string>& extra, const TrainResult& ref,
                     const std::vector<std::string>& copies);
  static void expect_each_element_once(const fs::path& step_dir);

  static void expect_same_steps(TrainResult& got, TrainResult& ref, const std::string& what) {
    testing::expect_same_moe_steps(got, ref, what);
    ASSERT_TRUE(got.model.ep_group) << what << ": expert parallelism was not applied";
    EXPECT_GT(got.model.expert_stats->rows_sent, 0) << what << ": no token crossed ranks";
    // Uneven routing: some rank routed no token to some expert in some layer call.
    at::Tensor empty = at::tensor({got.model.expert_stats->experts_without_tokens}, at::kLong);
    got.model.ep_group->all_reduce(empty);
    EXPECT_GT(empty.item<int64_t>(), 0) << what << ": every rank sent every expert tokens";
    const auto want = testing::full_params(ref);
    const auto have = testing::full_params(got);
    // This rank holds 1/ep of the experts; the others' are exactly the rest.
    EXPECT_EQ(have.size() + got.model.other_ranks_params.size(), want.size()) << what;
    int64_t experts_here = 0;
    for (const auto& [name, full] : have) {
      ASSERT_TRUE(want.count(name)) << what << ": " << name;
      EXPECT_FALSE(got.model.other_ranks_params.count(name)) << what << ": " << name;
      experts_here += name.find(".experts.") != std::string::npos;
      EXPECT_TRUE(at::allclose(full, want.at(name), 1e-4, 1e-5))
          << what << ": " << name << " max diff " << (full - want.at(name)).abs().max().item<float>();
    }
    at::Tensor total = at::tensor({experts_here}, at::kLong);
    got.model.ep_group->all_reduce(total);
    int64_t experts_everywhere = 0;
    for (const auto& [name, full] : want) experts_everywhere += name.find(".experts.") != std::string::npos;
    EXPECT_EQ(total.item<int64_t>(), experts_everywhere) << what << ": the ep group holds every expert once";
  }
};

TEST_F(MoeExpertParallelParity, Ep2Ep4AndEp2TimesFsdp2MatchOneProcess) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  for (const char* preset : {"tiny-qwen3-moe", "tiny-mixtral"}) {
    SCOPED_TRACE(preset);
    TrainResult ref2 = run(preset, sizes_of(1, 1), 2);
    TrainResult ep2 = run(preset, sizes_of(2, 2), 2);
    expect_same_steps(ep2, ref2, std::string(preset) + " ep2");
    TrainResult ref1 = run(preset, sizes_of(1, 1), 1);
    TrainResult ep4 = run(preset, sizes_of(4, 4), 1);
    expect_same_steps(ep4, ref1, std::string(preset) + " ep4");
    TrainResult ep2_fsdp2 = run(preset, sizes_of(4, 2), 1);
    EXPECT_EQ(ep2_fsdp2.model.ep_shard_group->size(), 2);
    expect_same_steps(ep2_fsdp2, ref1, std::string(preset) + " ep2 x fsdp2");
  }
}

TEST_F(MoeExpertParallelParity, ActivationCheckpointingRerunsTheExchange) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  // Backward re-runs each layer's forward, so every rank exchanges its tokens
  // again, in the same order on every rank, before the reverse exchanges.
  const std::vector<std::string> checkpointing = {"policy.dtensor_cfg.activation_checkpointing=true"};
  TrainResult ref = run("tiny-qwen3-moe", sizes_of(1, 1), 1);
  TrainResult got = run("tiny-qwen3-moe", sizes_of(4, 2), 1, checkpointing);
  expect_same_steps(got, ref, "ep2 x fsdp2 with activation checkpointing");
}

TEST_F(MoeExpertParallelParity, Ep2WithHsdp2MatchesOneProcess) {
  if (dist::world()->size() != 8) GTEST_SKIP() << "written for 8 ranks";
  for (const char* preset : {"tiny-qwen3-moe", "tiny-mixtral"}) {
    SCOPED_TRACE(preset);
    // Global batch 8 over dp 8: one row per rank.
    TrainResult ref = run(preset, sizes_of(1, 1), 1, {"policy.train_global_batch_size=8"});
    TrainResult hsdp = run(preset, sizes_of(8, 2, 2), 1, {"policy.train_global_batch_size=8"});
    EXPECT_EQ(hsdp.model.ep_shard_group->size(), 4);
    expect_same_steps(hsdp, ref, std::string(preset) + " ep2 x hsdp2");
  }
}

// Writes the first 5 of the 10 steps at `save_sizes` with a checkpoint at
// step 5 (the steps checked against `ref`), then copies it once per resume
// (each resumed run writes into its own copy). Returns the directory.
fs::path MoeExpertParallelParity::save_half(const std::string& preset, const dist::MeshSizes& save_sizes,
                                            const std::vector<std::string>& extra, const TrainResult& ref,
                                            const std::vector<std::string>& copies) {
  const fs::path dir = testing::shared_dir("ep_resume");
  std::vector<std::string> o = extra;
  o.insert(o.end(), {"checkpointing.enabled=true", "checkpointing.save_period=5",
                     "checkpointing.checkpoint_dir=" + (dir / "saved").string(), "sft.max_num_steps=5"});
  const TrainResult half = run(preset, save_sizes, 1, o);
  testing::expect_same_moe_steps(half.steps, {ref.steps.begin(), ref.steps.begin() + 5}, preset + " first 5 steps");
  if (dist::world()->rank() == 0) {
    expect_each_element_once(dir / "saved" / "step_5");
    for (const auto& copy : copies) fs::copy(dir / "saved", dir / copy, fs::copy_options::recursive);
  }
  dist::world()->barrier();
  return dir;
}

// The model's elements (metadata.json's shapes) are exactly the elements the
// rank files hold: every expert row written by one rank, none twice.
void MoeExpertParallelParity::expect_each_element_once(const fs::path& step_dir) {
  std::ifstream in(step_dir / "metadata.json");
  const auto meta = nlohmann::json::parse(in);
  int64_t model_elements = 0;
  for (const auto& [name, shape] : meta.at("shapes").items()) {
    int64_t n = 1;
    for (const auto d : shape.get<std::vector<int64_t>>()) n *= d;
    model_elements += n;
  }
  int64_t written = 0;
  for (int r = 0; r < meta.at("world_size").get<int>(); ++r) {
    const auto file = io::SafetensorsFile::open(step_dir / ("rank_" + std::to_string(r) + ".safetensors"));
    for (const auto& key : file.names()) {
      if (key.rfind("model/", 0) != 0) continue;
      int64_t n = 1;
      for (const auto d : file.info(key).shape) n *= d;
      written += n;
    }
  }
  EXPECT_EQ(written, model_elements) << step_dir;
}

TEST_F(MoeExpertParallelParity, CheckpointOfEp2TimesFsdp2ResumesOnOtherEpSizes) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  const std::string preset = "tiny-qwen3-moe";
  const TrainResult ref = run(preset, sizes_of(1, 1), 1);
  const fs::path dir = save_half(preset, sizes_of(4, 2), {}, ref, {"world1", "ep2", "ep4"});
  auto resume = [&](const char* copy) {
    return std::vector<std::string>{"checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + (dir / copy).string()};
  };
  // Meshes are built on every rank: world 1 runs on rank 0, EP 2 on ranks 2-3.
  const dist::DeviceMesh mesh_one = testing::block_mesh(sizes_of(1, 1));
  const dist::DeviceMesh mesh_ep2 = testing::block_mesh(sizes_of(2, 2));
  const int rank = dist::world()->rank();
  auto resumed = [&](const dist::MeshSizes& sizes, const dist::DeviceMesh& mesh, const char* copy) {
    std::vector<std::string> o = testing::moe_run_overrides(preset, sizes, 1);
    const auto more = resume(copy);
    o.insert(o.end(), more.begin(), more.end());
    return train(make_config(o), mesh, quiet());
  };
  auto expect_second_half = [&](const TrainResult& got, const std::string& what) {
    testing::expect_same_moe_steps(got.steps, ref.steps, what, 5);
  };
  if (rank == 0) expect_second_half(resumed(sizes_of(1, 1), mesh_one, "world1"), "resumed at world 1");
  if (rank >= 2) expect_second_half(resumed(sizes_of(2, 2), mesh_ep2, "ep2"), "resumed at ep 2");
  dist::world()->barrier();
  expect_second_half(resumed(sizes_of(4, 4), testing::block_mesh(sizes_of(4, 4)), "ep4"), "resumed at ep 4");
  dist::world()->barrier();
  if (rank == 0) fs::remove_all(dir);
}

TEST_F(MoeExpertParallelParity, CheckpointOfEp2WithHsdp2ResumesInOneProcess) {
  if (dist::world()->size() != 8) GTEST_SKIP() << "written for 8 ranks";
  // The experts' ep_shard group of 4 spans both replicas: each of its ranks
  // must write its rows (the dense replicas write once).
  const std::string preset = "tiny-mixtral";
  const std::vector<std::string> batch = {"policy.train_global_batch_size=8"};
  const TrainResult ref = run(preset, sizes_of(1, 1), 1, batch);
  const fs::path dir = save_half(preset, sizes_of(8, 2, 2), batch, ref, {"world1"});
  const dist::DeviceMesh mesh_one = testing::block_mesh(sizes_of(1, 1));
  if (dist::world()->rank() == 0) {
    std::vector<std::string> o = testing::moe_run_overrides(preset, sizes_of(1, 1), 1);
    o.insert(o.end(), {"policy.train_global_batch_size=8", "checkpointing.enabled=true",
                       "checkpointing.checkpoint_dir=" + (dir / "world1").string()});
    testing::expect_same_moe_steps(train(make_config(o), mesh_one, quiet()).steps, ref.steps, "resumed at world 1", 5);
  }
  dist::world()->barrier();
  if (dist::world()->rank() == 0) fs::remove_all(dir);
}

TEST_F(MoeExpertParallelParity, HuggingFaceWeightsLoadUnderExpertParallelism) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  // The preset's seeded initialisation written as a Hugging Face directory:
  // a run from it at EP 2 x FSDP 2 (each rank reading only its experts' rows,
  // the directory holding every expert) equals the preset's run in one process.
  const std::string preset = "tiny-mixtral";
  const fs::path dir = testing::shared_dir("ep_hf");
  const uint64_t seed = train_options_from(make_config(testing::moe_run_overrides(preset, sizes_of(1, 1), 1))).seed;
  if (dist::world()->rank() == 0) {
    models::save_initialized(models::parse_model_config(models::make_preset_config(preset), preset), seed,
                             at::kFloat, dir);
  }
  dist::world()->barrier();
  TrainResult ref = run(preset, sizes_of(1, 1), 1);
  std::vector<std::string> o = testing::moe_run_overrides(preset, sizes_of(4, 2), 1);
  o.push_back("policy.model_name=" + dir.string());
  TrainResult got = train(make_config(o), testing::block_mesh(sizes_of(4, 2)), quiet());
  expect_same_steps(got, ref, "from the Hugging Face directory at ep 2 x fsdp 2");
  dist::world()->barrier();
  if (dist::world()->rank() == 0) fs::remove_all(dir);
}

TEST_F(MoeExpertParallelParity, DenseModelsAreRefused) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  try {
    run("tiny-llama", sizes_of(2, 2), 2);
    ADD_FAILURE() << "expected UsageError for a dense model";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a mixture-of-experts model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel::train
