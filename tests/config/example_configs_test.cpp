// The shipped example configs load, carry every key of SPEC.md's appendix,
// and the HSDP recipe inherits from the base recipe as documented.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "config/loader.h"
#include "config/parallelism_config.h"
#include "temp_files.h"
#include "support/source_tree.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;
using test_util::usage_error_of;

std::filesystem::path configs_dir() {
  return test_support::source_tree() / "examples" / "configs";
}

std::filesystem::path base_path() { return configs_dir() / "sft.yaml"; }
std::filesystem::path hsdp_path() {
  return configs_dir() / "recipes" / "llm" / "sft-llama3.2-1b-2n8g-hsdp.yaml";
}

TEST(ExampleConfigs, BaseHasEveryAppendixKey) {
  Config c = load_config(base_path());
  const char* keys[] = {
      "sft.max_num_epochs", "sft.max_num_steps", "sft.val_period", "sft.val_batches",
      "sft.val_global_batch_size", "sft.val_micro_batch_size", "sft.val_at_start",
      "sft.val_at_end", "sft.seed",
      "checkpointing.enabled", "checkpointing.checkpoint_dir", "checkpointing.metric_name",
      "checkpointing.higher_is_better", "checkpointing.keep_top_k", "checkpointing.save_period",
      "checkpointing.save_optimizer",
      "policy.model_name", "policy.tokenizer.name", "policy.train_global_batch_size",
      "policy.train_micro_batch_size", "policy.max_total_sequence_length", "policy.precision",
      "policy.max_grad_norm", "policy.make_sequence_length_divisible_by",
      "policy.dtensor_cfg._v2", "policy.dtensor_cfg.enabled", "policy.dtensor_cfg.cpu_offload",
      "policy.dtensor_cfg.sequence_parallel", "policy.dtensor_cfg.activation_checkpointing",
      "policy.dtensor_cfg.tensor_parallel_size", "policy.dtensor_cfg.context_parallel_size",
      "policy.dtensor_cfg.dp_replicate_size", "policy.dtensor_cfg.custom_parallel_plan",
      "policy.sequence_packing.enabled", "policy.optimizer.name",
      "policy.optimizer.kwargs.lr", "policy.optimizer.kwargs.weight_decay",
      "policy.optimizer.kwargs.betas", "policy.optimizer.kwargs.eps", "policy.scheduler",
      "data.max_input_seq_length", "data.add_bos", "data.add_eos", "data.shuffle",
      "data.train.dataset_name", "data.validation.dataset_name",
      "logger.log_dir", "logger.tensorboard_enabled",
      "cluster.gpus_per_node", "cluster.num_nodes",
  };
  for (const char* key : keys) EXPECT_TRUE(c.has(key)) << key;

  EXPECT_TRUE(c.get<bool>("policy.dtensor_cfg._v2"));
  EXPECT_EQ(c.get<int>("policy.dtensor_cfg.dp_replicate_size"), 1);
  EXPECT_EQ(c.get<int>("policy.dtensor_cfg.tensor_parallel_size"), 1);
  EXPECT_TRUE(c.at("policy.dtensor_cfg.custom_parallel_plan").is_null());
  EXPECT_EQ(c.get<std::string>("policy.model_name"), "tiny-llama");
  EXPECT_EQ(c.get<std::string>("policy.tokenizer.name"), "tiny-llama");
  EXPECT_EQ(c.get<int>("policy.make_sequence_length_divisible_by"), 1);
  EXPECT_EQ(c.get<std::string>("checkpointing.metric_name"), "val:val_loss");
  EXPECT_EQ(c.get<std::string>("policy.optimizer.name"), "torch.optim.AdamW");
  EXPECT_DOUBLE_EQ(c.get<double>("policy.optimizer.kwargs.lr"), 5.0e-6);
  EXPECT_DOUBLE_EQ(c.get<double>("policy.optimizer.kwargs.weight_decay"), 0.1);
  EXPECT_EQ(c.get<std::vector<double>>("policy.optimizer.kwargs.betas"),
            (std::vector<double>{0.9, 0.98}));
  EXPECT_DOUBLE_EQ(c.get<double>("policy.optimizer.kwargs.eps"), 1e-5);
  EXPECT_EQ(c.get<int>("policy.sequence_packing.train_mb_tokens"), 1024);  // 1024 * 1
  EXPECT_EQ(c.get<int>("data.max_input_seq_length"), 1024);
  EXPECT_EQ(c.get<std::string>("logger.tensorboard.log_dir"), "tb_logs-sft-dev-synthetic");
  EXPECT_EQ(c.get<int>("cluster.gpus_per_node"), 1);
  EXPECT_EQ(c.get<int>("cluster.num_nodes"), 1);

  ParallelismConfig p = parallelism_from(c);
  EXPECT_TRUE(p.v2);
  EXPECT_EQ(p.world_size(), 1);
}

