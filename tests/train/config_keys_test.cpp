// Every config key tessel accepts is read. The sections with a closed list of
// keys (train::checked_config_sections(): sft, policy.dtensor_cfg, ...) are
// walked key by key; each key needs a probe here that sets it to a value
// other than the base recipe's and shows that the parsed run changes or that
// the value is refused with a UsageError naming the key. A key added to a
// list without a probe fails this test: read it (or refuse what cannot be
// honoured), then add its probe. A probe for a key no list accepts fails too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/loader.h"
#include "config/parallelism_config.h"
#include "core/error.h"
#include "optim/lr_schedule.h"
#include "support/source_tree.h"
#include "train/train_options.h"

namespace tessel::train {
namespace {

// What tessel makes of a config before any model exists: both typed views.
struct Parsed {
  config::ParallelismConfig parallel;
  TrainOptions train;
};

using Changed = std::function<bool(const Parsed& base, const Parsed& probed)>;

struct Probe {
  std::vector<std::string> setup;   // overrides applied to the base and the probe alike
  std::vector<std::string> change;  // sets the probed key (and only it)
  Changed changed;                  // empty: the changed value must be refused
};

#define TRAIN_FIELD(f) [](const Parsed& a, const Parsed& b) { return a.train.f != b.train.f; }
#define PARALLEL_FIELD(f) \
  [](const Parsed& a, const Parsed& b) { return a.parallel.f != b.parallel.f; }

// The learning rate the schedule gives over the first steps: what
// policy.scheduler changes, whatever field holds it.
bool schedule_differs(const Parsed& a, const Parsed& b) {
  for (int64_t step = 0; step < 50; ++step) {
    if (optim::lr_at(a.train.lr_schedule, step) != optim::lr_at(b.train.lr_schedule, step)) {
      return true;
    }
  }
  return false;
}

const std::map<std::string, Probe>& probes() {
  const std::vector<std::string> packing = {"policy.sequence_packing.enabled=true"};
  const std::vector<std::string> schedule = {"policy.scheduler={decay: linear, decay_steps: 10}"};
  static const std::map<std::string, Probe> table = {
      {"sft.max_num_epochs", {{}, {"sft.max_num_epochs=3"}, TRAIN_FIELD(max_num_epochs)}},
      {"sft.max_num_steps", {{}, {"sft.max_num_steps=7"}, TRAIN_FIELD(max_num_steps)}},
      {"sft.val_period", {{}, {"sft.val_period=3"}, TRAIN_FIELD(val_period)}},
      {"sft.val_batches", {{}, {"sft.val_batches=2"}, TRAIN_FIELD(val_batches)}},
      {"sft.val_global_batch_size",
       {{}, {"sft.val_global_batch_size=8"}, TRAIN_FIELD(val_global_batch_size)}},
      {"sft.val_micro_batch_size",
       {{}, {"sft.val_micro_batch_size=2"}, TRAIN_FIELD(val_micro_batch_size)}},
      {"sft.val_at_start", {{}, {"sft.val_at_start=false"}, TRAIN_FIELD(val_at_start)}},
      {"sft.val_at_end", {{}, {"sft.val_at_end=true"}, TRAIN_FIELD(val_at_end)}},
      {"sft.seed", {{}, {"sft.seed=7"}, TRAIN_FIELD(seed)}},

      {"policy.optimizer.name", {{}, {"policy.optimizer.name=torch.optim.SGD"}, {}}},
      {"policy.optimizer.kwargs", {{}, {"policy.optimizer.kwargs.lr=0.02"}, TRAIN_FIELD(adamw.lr)}},
      {"policy.optimizer.kwargs.lr", {{}, {"policy.optimizer.kwargs.lr=0.01"}, TRAIN_FIELD(adamw.lr)}},
      {"policy.optimizer.kwargs.weight_decay",
       {{}, {"policy.optimizer.kwargs.weight_decay=0.5"}, TRAIN_FIELD(adamw.weight_decay)}},
      {"policy.optimizer.kwargs.betas",
       {{}, {"policy.optimizer.kwargs.betas=[0.8,0.9]"}, TRAIN_FIELD(adamw.beta1)}},
      {"policy.optimizer.kwargs.eps", {{}, {"policy.optimizer.kwargs.eps=0.001"}, TRAIN_FIELD(adamw.eps)}},
      // foreach and fused pick between equivalent PyTorch kernels, so every
      // boolean trains alike (train_options.cpp); what is read is the type.
      {"policy.optimizer.kwargs.foreach", {{}, {"policy.optimizer.kwargs.foreach=sometimes"}, {}}},
      {"policy.optimizer.kwargs.fused", {{}, {"policy.optimizer.kwargs.fused=sometimes"}, {}}},
      {"policy.optimizer.kwargs.amsgrad", {{}, {"+policy.optimizer.kwargs.amsgrad=true"}, {}}},
      {"policy.optimizer.kwargs.maximize", {{}, {"+policy.optimizer.kwargs.maximize=true"}, {}}},

      {"policy.sequence_packing.enabled",
       {{}, {"policy.sequence_packing.enabled=true"}, TRAIN_FIELD(packing.enabled)}},
      {"policy.sequence_packing.train_mb_tokens",
       {packing, {"policy.sequence_packing.train_mb_tokens=2048"}, TRAIN_FIELD(packing.train_mb_tokens)}},
      // Both reference algorithms run as first-fit decreasing; others are refused.
      {"policy.sequence_packing.algorithm",
       {packing, {"policy.sequence_packing.algorithm=best_fit"}, {}}},
      {"policy.sequence_packing.sequence_length_round",
       {packing, {"policy.sequence_packing.sequence_length_round=8"},
        TRAIN_FIELD(packing.sequence_length_round)}},

      {"policy.scheduler.warmup_steps",
       {schedule, {"+policy.scheduler.warmup_steps=5"}, schedule_differs}},
      {"policy.scheduler.warmup_start_factor",
       {{"policy.scheduler={warmup_steps: 5}"}, {"+policy.scheduler.warmup_start_factor=0.5"},
        schedule_differs}},
      {"policy.scheduler.decay",
       {{"policy.scheduler={decay_steps: 10}"}, {"+policy.scheduler.decay=cosine"}, schedule_differs}},
      {"policy.scheduler.decay_steps",
       {schedule, {"policy.scheduler.decay_steps=20"}, schedule_differs}},
      {"policy.scheduler.min_lr_ratio",
       {schedule, {"+policy.scheduler.min_lr_ratio=0.5"}, schedule_differs}},

      {"policy.dtensor_cfg._v2", {{}, {"policy.dtensor_cfg._v2=false"}, PARALLEL_FIELD(v2)}},
      {"policy.dtensor_cfg.enabled", {{}, {"policy.dtensor_cfg.enabled=false"}, {}}},
      {"policy.dtensor_cfg.tensor_parallel_size",
       {{}, {"policy.dtensor_cfg.tensor_parallel_size=2"}, PARALLEL_FIELD(tensor_parallel_size)}},
      {"policy.dtensor_cfg.context_parallel_size",
       {{}, {"policy.dtensor_cfg.context_parallel_size=2"}, PARALLEL_FIELD(context_parallel_size)}},
      {"policy.dtensor_cfg.expert_parallel_size",
       {{}, {"policy.dtensor_cfg.expert_parallel_size=2"}, PARALLEL_FIELD(expert_parallel_size)}},
      {"policy.dtensor_cfg.dp_replicate_size",
       {{}, {"policy.dtensor_cfg.dp_replicate_size=2"}, PARALLEL_FIELD(dp_replicate_size)}},
      {"policy.dtensor_cfg.sequence_parallel",
       {{}, {"policy.dtensor_cfg.sequence_parallel=true"}, PARALLEL_FIELD(sequence_parallel)}},
      {"policy.dtensor_cfg.activation_checkpointing",
       {{}, {"policy.dtensor_cfg.activation_checkpointing=true"},
        TRAIN_FIELD(activation_checkpointing)}},
      {"policy.dtensor_cfg.cpu_offload", {{}, {"policy.dtensor_cfg.cpu_offload=true"}, {}}},
      {"policy.dtensor_cfg.custom_parallel_plan",
       {{}, {"policy.dtensor_cfg.custom_parallel_plan=pkg.module.plan"},
        PARALLEL_FIELD(custom_parallel_plan.has_value())}},
      {"policy.dtensor_cfg.accumulate_unsharded_grads",
       {{}, {"policy.dtensor_cfg.accumulate_unsharded_grads=true"},
        PARALLEL_FIELD(accumulate_unsharded_grads)}},
      {"policy.dtensor_cfg.node_shared_params",
       {{}, {"policy.dtensor_cfg.node_shared_params=true"}, PARALLEL_FIELD(node_shared_params)}},
      {"policy.dtensor_cfg.shard_optimizer_over_replicas",
       {{"policy.dtensor_cfg.dp_replicate_size=2"}, {"policy.dtensor_cfg.shard_optimizer_over_replicas=true"},
        PARALLEL_FIELD(shard_optimizer_over_replicas)}},
      {"policy.dtensor_cfg.env_vars", {{}, {"+policy.dtensor_cfg.env_vars={NCCL_DEBUG: INFO}"}, {}}},
      {"policy.dtensor_cfg.automodel_kwargs",
       {{}, {"+policy.dtensor_cfg.automodel_kwargs={use_liger_kernel: true}"}, {}}},
      {"policy.dtensor_cfg.lora_cfg", {{}, {"+policy.dtensor_cfg.lora_cfg={enabled: true}"}, {}}},

      {"policy.model_name", {{}, {"policy.model_name=tiny-qwen2"}, TRAIN_FIELD(model_name)}},
      {"policy.tokenizer", {{}, {"policy.tokenizer={name: other-tokenizer}"}, TRAIN_FIELD(tokenizer)}},
      {"policy.precision", {{}, {"policy.precision=bfloat16"}, TRAIN_FIELD(precision)}},
      {"policy.train_global_batch_size",
       {{}, {"policy.train_global_batch_size=64"}, TRAIN_FIELD(global_batch_size)}},
      {"policy.train_micro_batch_size", {{}, {"policy.train_micro_batch_size=4"}, TRAIN_FIELD(micro_batch_size)}},
      {"policy.max_total_sequence_length", {{}, {"policy.max_total_sequence_length=96"}, TRAIN_FIELD(max_seq_len)}},
      {"policy.make_sequence_length_divisible_by",
       {{}, {"policy.make_sequence_length_divisible_by=8"}, TRAIN_FIELD(seq_len_divisible_by)}},
      {"policy.max_grad_norm", {{}, {"policy.max_grad_norm=0.25"}, TRAIN_FIELD(max_grad_norm)}},
      {"policy.reshard_after_forward",
       {{}, {"+policy.reshard_after_forward=false"}, TRAIN_FIELD(reshard_after_forward)}},
      {"policy.fused_lm_head_loss", {{}, {"policy.fused_lm_head_loss=true"}, TRAIN_FIELD(fused_lm_head_loss)}},
      {"policy.optimizer", {{}, {"policy.optimizer.name=torch.optim.SGD"}, {}}},
      {"policy.scheduler", {{}, {"policy.scheduler=null"}, schedule_differs}},
      {"policy.sequence_packing", {{}, {"policy.sequence_packing.enabled=true"}, TRAIN_FIELD(packing.enabled)}},
      {"policy.dynamic_batching", {{}, {"policy.dynamic_batching.enabled=true"}, {}}},
      {"policy.dtensor_cfg", {{}, {"policy.dtensor_cfg.tensor_parallel_size=2"}, PARALLEL_FIELD(tensor_parallel_size)}},
      {"policy.megatron_cfg", {{}, {"+policy.megatron_cfg={enabled: true}"}, {}}},

      {"data.max_input_seq_length", {{}, {"data.max_input_seq_length=32"}, TRAIN_FIELD(max_input_seq_length)}},
      {"data.add_bos", {{}, {"data.add_bos=false"}, TRAIN_FIELD(add_bos)}},
      {"data.add_eos", {{}, {"data.add_eos=false"}, TRAIN_FIELD(add_eos)}},
      {"data.add_generation_prompt", {{}, {"data.add_generation_prompt=true"}, {}}},
      {"data.shuffle", {{}, {"data.shuffle=false"}, TRAIN_FIELD(shuffle)}},
      // Data is collated in the training process: any count trains alike;
      // what is read is the value's type and sign.
      {"data.num_workers", {{}, {"data.num_workers=-1"}, {}}},
      {"data.train", {{}, {"data.train.dataset_name=demo_sft"}, TRAIN_FIELD(train_data.name)}},
      {"data.validation", {{}, {"data.validation=null"}, TRAIN_FIELD(val_data.has_value())}},

      {"checkpointing.enabled", {{}, {"checkpointing.enabled=false"}, TRAIN_FIELD(checkpoint.enabled)}},
      {"checkpointing.checkpoint_dir", {{}, {"checkpointing.checkpoint_dir=elsewhere"}, TRAIN_FIELD(checkpoint.dir)}},
      {"checkpointing.metric_name", {{}, {"checkpointing.metric_name=train:loss"}, TRAIN_FIELD(checkpoint.metric_name)}},
      {"checkpointing.higher_is_better",
       {{}, {"checkpointing.higher_is_better=true"}, TRAIN_FIELD(checkpoint.higher_is_better)}},
      {"checkpointing.keep_top_k", {{}, {"checkpointing.keep_top_k=7"}, TRAIN_FIELD(checkpoint.keep_top_k)}},
      {"checkpointing.save_period", {{}, {"checkpointing.save_period=4"}, TRAIN_FIELD(checkpoint.save_period)}},
      {"checkpointing.save_optimizer",
       {{}, {"checkpointing.save_optimizer=false"}, TRAIN_FIELD(checkpoint.save_optimizer)}},
      {"checkpointing.checkpoint_must_save_by",
       {{}, {"checkpointing.checkpoint_must_save_by='00:03:45:00'"}, TRAIN_FIELD(checkpoint.must_save_by)}},
      {"checkpointing.resume_from",
       {{}, {"checkpointing.resume_from=results/sft/step_10"}, TRAIN_FIELD(checkpoint.resume_from)}},
      {"checkpointing.save_consolidated",
       {{}, {"checkpointing.save_consolidated=true"}, TRAIN_FIELD(checkpoint.save_consolidated)}},
      {"checkpointing.consolidated_dtype",
       {{}, {"checkpointing.consolidated_dtype=bfloat16"}, TRAIN_FIELD(checkpoint.consolidated_dtype)}},
      {"checkpointing.consolidated_max_shard_size",
       {{}, {"checkpointing.consolidated_max_shard_size=2GiB"}, TRAIN_FIELD(checkpoint.consolidated_max_shard_bytes)}},

      {"logger.log_dir", {{}, {"logger.log_dir=elsewhere"}, TRAIN_FIELD(log_dir)}},
      {"logger.tensorboard_enabled", {{}, {"logger.tensorboard_enabled=true"}, TRAIN_FIELD(tensorboard)}},
      {"logger.rank_metrics_period", {{}, {"+logger.rank_metrics_period=3"}, TRAIN_FIELD(rank_metrics_period)}},
      // Event files go to <log_dir>/tensorboard, as the reference's logger
      // writes them: its tensorboard.log_dir is read for its type only.
      {"logger.tensorboard", {{}, {"logger.tensorboard=7"}, {}}},
      {"logger.tensorboard.log_dir", {{}, {"logger.tensorboard.log_dir=[1, 2]"}, {}}},
      {"logger.monitor_gpus", {{}, {"logger.monitor_gpus=true"}, {}}},
      {"logger.wandb_enabled", {{}, {"+logger.wandb_enabled=true"}, {}}},
      {"logger.mlflow_enabled", {{}, {"+logger.mlflow_enabled=true"}, {}}},
      {"logger.swanlab_enabled", {{}, {"+logger.swanlab_enabled=true"}, {}}},

      {"cluster.num_nodes", {{}, {"cluster.num_nodes=2"}, PARALLEL_FIELD(num_nodes)}},
      {"cluster.gpus_per_node", {{}, {"cluster.gpus_per_node=4"}, PARALLEL_FIELD(gpus_per_node)}},

      // The top level: each section is read (a key inside it changes the run).
      {"sft", {{}, {"sft.max_num_steps=7"}, TRAIN_FIELD(max_num_steps)}},
      {"policy", {{}, {"policy.model_name=tiny-qwen2"}, TRAIN_FIELD(model_name)}},
      {"data", {{}, {"data.shuffle=false"}, TRAIN_FIELD(shuffle)}},
      {"logger", {{}, {"logger.log_dir=elsewhere"}, TRAIN_FIELD(log_dir)}},
      {"checkpointing", {{}, {"checkpointing.enabled=false"}, TRAIN_FIELD(checkpoint.enabled)}},
      {"cluster", {{}, {"cluster.num_nodes=2"}, PARALLEL_FIELD(num_nodes)}},

      {"policy.tokenizer.name", {{}, {"policy.tokenizer.name=tiny-qwen2"}, TRAIN_FIELD(tokenizer)}},
      {"policy.tokenizer.chat_template", {{}, {"policy.tokenizer.chat_template=jinja"}, {}}},
      {"data.train.dataset_name", {{}, {"data.train.dataset_name=demo_sft"}, TRAIN_FIELD(train_data.name)}},
      {"data.train.split", {{}, {"data.train.split=validation"}, TRAIN_FIELD(train_data.split)}},
      {"data.validation.dataset_name",
       {{}, {"data.validation.dataset_name=demo_sft"}, TRAIN_FIELD(val_data->name)}},
      {"data.validation.split", {{}, {"data.validation.split=train"}, TRAIN_FIELD(val_data->split)}},
  };
  return table;
}

Parsed parse(const std::vector<std::string>& overrides) {
  const auto c = config::load_config(
      test_support::source_tree() / "examples" / "configs" / "sft.yaml", overrides);
  return Parsed{config::parallelism_from(c), train_options_from(c)};
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(ConfigKeys, EveryAcceptedKeyIsRead) {
  for (const auto& section : checked_config_sections()) {
    for (const auto& key : section.keys) {
      const std::string path = section.key_path(key);
      SCOPED_TRACE(path);
      const auto it = probes().find(path);
      if (it == probes().end()) {
        ADD_FAILURE() << path << " is accepted but has no probe in tests/train/config_keys_test.cpp"
                      << ": make tessel read it (or refuse the values it cannot honour), then "
                         "add a probe showing that";
        continue;
      }
      const Probe& probe = it->second;
      ASSERT_FALSE(probe.change.empty());
      ASSERT_THAT(probe.change.front(), ::testing::HasSubstr(path)) << "the probe sets another key";
      const Parsed base = parse(probe.setup);
      const auto probed = concat(probe.setup, probe.change);
      if (probe.changed) {
        EXPECT_TRUE(probe.changed(base, parse(probed))) << "setting it changed nothing";
      } else {
        try {
          parse(probed);
          ADD_FAILURE() << "the value is neither refused nor changes anything";
        } catch (const UsageError& e) {
          EXPECT_THAT(e.what(), ::testing::HasSubstr(key)) << "the error must name the key";
        }
      }
    }
  }
}

TEST(ConfigKeys, EveryProbeIsForAnAcceptedKey) {
  std::set<std::string> accepted;
  for (const auto& section : checked_config_sections()) {
    for (const auto& key : section.keys) accepted.insert(section.key_path(key));
  }
  for (const auto& [path, probe] : probes()) {
    EXPECT_EQ(accepted.count(path), 1u) << path << " is probed but no section accepts it";
  }
}

}  // namespace
}  // namespace tessel::train
