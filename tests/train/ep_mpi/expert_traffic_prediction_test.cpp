// `tessel plan --predict`'s bytes under expert parallelism against what a
// run's communicators counted (4 ranks, tiny-mixtral, EP 2 x FSDP 2, 2 steps):
// the dense groups (dp_shard_cp) and the experts' FSDP groups (ep_shard)
// exactly as predicted; the ep group's bytes exactly the closed form of
// cli/expert_traffic.h for the rows the run routed (the prediction itself
// assumes uniform routing) plus the gradient norm's sum over ep.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "cli/expert_traffic.h"
#include "cli/traffic_model.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "models/causal_lm.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/registry.h"
#include "train/layout_parity.h"
#include "train/moe_parity.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using testing::quiet;
using testing::TrainFixture;

class ExpertTrafficPrediction : public TrainFixture {};

int64_t total(const GroupBytes& bytes, const std::string& group) {
  const auto it = bytes.find(group);
  return it == bytes.end() ? 0 : it->second.same_node + it->second.other_node;
}

TEST_F(ExpertTrafficPrediction, CountedBytesAreThePredictedOnes) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  const std::string preset = "tiny-mixtral";
  const dist::MeshSizes sizes = testing::moe_sizes(4, 1, 2);
  std::vector<std::string> o = testing::moe_run_overrides(preset, sizes, 1);
  o.insert(o.end(), {"sft.max_num_steps=2", "+logger.rank_metrics_period=1"});
  const TrainResult run = train(make_config(o), testing::block_mesh(sizes), quiet());
  ASSERT_EQ(run.steps.size(), 2u);
  GroupBytes counted;
  for (const auto& s : run.steps) {
    for (const auto& [group, b] : s.sent_bytes) {
      counted[group].same_node += b.same_node;
      counted[group].other_node += b.other_node;
    }
  }

  const models::ModelConfig config =
      models::parse_model_config(models::make_preset_config(preset), "preset " + preset);
  models::BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  auto model = models::build_model(config, meta);
  std::vector<cli::NamedShape> shapes;
  for (const auto& item : model->named_parameters()) shapes.push_back({item.key(), item.value().sizes().vec()});
  const dist::MeshLayout layout(sizes);
  cli::TrafficInputs in;
  in.layout = &layout;
  in.ranks_per_node = 4;  // one machine: every byte is same-node
  in.tp_views = {shapes};
  in.num_experts = config.num_experts;
  in.expert_exchange_bytes_per_rank = 0;  // the tokens: from the routing below
  const GroupBytes predicted = cli::predict_step_traffic(in);
  for (const char* group : {"dp_shard_cp", "ep_shard"}) {
    EXPECT_GT(total(predicted, group), 0) << group;
    EXPECT_EQ(total(counted, group), 2 * total(predicted, group)) << group;
  }

  // The rows every rank routed off-rank over the 2 steps (1 micro batch each).
  at::Tensor rows = at::tensor({run.model.expert_stats->rows_sent, run.model.expert_stats->rows_received}, at::kLong);
  dist::world()->all_reduce(rows);
  cli::ExpertExchangeShape shape;
  shape.hidden = config.hidden_size;
  shape.num_experts = config.num_experts;
  shape.ep = 2;
  const int64_t calls_all_ranks = 4 * cli::sparse_layer_count(config) * 2;
  const int64_t tokens = cli::expert_exchange_bytes(shape, calls_all_ranks, rows[0].item<int64_t>(),
                                                    rows[1].item<int64_t>());
  EXPECT_GT(tokens, 0);
  EXPECT_EQ(total(counted, "ep"), tokens + 2 * total(predicted, "ep"));
}

}  // namespace
}  // namespace tessel::train