TEST(ExampleConfigs, BaseOverridesFlowIntoInterpolations) {
  Config c = load_config(base_path(), {"policy.dtensor_cfg.tensor_parallel_size=4",
                                       "policy.model_name=/models/llama",
                                       "policy.train_micro_batch_size=2"});
  EXPECT_EQ(c.get<int>("policy.make_sequence_length_divisible_by"), 4);
  EXPECT_EQ(c.get<std::string>("policy.tokenizer.name"), "/models/llama");
  EXPECT_EQ(c.get<int>("policy.sequence_packing.train_mb_tokens"), 2048);
  // A backend key of the reference that tessel does not have fails like any typo.
  EXPECT_THAT(usage_error_of([&] {
                load_config(base_path(), {"policy.megatron_cfg.enabled=false"});
              }),
              HasSubstr("To add a new key use '+policy.megatron_cfg.enabled=false'"));
}

TEST(ExampleConfigs, HsdpRecipeInheritsFromBase) {
  Config c = load_config(hsdp_path());
  // From the recipe.
  EXPECT_EQ(c.get<std::string>("policy.model_name"), "meta-llama/Llama-3.2-1B");
  EXPECT_EQ(c.get<int>("cluster.num_nodes"), 2);
  EXPECT_EQ(c.get<int>("cluster.gpus_per_node"), 8);
  EXPECT_EQ(c.get<int>("policy.dtensor_cfg.dp_replicate_size"), 2);
  EXPECT_TRUE(c.get<bool>("policy.dtensor_cfg._v2"));
  EXPECT_EQ(c.get<int>("policy.train_global_batch_size"), 128);
  EXPECT_EQ(c.get<int>("policy.max_total_sequence_length"), 1024);
  EXPECT_EQ(c.get<std::string>("policy.precision"), "bfloat16");
  EXPECT_EQ(c.get<std::string>("checkpointing.checkpoint_dir"), "results/sft-llama3.2-1b-2n8g-hsdp");
  EXPECT_EQ(c.get<std::string>("logger.log_dir"), "logs/sft-llama3.2-1b-2n8g-hsdp");
  EXPECT_EQ(c.get<int>("sft.max_num_steps"), 500);
  // Inherited from sft.yaml, with interpolations seeing the recipe's values.
  EXPECT_EQ(c.get<std::string>("policy.tokenizer.name"), "meta-llama/Llama-3.2-1B");
  EXPECT_EQ(c.get<int>("policy.dtensor_cfg.tensor_parallel_size"), 1);
  EXPECT_EQ(c.get<int>("policy.dtensor_cfg.context_parallel_size"), 1);
  EXPECT_EQ(c.get<std::string>("checkpointing.metric_name"), "val:val_loss");
  EXPECT_EQ(c.get<int>("sft.seed"), 42);
  EXPECT_DOUBLE_EQ(c.get<double>("policy.optimizer.kwargs.lr"), 5.0e-6);
  EXPECT_FALSE(c.has("defaults"));

  ParallelismConfig p = parallelism_from(c);
  EXPECT_EQ(p.world_size(), 16);
  EXPECT_EQ(p.dp_replicate_size, 2);
  EXPECT_TRUE(p.v2);
  EXPECT_EQ(p.config_path, hsdp_path().string());

  // The printed config loads back to the same values.
  EXPECT_EQ(parse_yaml(c.to_yaml()), c);
}

TEST(ExampleConfigs, HsdpRecipeTypoSuggestsRealKey) {
  std::string m = usage_error_of([&] {
    load_config(hsdp_path(), {"policy.dtensor_cfg.dp_replicate_sise=4"});
  });
  EXPECT_THAT(m, HasSubstr("Did you mean 'policy.dtensor_cfg.dp_replicate_size'?"));
}

}  // namespace
}  // namespace tessel::config
