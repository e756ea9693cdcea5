// Training on a GPU matches training on the CPU (SPEC 8, 10): at one process
// every family preset gives the same logits and the same ten steps on CUDA
// as on the CPU in fp32; bf16 compute with fp32 master weights and
// reductions follows the fp32 loss curve; and at four processes sharing the
// GPU every layout (FSDP 2, HSDP 2x2, TP 2 x FSDP 2, CP 2 x FSDP 2, EP 2)
// matches CUDA at one process, each group counting the same collectives and
// bytes as on the CPU. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "config/parallelism_config.h"
#include "gpu/bf16_loss_curve.h"
#include "gpu/gpu_world.h"
#include "models/presets.h"
#include "train/layout_parity.h"
#include "train/model_setup.h"
#include "train/moe_parity.h"
#include "train/train_fixture.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace tessel::gpu_testing {
namespace {

using train::testing::quiet;
using train::testing::TrainFixture;

class CudaTraining : public TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    if (gpu_world() == nullptr) GTEST_SKIP() << "no CUDA device: " << device::no_cuda_reason();
  }

  // The tiny presets (llama-100m is a benchmark model, not a test one).
  static std::vector<std::string> presets() {
    std::vector<std::string> out;
    for (const auto& p : models::preset_names()) {
      if (p.rfind("tiny-", 0) == 0) out.push_back(p);
    }
    return out;
  }
};

// Ten fp32 steps of each tiny preset on one process, CPU and CUDA: the
// logits of the initial model within 1e-4, each step's loss within 1e-4
// relative, the gradient norms within 1e-3 relative.
TEST_F(CudaTraining, EveryPresetMatchesTheCpuAtOneProcess) {
  if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  for (const std::string& preset : presets()) {
    SCOPED_TRACE(preset);
    const config::Config cfg = make_config({"policy.model_name=" + preset, "sft.max_num_steps=10"});
    const dist::DeviceMesh cpu = single_rank_mesh(false), gpu = single_rank_mesh(true);
    {
      const train::TrainOptions o = train::train_options_from(cfg);
      const config::ParallelismConfig p = config::parallelism_from(cfg);
      train::ShardedModel on_cpu = train::setup_model(o, cpu, p);
      train::ShardedModel on_gpu = train::setup_model(o, gpu, p);
      const at::Tensor tokens = at::arange(3, 3 + 40, at::kLong)
                                    .remainder(on_cpu.model->config().vocab_size)
                                    .view({2, 20});
      at::NoGradGuard no_grad;
      const at::Tensor want = on_cpu.model->forward_logits(tokens);
      const at::Tensor got = on_gpu.model->forward_logits(tokens.to(gpu.device())).to(at::kCPU);
      EXPECT_LE((got - want).abs().max().item<double>(), 1e-4) << "logits";
    }
    const train::TrainResult want = train::train(cfg, cpu, quiet());
    const train::TrainResult got = train::train(cfg, gpu, quiet());
    ASSERT_EQ(got.steps.size(), want.steps.size());
    for (size_t s = 0; s < want.steps.size(); ++s) {
      EXPECT_NEAR(got.steps[s].loss, want.steps[s].loss, 1e-4 * std::abs(want.steps[s].loss))
          << "step " << s + 1;
      EXPECT_NEAR(got.steps[s].grad_norm, want.steps[s].grad_norm, 1e-3 * want.steps[s].grad_norm)
          << "step " << s + 1;
    }
  }
}

// bf16 compute with fp32 master weights, optimizer state and reductions
// (policy.precision=bfloat16) follows the fp32 loss curve over 50 steps
// (bf16_loss_curve.h says how closely, and why not each step within 1e-2).
TEST_F(CudaTraining, Bf16FollowsTheFp32LossCurve) {
  if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  const dist::DeviceMesh gpu = single_rank_mesh(true);
  const std::vector<std::string> run = {"policy.model_name=tiny-llama", "sft.max_num_steps=50"};
  std::vector<std::string> bf16 = run;
  bf16.push_back("policy.precision=bfloat16");
  const train::TrainResult fp32 = train::train(make_config(run), gpu, quiet());
  const train::TrainResult low = train::train(make_config(bf16), gpu, quiet());
  expect_bf16_follows_fp32(low, fp32);
  EXPECT_LT(low.steps.back().loss, 0.8 * low.steps.front().loss)
      << "bf16 training must still learn";
}

// TESSEL_PROFILE_STEP=2 (train/profiled_step.h) opens and closes the
// device's profiler range around step 2; without a profiler attached the run
// is the same run.
TEST_F(CudaTraining, AProfiledStepChangesNothing) {
  if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  const dist::DeviceMesh gpu = single_rank_mesh(true);
  const config::Config cfg = make_config({"policy.model_name=tiny-llama", "sft.max_num_steps=3"});
  const train::TrainResult plain = train::train(cfg, gpu, quiet());
  ::setenv("TESSEL_PROFILE_STEP", "2", 1);
  const train::TrainResult profiled = train::train(cfg, gpu, quiet());
  ::unsetenv("TESSEL_PROFILE_STEP");
  ASSERT_EQ(profiled.steps.size(), plain.steps.size());
  for (size_t s = 0; s < plain.steps.size(); ++s)
    EXPECT_NEAR(profiled.steps[s].loss, plain.steps[s].loss, 1e-6 * plain.steps[s].loss)
        << "step " << s + 1;
}

