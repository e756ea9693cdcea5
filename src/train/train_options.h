// TrainOptions: the typed view of a run's recipe (sft.*, policy.*, data.*,
// logger.*, checkpointing.*; keys of examples/configs/sft.yaml) that the
// trainer reads. Parsing everything up front means a wrong value fails before
// a model is built or a process waits on a collective, and keeps the loop
// free of config lookups. Parallel layout keys are read separately
// (config::parallelism_from) because the mesh needs them before the trainer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "config/config.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"

namespace tessel::train {

struct DatasetOptions {
  std::string name;   // "synthetic", "demo", or a path to .jsonl / token file
  std::string split;  // "train" / "validation"
};

struct CheckpointOptions {
  bool enabled = false;
  std::string dir;
  int64_t save_period = 0;
  bool save_optimizer = true;
  int64_t keep_top_k = 0;  // 0 or less: keep every checkpoint
  std::string metric_name;  // "val:val_loss" / "train:loss"
  bool higher_is_better = false;
};

struct TrainOptions {
  std::string model_name;   // preset name or a local HF model directory
  std::string tokenizer;    // policy.tokenizer.name (a preset name: byte-level)
  std::string precision;    // "float32" | "bfloat16" | "float16"
  uint64_t seed = 42;

  int64_t max_num_steps = 0;
  int64_t max_num_epochs = 1;
  int64_t global_batch_size = 1;
  int64_t micro_batch_size = 1;
  int64_t max_seq_len = 0;           // policy.max_total_sequence_length
  int64_t max_input_seq_length = 0;  // data.max_input_seq_length (truncation)
  int64_t seq_len_divisible_by = 1;  // policy.make_sequence_length_divisible_by
  double max_grad_norm = 0.0;  // <= 0: no clipping (the norm is still reported)
  bool activation_checkpointing = false;
  // Not a reference key (optional, policy.reshard_after_forward): true,
  // false, or an int k (FSDPOptions::reshard_after_forward).
  std::variant<bool, int> reshard_after_forward = true;

  optim::AdamWOptions adamw;
  optim::LrScheduleOptions lr_schedule;

  int64_t val_period = 0;  // 0: no validation
  int64_t val_batches = 0;
  int64_t val_global_batch_size = 1;
  int64_t val_micro_batch_size = 1;
  bool val_at_start = false;
  bool val_at_end = false;

  DatasetOptions train_data;
  std::optional<DatasetOptions> val_data;  // absent / null data.validation: none
  bool add_bos = true;
  bool add_eos = true;
  bool shuffle = true;

  std::string log_dir;  // metrics.jsonl, loss_curve.svg, config.yaml
  CheckpointOptions checkpoint;
};

// Reads and checks every key the trainer uses. UsageError naming the key and
// what to write instead (an unknown optimizer kwarg or sft.* key, a wrong
// type, a non-positive size).
TrainOptions train_options_from(const config::Config& config);

}  // namespace tessel::train
