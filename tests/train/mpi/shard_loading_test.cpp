// SPEC 4's memory contract at load, at 4 ranks, measured by a wrapper around
// ATen's CPU allocator (core/counting_allocator.h), not by tessel's own
// accounting: building a run's model (meta build, tp plan, fully_shard, then
// filling the shards) from a Hugging Face directory or from a preset's seeded
// initialisation, and resuming a training checkpoint on another mesh, never
// holds more than the rank's own shards plus one parameter (for a checkpoint:
// plus one piece of the rank's own shard). Each case checks the values too:
// every rank's shards are its boxes of what one process loads, and
// checkpoints hold each element exactly once.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/parallelism_config.h"
#include "core/counting_allocator.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "io/safetensors_file.h"
#include "models/init.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/pretrained.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"
#include "train/train_fixture.h"
#include "train/train_options.h"
#include "train/trainer.h"
#include "train/mpi/memory_testing.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using testing::bytes_of;
using testing::kLayouts;
using testing::kSlackBytes;
using testing::Layout;
using testing::measure;
using testing::Measured;
using testing::mesh_for;
using testing::llama_config_json;
using testing::quiet;
using testing::shared_dir;
using testing::TrainFixture;

// Every rank's shard equals its box of the full tensors one process has.
void expect_shards_of(const ShardedModel& sharded, const std::map<std::string, at::Tensor>& full,
                      const std::string& layout) {
  for (const auto& [name, mp] : mesh_state_dict(sharded)) {
    ASSERT_TRUE(full.count(name)) << name;
    EXPECT_TRUE(mp.local.equal(mp.spec.local_view(full.at(name), mp.coords))) << layout << ": " << name;
  }
}

class ShardLoading : public TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
    CountingCpuAllocator::install();
  }

  TrainOptions options(const std::string& model, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> o = {"policy.model_name='" + model + "'"};
    o.insert(o.end(), extra.begin(), extra.end());
    return train_options_from(make_config(o));
  }
  config::ParallelismConfig parallelism() const { return config::parallelism_from(make_config()); }
};

TEST_F(ShardLoading, HfDirectoryIsReadShardByShard) {
  const fs::path dir = shared_dir("hf");
  const models::ModelConfig config = models::parse_model_config(llama_config_json(), "test config");
  if (dist::world()->rank() == 0) models::save_initialized(config, 5, at::kFloat, dir);
  dist::world()->barrier();
  std::map<std::string, at::Tensor> full;
  int64_t model_bytes = 0, largest = 0;
  for (const auto& item : models::load_pretrained(dir)->named_parameters()) {
    full[item.key()] = item.value().detach().clone();
    model_bytes += bytes_of(item.value().sizes().vec());
    largest = std::max(largest, bytes_of(item.value().sizes().vec()));
  }
  for (const Layout& l : kLayouts) {
    const dist::DeviceMesh mesh = mesh_for(l);
    std::optional<ShardedModel> sharded;
    const Measured m = measure([&] { sharded.emplace(setup_model(options(dir.string()), mesh, parallelism())); });
    // The bound must be far below what building the whole model costs, or the
    // test could not tell sharded loading from loading everything.
    ASSERT_LT(m.retained + largest + kSlackBytes, model_bytes) << l.name;
    EXPECT_LE(m.peak_growth, m.retained + largest + kSlackBytes)
        << l.name << ": peak " << m.peak_growth << " B above the start, shards " << m.retained
        << " B, largest parameter " << largest << " B, whole model " << model_bytes << " B";
    expect_shards_of(*sharded, full, l.name);
  }
  dist::world()->barrier();
  if (dist::world()->rank() == 0) fs::remove_all(dir);
}

TEST_F(ShardLoading, PresetInitialisationMatchesOneProcess) {
  // Every rank draws each parameter in full, keeps its rows, and ends with
  // exactly the values of the single-process initialisation.
  auto whole = models::create_preset_model("tiny-llama", 42);
  std::map<std::string, at::Tensor> full;
  int64_t model_bytes = 0, largest = 0;
  for (const auto& item : whole->named_parameters()) {
    full[item.key()] = item.value().detach().clone();
    model_bytes += bytes_of(item.value().sizes().vec());
    largest = std::max(largest, bytes_of(item.value().sizes().vec()));
  }
  whole.reset();
  for (const Layout& l : kLayouts) {
    const dist::DeviceMesh mesh = mesh_for(l);
    std::optional<ShardedModel> sharded;
    const Measured m =
        measure([&] { sharded.emplace(setup_model(options("tiny-llama", {"sft.seed=42"}), mesh, parallelism())); });
    ASSERT_LT(m.retained + largest + kSlackBytes, model_bytes) << l.name;
    EXPECT_LE(m.peak_growth, m.retained + largest + kSlackBytes)
        << l.name << ": peak " << m.peak_growth << " B, shards " << m.retained << " B, largest parameter "
        << largest << " B";
    expect_shards_of(*sharded, full, l.name);
  }
}