std::vector<std::string> layout_overrides(const dist::MeshSizes& s) {
  return {"policy.dtensor_cfg.dp_replicate_size=" + std::to_string(s.dp_replicate),
          "policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(s.tp),
          "policy.dtensor_cfg.context_parallel_size=" + std::to_string(s.cp),
          "sft.max_num_steps=10", "policy.train_micro_batch_size=1"};
}

// At four processes on the GPU: each layout's ten steps as CUDA at one process's.
TEST_F(CudaTraining, EveryLayoutMatchesOneProcess) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "runs at 4 processes";
  RecordProperty("device_path", device_path());  // which backend ran it, in the report
  const config::Config dense = make_config(
      {"policy.model_name=tiny-llama", "sft.max_num_steps=10", "policy.train_micro_batch_size=1"});
  const train::TrainResult ref = train::train(dense, single_rank_mesh(true), quiet());
  struct Layout {
    std::string name;
    dist::MeshSizes sizes;
  };
  const std::vector<Layout> layouts = {{"FSDP 2", {.world_size = 2}},
                                       {"HSDP 2x2", {.world_size = 4, .dp_replicate = 2}},
                                       {"TP 2 x FSDP 2", {.world_size = 4, .tp = 2}},
                                       {"CP 2 x FSDP 2", {.world_size = 4, .cp = 2}}};
  for (const Layout& l : layouts) {
    std::vector<std::string> o = layout_overrides(l.sizes);
    o.insert(o.begin(), "policy.model_name=tiny-llama");
    const train::TrainResult got = train::train(make_config(o), block_mesh(l.sizes, true), quiet());
    train::testing::expect_same_steps(got.steps, ref.steps, l.name + " on " + device_path());
  }
  // EP 2 on the MoE preset, against its own one-process run.
  const dist::MeshSizes ep = train::testing::moe_sizes(2, 1, 2);
  const auto moe = train::testing::moe_run_overrides("tiny-mixtral", ep, 2);
  const train::TrainResult moe_ref =
      train::train(make_config(train::testing::moe_run_overrides(
                       "tiny-mixtral", train::testing::moe_sizes(1, 1, 1), 2)),
                   single_rank_mesh(true), quiet());
  const train::TrainResult moe_got = train::train(make_config(moe), block_mesh(ep, true), quiet());
  train::testing::expect_same_moe_steps(moe_got, moe_ref, "EP 2 on " + device_path());
}

// Each of the mesh's communicators' counters over a run of `cfg` (reset at
// its start), by name. A first run goes before it, so that what a device
// path sets up at its first use (communicators made lazily) is not counted.
std::map<std::string, dist::CollectiveCounters> counted_run(const config::Config& cfg,
                                                            const dist::DeviceMesh& mesh) {
  train::train(cfg, mesh, quiet());
  for (const auto& [name, c] : mesh.communicators()) c->reset_counters();
  train::train(cfg, mesh, quiet());
  std::map<std::string, dist::CollectiveCounters> out;
  for (const auto& [name, c] : mesh.communicators()) out[name] = c->counters();
  return out;
}

// Byte counters keep their meaning on the device (issue 39): at four
// processes each group of a layout counts the same collectives of each kind,
// and the same bytes sent to its node and to others, on the GPU as on the CPU.
TEST_F(CudaTraining, EveryGroupCountsTheSameCollectivesAndBytesAsOnTheCpu) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "runs at 4 processes";
  RecordProperty("device_path", device_path());
  struct Layout {
    std::string name;
    dist::MeshSizes sizes;
  };
  for (const Layout& l : std::vector<Layout>{{"HSDP 2x2", {.world_size = 4, .dp_replicate = 2}},
                                             {"TP 2 x FSDP 2", {.world_size = 4, .tp = 2}}}) {
    std::vector<std::string> o = layout_overrides(l.sizes);
    o.insert(o.begin(), "policy.model_name=tiny-llama");
    o.push_back("sft.max_num_steps=2");
    const config::Config cfg = make_config(o);
    const auto on_gpu = counted_run(cfg, block_mesh(l.sizes, true));
    const auto on_cpu = counted_run(cfg, block_mesh(l.sizes, false));
    ASSERT_EQ(on_gpu.size(), on_cpu.size()) << l.name;
    for (const auto& [group, want] : on_cpu) {
      ASSERT_TRUE(on_gpu.count(group)) << l.name << ": no group " << group << " on the GPU";
      const dist::CollectiveCounters& got = on_gpu.at(group);
      for (int k = 0; k < dist::kNumCollectiveKinds; ++k) {
        const std::string what = l.name + ", group " + group + ", " +
                                 dist::to_string(static_cast<dist::CollectiveKind>(k)) + " on " +
                                 device_path();
        EXPECT_EQ(got.calls[k], want.calls[k]) << what << ": calls";
        EXPECT_EQ(got.bytes[k], want.bytes[k]) << what << ": bytes";
        EXPECT_EQ(got.sent_same_node[k], want.sent_same_node[k])
            << what << ": bytes sent within the node";
        EXPECT_EQ(got.sent_other_node[k], want.sent_other_node[k])
            << what << ": bytes sent to other nodes";
      }
    }
  }
}

}  // namespace
}  // namespace tessel::gpu_testing
