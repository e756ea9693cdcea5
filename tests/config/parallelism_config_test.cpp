// ParallelismConfig: defaults, every field, custom plan forms, errors.
#include "config/parallelism_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/loader.h"
#include "temp_files.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;
using test_util::usage_error_of;

TEST(ParallelismConfig, DefaultsWhenSectionsAreAbsent) {
  ParallelismConfig p = parallelism_from(parse_yaml("policy: {model_name: x}"));
  EXPECT_FALSE(p.v2);
  EXPECT_EQ(p.tensor_parallel_size, 1);
  EXPECT_EQ(p.context_parallel_size, 1);
  EXPECT_EQ(p.expert_parallel_size, 1);
  EXPECT_EQ(p.dp_replicate_size, 1);
  EXPECT_FALSE(p.sequence_parallel);
  EXPECT_FALSE(p.activation_checkpointing);
  EXPECT_FALSE(p.custom_parallel_plan.has_value());
  EXPECT_EQ(p.num_nodes, 1);
  EXPECT_EQ(p.gpus_per_node, 1);
  EXPECT_EQ(p.world_size(), 1);
}

TEST(ParallelismConfig, ReadsEveryField) {
  ParallelismConfig p = parallelism_from(parse_yaml(R"(
policy:
  dtensor_cfg:
    _v2: true
    enabled: true
    tensor_parallel_size: 2
    context_parallel_size: 3
    expert_parallel_size: 5
    dp_replicate_size: 7
    sequence_parallel: true
    activation_checkpointing: true
    cpu_offload: false
    env_vars: {}
    automodel_kwargs: null
    lora_cfg: {enabled: false}
    custom_parallel_plan: examples.custom_parallel.custom_parallel.custom_parallel_plan
cluster: {num_nodes: 2, gpus_per_node: 8}
)"));
  EXPECT_TRUE(p.v2);
  EXPECT_EQ(p.tensor_parallel_size, 2);
  EXPECT_EQ(p.context_parallel_size, 3);
  EXPECT_EQ(p.expert_parallel_size, 5);
  EXPECT_EQ(p.dp_replicate_size, 7);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_TRUE(p.activation_checkpointing);
  ASSERT_TRUE(p.custom_parallel_plan.has_value());
  EXPECT_FALSE(p.custom_parallel_plan->is_inline());
  EXPECT_EQ(p.custom_parallel_plan->reference,
            "examples.custom_parallel.custom_parallel.custom_parallel_plan");
  EXPECT_EQ(p.num_nodes, 2);
  EXPECT_EQ(p.gpus_per_node, 8);
  EXPECT_EQ(p.world_size(), 16);
}

TEST(ParallelismConfig, InlinePlanIsKeptAsConfig) {
  ParallelismConfig p = parallelism_from(parse_yaml(R"(
policy:
  dtensor_cfg:
    custom_parallel_plan:
      model.layers.*.self_attn.q_proj: colwise
      lm_head: colwise_rep
)"));
  ASSERT_TRUE(p.custom_parallel_plan && p.custom_parallel_plan->is_inline());
  const Config& plan = *p.custom_parallel_plan->inline_plan;
  EXPECT_EQ(plan.keys(), (std::vector<std::string>{"model.layers.*.self_attn.q_proj", "lm_head"}));
  EXPECT_EQ(plan.child("lm_head")->as_string(), "colwise_rep");
}

TEST(ParallelismConfig, ConfigPathComesFromTheLoadedFile) {
  test_util::TempDir dir;
  auto f = dir.write("run.yaml", "policy: {dtensor_cfg: {tensor_parallel_size: 2}}\n");
  EXPECT_EQ(parallelism_from(load_config(f)).config_path, f.string());
}

TEST(ParallelismConfig, Errors) {
  struct Case {
    std::string yaml;
    std::string fragment;
  };
  const Case cases[] = {
      {"policy: {dtensor_cfg: {tensor_parallel_size: two}}",
       "policy.dtensor_cfg.tensor_parallel_size: expected an integer, got 'two'"},
      {"policy: {dtensor_cfg: {tensor_parallel_size: 1.5}}",
       "policy.dtensor_cfg.tensor_parallel_size: expected an integer, got 1.5"},
      {"policy: {dtensor_cfg: {dp_replicate_size: 0}}",
       "policy.dtensor_cfg.dp_replicate_size must be a positive integer, got 0"},
      {"policy: {dtensor_cfg: {_v2: 1}}", "policy.dtensor_cfg._v2: expected a boolean"},
      {"policy: {dtensor_cfg: {sequence_parallel: 'yes'}}",
       "policy.dtensor_cfg.sequence_parallel: expected a boolean"},
      {"policy: {dtensor_cfg: {tensor_paralel_size: 2}}",
       "unknown key 'policy.dtensor_cfg.tensor_paralel_size'. Did you mean "
       "'policy.dtensor_cfg.tensor_parallel_size'?"},
      {"policy: {dtensor_cfg: {custom_parallel_plan: [a, b]}}",
       "policy.dtensor_cfg.custom_parallel_plan: expected null, a plan reference"},
      {"policy: {dtensor_cfg: {custom_parallel_plan: ''}}", "use null for no custom plan"},
      {"policy: {dtensor_cfg: {lora_cfg: {enabled: true}}}", "LoRA is not supported"},
      {"policy: {dtensor_cfg: {cpu_offload: true}}",
       "policy.dtensor_cfg.cpu_offload=true: this tessel is a CPU build, so parameters, gradients "
       "and optimizer state already live in host memory; cpu_offload applies to device (GPU) "
       "builds only. Set it to false or remove it"},
      {"policy: {dtensor_cfg: {enabled: false}}", "tessel has only the DTensor one"},
      {"policy: {dtensor_cfg: {env_vars: {NCCL_DEBUG: INFO}}}",
       "policy.dtensor_cfg.env_vars is not empty, but tessel does not read it"},
      {"policy: {dtensor_cfg: {automodel_kwargs: {use_liger_kernel: true}}}",
       "policy.dtensor_cfg.automodel_kwargs is not empty, but tessel does not read it"},
      {"policy: {dtensor_cfg: 3}", "policy.dtensor_cfg: expected a mapping, got 3"},
      // The optimizer split over replicas needs replicas, and FSDP x HSDP only.
      {"policy: {dtensor_cfg: {shard_optimizer_over_replicas: true}}",
       "policy.dtensor_cfg.shard_optimizer_over_replicas=true needs HSDP: set dp_replicate_size"},
      {"policy: {dtensor_cfg: {shard_optimizer_over_replicas: true, dp_replicate_size: 2, "
       "tensor_parallel_size: 2}}",
       "is built for FSDP x dp_replicate only"},
      {"policy: {dtensor_cfg: {shard_optimizer_over_replicas: true, dp_replicate_size: 2, "
       "node_shared_params: true}}",
       "cannot be combined with node_shared_params=true"},
      {"cluster: {num_nodes: -1}", "cluster.num_nodes must be a positive integer, got -1"},
      {"cluster: {gpus_per_node: eight}", "cluster.gpus_per_node: expected an integer, got 'eight'"},
  };
  for (const auto& k : cases) {
    EXPECT_THAT(usage_error_of([&] { parallelism_from(parse_yaml(k.yaml)); }), HasSubstr(k.fragment))
        << k.yaml;
  }
}

}  // namespace
}  // namespace tessel::config