TEST_F(ShardLoading, CheckpointsHoldEachElementOnceAndResumeByRows) {
  const fs::path dir = shared_dir("ckpt");
  const models::ModelConfig config = models::parse_model_config(llama_config_json(), "test config");
  const fs::path model_dir = dir / "model";
  if (dist::world()->rank() == 0) models::save_initialized(config, 9, at::kFloat, model_dir);
  dist::world()->barrier();
  int64_t total_elements = 0;
  for (const auto& item : models::load_pretrained(model_dir)->named_parameters()) total_elements += item.value().numel();
  const std::vector<std::string> train = {
      "sft.max_num_steps=2", "checkpointing.enabled=true", "checkpointing.save_period=2",
      "policy.train_global_batch_size=4", "policy.train_micro_batch_size=1",
      "checkpointing.checkpoint_dir='" + (dir / "ckpt").string() + "'"};
  for (const Layout& saved : kLayouts) {
    fs::path ckpt_dir = dir / "ckpt";
    if (dist::world()->rank() == 0) fs::remove_all(ckpt_dir);
    dist::world()->barrier();
    std::vector<std::string> o = {"policy.model_name='" + model_dir.string() + "'"};
    o.insert(o.end(), train.begin(), train.end());
    o.push_back("policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(saved.tp));
    o.push_back("policy.dtensor_cfg.dp_replicate_size=" + std::to_string(saved.replicate));
    const TrainResult trained = tessel::train::train(make_config(o), mesh_for(saved), quiet());
    const fs::path step = ckpt_dir / "step_2";
    ASSERT_TRUE(fs::exists(step / "metadata.json")) << saved.name;

    // Written once: model and optimizer elements over all rank files add up
    // to the model's size exactly.
    if (dist::world()->rank() == 0) {
      std::map<std::string, int64_t> elements;
      for (int r = 0; r < dist::world()->size(); ++r) {
        const auto f = io::SafetensorsFile::open(step / ("rank_" + std::to_string(r) + ".safetensors"));
        for (const auto& info : f.tensors()) {
          int64_t n = 1;
          for (int64_t d : info.shape) n *= d;
          elements[info.name.substr(0, info.name.find('/'))] += n;
        }
      }
      EXPECT_EQ(elements["model"], total_elements) << saved.name;
      EXPECT_EQ(elements["exp_avg"], total_elements) << saved.name;
      EXPECT_EQ(elements["exp_avg_sq"], total_elements) << saved.name;
    }
    std::map<std::string, at::Tensor> full;
    for (auto& [name, t] : load_full_tensors(step)) full[name] = t;

    // Resume on every other layout: only this rank's rows are read.
    for (const Layout& l : kLayouts) {
      if (&l == &saved) continue;
      const dist::DeviceMesh mesh = mesh_for(l);
      std::vector<std::string> lo = {"policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(l.tp),
                                     "policy.dtensor_cfg.dp_replicate_size=" + std::to_string(l.replicate)};
      ShardedModel sharded = setup_model(options(model_dir.string(), lo), mesh, config::parallelism_from(make_config(lo)));
      optim::AdamW optimizer(sharded.params, optim::AdamWOptions{});
      int64_t largest_shard = 0;
      for (const auto& p : sharded.params) largest_shard = std::max(largest_shard, p.numel() * 4);
      const Measured m = measure([&] { load_checkpoint(step, sharded, &optimizer); });
      // Retained: the optimizer's two moments. Beyond that, one piece of one
      // of this rank's own shards at a time.
      EXPECT_LE(m.peak_growth, m.retained + largest_shard + kSlackBytes)
          << saved.name << " -> " << l.name << ": peak " << m.peak_growth << " B, moments " << m.retained
          << " B, largest local shard " << largest_shard << " B";
      expect_shards_of(sharded, full, std::string(saved.name) + " -> " + l.name);
    }
    (void)trained;
    // Every rank is done reading this checkpoint before rank 0 deletes it
    // for the next layout.
    dist::world()->barrier();
  }
  dist::world()->barrier();
  if (dist::world()->rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace tessel::train
