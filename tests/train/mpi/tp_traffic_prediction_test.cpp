// `tessel plan --predict`'s tensor-parallel bytes (cli/tp_traffic.h) against
// what a run's tp communicators counted: TP 2 x FSDP 2 on 4 ranks, 2 steps of
// 2 micro batches, for the optimized plan without and with sequence
// parallelism, per-head q/k norms (tiny-qwen3), activation checkpointing,
// and mixture-of-experts layers, whose blocks stay whole on every tp rank
// (tiny-qwen3-moe). The parameters whose gradients are all-reduced over tp are
// listed here by hand from each model's layers, and then found from the plan
// as `tessel plan --predict` finds them (cli/plan_layout.h): both must
// match the run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/plan_layout.h"
#include "cli/tp_traffic.h"
#include "config/parallelism_config.h"
#include "cli/traffic_model.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "train/layout_parity.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using testing::quiet;
using testing::TrainFixture;

class TpTrafficPrediction : public TrainFixture {};

struct TrafficCase {
  std::string preset;
  bool sequence_parallel = false;
  bool checkpointing = false;
};

int64_t counted_tp_bytes(const TrainResult& run) {
  int64_t total = 0;
  for (const auto& s : run.steps) {
    const auto it = s.sent_bytes.find("tp");
    if (it != s.sent_bytes.end()) total += it->second.same_node + it->second.other_node;
  }
  return total;
}

TEST_F(TpTrafficPrediction, CountedTpBytesAreThePredictedOnes) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  constexpr int64_t kRows = 2, kTokens = 32, kMicroBatches = 2, kSteps = 2;
  for (const TrafficCase& c : {TrafficCase{"tiny-llama", false, false}, TrafficCase{"tiny-llama", true, false},
                               TrafficCase{"tiny-qwen3", true, false}, TrafficCase{"tiny-llama", false, true},
                               TrafficCase{"tiny-qwen3-moe", false, false}}) {
    SCOPED_TRACE(c.preset + (c.sequence_parallel ? " sp" : "") + (c.checkpointing ? " checkpointing" : ""));
    dist::MeshSizes sizes;
    sizes.world_size = 4;
    sizes.tp = 2;
    const std::vector<std::string> o = {
        "policy.model_name=" + c.preset,
        "policy.dtensor_cfg.tensor_parallel_size=2",
        std::string("policy.dtensor_cfg.sequence_parallel=") + (c.sequence_parallel ? "true" : "false"),
        std::string("policy.dtensor_cfg.activation_checkpointing=") + (c.checkpointing ? "true" : "false"),
        "policy.max_total_sequence_length=" + std::to_string(kTokens),
        "data.train.dataset_name=synthetic",
        "policy.train_micro_batch_size=" + std::to_string(kRows),
        "policy.train_global_batch_size=" + std::to_string(kRows * kMicroBatches * 2),
        "sft.max_num_steps=" + std::to_string(kSteps),
        "+logger.rank_metrics_period=1"};
    const TrainResult run = train(make_config(o), testing::block_mesh(sizes), quiet());
    ASSERT_EQ(run.steps.size(), static_cast<std::size_t>(kSteps));

    const models::ModelConfig config =
        models::parse_model_config(models::make_preset_config(c.preset), "preset " + c.preset);
    // Whole on every tp rank, gradients all-reduced over tp: the
    // sequence-parallel norms (two per layer and the final one), the
    // per-head q/k norms (qwen3: head_dim each).
    const int64_t head_dim =
        config.head_dim > 0 ? config.head_dim : config.hidden_size / config.num_attention_heads;
    std::vector<int64_t> whole;
    for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
      if (c.sequence_parallel) whole.insert(whole.end(), {config.hidden_size, config.hidden_size});
      if (c.preset.rfind("tiny-qwen3", 0) == 0) whole.insert(whole.end(), {head_dim, head_dim});
    }
    if (c.sequence_parallel) whole.push_back(config.hidden_size);
    cli::TpStepShape step;
    step.tp = 2;
    step.rows = kRows;
    step.tokens_per_row = kTokens;
    step.activation_checkpointing = c.checkpointing;
    const cli::TpPlanForm form =
        c.sequence_parallel ? cli::TpPlanForm::OptimizedSequenceParallel : cli::TpPlanForm::Optimized;

    const dist::MeshLayout layout(sizes);
    cli::TrafficInputs in;
    in.layout = &layout;
    in.ranks_per_node = 4;
    in.tp_views = {{}, {}};  // FSDP's bytes are not compared here
    in.micro_batches = kMicroBatches;
    in.tp_collectives = cli::tp_collectives(config, form, step, whole);
    const train::GroupBytes predicted = cli::predict_step_traffic(in);
    const auto& tp = predicted.at("tp");
    EXPECT_EQ(tp.other_node, 0);
    EXPECT_GT(tp.same_node, 0);
    EXPECT_EQ(counted_tp_bytes(run), kSteps * tp.same_node);

    // The same from the config as `tessel plan --predict` reads it: the plan
    // resolved and applied per tp rank, the whole parameters found from the
    // styles it applied (cli/plan_layout.h).
    const config::Config cfg = make_config(o);
    const cli::LayoutInputs from_plan =
        cli::layout_inputs(layout, config::parallelism_from(cfg), config, train::train_options_from(cfg));
    EXPECT_TRUE(from_plan.tp_modelled);
    EXPECT_EQ(from_plan.step.micro_batches, kMicroBatches);
    in.tp_collectives = from_plan.step.tp;
    EXPECT_EQ(counted_tp_bytes(run), kSteps * cli::predict_step_traffic(in).at("tp").same_node);
  }
}

// The closed form by hand for one case: tiny-llama without sequence
// parallelism, tp 2, one micro batch of 2 x 32 tokens, hidden 64. An
// all-reduce over 2 ranks sends half the tensor there and half back.
TEST_F(TpTrafficPrediction, OptimizedPlanClosedForm) {
  if (dist::world()->rank() != 0) GTEST_SKIP() << "no MPI needed";
  const models::ModelConfig config =
      models::parse_model_config(models::make_preset_config("tiny-llama"), "preset tiny-llama");
  ASSERT_EQ(config.hidden_size, 64);
  const int64_t layers = config.num_hidden_layers;
  cli::TpStepShape step;
  step.tp = 2;
  step.rows = 2;
  step.tokens_per_row = 32;
  const cli::TpCollectives c = cli::tp_collectives(config, cli::TpPlanForm::Optimized, step, {});
  // Forward: the embedding's output, 2 per layer, the loss's 2; backward: 2
  // per layer and the head's input.
  EXPECT_EQ(c.forward_count(), 1 + 2 * layers + 2);
  EXPECT_EQ(c.backward_count(), 2 * layers + 1);
  dist::MeshSizes sizes;
  sizes.world_size = 2;
  sizes.tp = 2;
  const dist::MeshLayout layout(sizes);
  cli::TrafficInputs in;
  in.layout = &layout;
  in.ranks_per_node = 2;
  in.tp_views = {{}, {}};
  in.tp_collectives = c;
  const int64_t activation = 2 * 32 * 64 * 4;        // bytes of [2, 32, 64] fp32
  const int64_t loss = 2 * 32 * 4 + 2 * 2 * 32 * 4;  // maxima, then exp-sums and target logits
  const int64_t per_rank = (4 * layers + 2) * activation + loss + 8;  // + the gradient norm's fp64 sum
  EXPECT_EQ(cli::predict_step_traffic(in).at("tp").same_node, 2 * per_rank);
}

}  // namespace
}  // namespace tessel::train
