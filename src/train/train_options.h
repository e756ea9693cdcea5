// TrainOptions: the typed view of a run's recipe (sft.*, policy.*, data.*,
// logger.*, checkpointing.*; keys of examples/configs/sft.yaml) that the
// trainer reads. Parsing everything up front means a wrong value fails before
// a model is built or a process waits on a collective, and keeps the loop
// free of config lookups. Parallel layout keys are read separately
// (config::parallelism_from) because the mesh needs them before the trainer.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <c10/core/ScalarType.h>

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
  // The metric keep_top_k ranks by, one of checkpoint_metric_names() ("val:loss"
  // is stored as "val:val_loss"); empty (null): the most recent are kept.
  std::string metric_name;
  bool higher_is_better = false;
  // checkpointing.resume_from: a step_<N> directory to resume from instead of
  // the latest in `dir` (e.g. the one before a damaged checkpoint); empty:
  // the latest, when `enabled`.
  std::string resume_from;
  // checkpointing.checkpoint_must_save_by ("DD:HH:MM:SS", as the reference):
  // once this much time has passed since training started, the run saves a
  // checkpoint after the current step and ends (a job's time limit minus a
  // margin: the next job resumes). Unset: no limit.
  std::optional<std::chrono::seconds> must_save_by;
  // checkpointing.save_consolidated (NeMo RL's key): each saved step also
  // holds consolidated/, the model as a Hugging Face directory that
  // transformers and serving engines load (train/hf_export.h), written by
  // every rank from its own shards. tessel only: its weights' dtype
  // (consolidated_dtype) and shard size (consolidated_max_shard_size).
  bool save_consolidated = false;
  c10::ScalarType consolidated_dtype = c10::ScalarType::Float;
  uint64_t consolidated_max_shard_bytes = 5'000'000'000;
};

// The directory of a saved step that checkpointing.save_consolidated writes.
inline constexpr const char* kConsolidatedDirName = "consolidated";

// A config mapping with a closed list of keys: any other key is a UsageError
// (a typo would otherwise train silently with a default), and every listed
// key is read: it changes the run, or a value tessel cannot honour is refused
// (tests/train/config_keys_test.cpp holds each key to that).
struct CheckedSection {
  std::string path;  // "" (the top level), "sft", "policy.dtensor_cfg", ...
  std::vector<std::string> keys;
  // The dotted name of one of its keys ("sft.seed"; "sft" at the top level).
  std::string key_path(const std::string& key) const { return path.empty() ? key : path + "." + key; }
};
// SFT's sections (its algorithm section is "sft").
const std::vector<CheckedSection>& checked_config_sections();

// The section of a recipe that names its algorithm: "sft", "dpo". It holds
// the loop's keys (max_num_epochs, max_num_steps, val_period, val_batches,
// val_global_batch_size, val_micro_batch_size, val_at_start, val_at_end,
// seed) and the algorithm's own (`extra_keys`, which its parser reads, e.g.
// policy/dpo_options.h); `top_level_keys` are more top-level sections the
// algorithm reads (e.g. "loss_fn").
struct AlgorithmSection {
  std::string name = "sft";
  std::vector<std::string> extra_keys;
  std::vector<std::string> top_level_keys;
  // More keys the algorithm reads in sections of the shared layout, by
  // section path (GRPO: "policy" -> generation, generation_batch_size, ...).
  std::vector<std::pair<std::string, std::vector<std::string>>> section_keys = {};
  // More names checkpointing.metric_name accepts: validation metrics the
  // algorithm's recipe reports ("val:accuracy" for GRPO).
  std::vector<std::string> checkpoint_metrics = {};
};

// SFT's sections with the algorithm section (and the top level) of `algorithm`.
std::vector<CheckedSection> checked_config_sections(const AlgorithmSection& algorithm);

// UsageError naming the first key of `node` that `section` does not list,
// the closest known names and all of them.
void check_section_keys(const config::Config& node, const CheckedSection& section);

// What checkpointing.metric_name accepts: the metrics the trainer records in
// every checkpoint (trainer.cpp), in the reference's "<train|val>:<name>" form.
// A validation's metrics beside its loss are recorded as "val:<name>" too;
// an algorithm lists the ones it reports (AlgorithmSection::checkpoint_metrics).
const std::vector<std::string>& checkpoint_metric_names();

// policy.sequence_packing. When enabled, each micro batch the sampler picks
// (train_micro_batch_size examples; the validation micro batches likewise) is
// laid out as rows of several documents instead of one padded example per
// row: data::pack (first-fit decreasing) into rows of at most train_mb_tokens
// tokens, with per-document position_ids and block-diagonal attention.
// Packing never moves an example to another micro batch, rank or step, so the
// loss of a step is that of the unpacked run (up to rounding).
struct PackingOptions {
  bool enabled = false;
  int64_t train_mb_tokens = 0;  // row capacity; default max_total_sequence_length x micro batch
  // "modified_first_fit_decreasing" (the reference's default) or
  // "first_fit_decreasing": tessel packs both with first-fit decreasing.
  std::string algorithm = "modified_first_fit_decreasing";
  // Packed rows are padded to a multiple of this (and of
  // make_sequence_length_divisible_by).
  int64_t sequence_length_round = 1;
};

struct TrainOptions {
  std::string model_name;   // preset name or a local HF model directory
  std::string tokenizer;    // policy.tokenizer.name (a preset name: byte-level)
  std::string precision;    // "float32" | "bfloat16" (float16 is refused: no loss scaling)
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
  // Not a reference key (optional, policy.fused_lm_head_loss): lm_head
  // computes the cross-entropy sum over vocabulary blocks and the
  // [tokens, vocab] logits never exist (nn/linear_cross_entropy.h; SFT, tp 1).
  bool fused_lm_head_loss = false;
  PackingOptions packing;
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
  // logger.tensorboard_enabled: event files under <log_dir>/tensorboard, where
  // the reference's logger puts them (its logger.tensorboard.log_dir is not read).
  bool tensorboard = false;
  // logger.rank_metrics_period (tessel's own key): every how many steps the
  // train records carry every rank's peak RSS and bytes sent, which takes an
  // all-gather over the world; step 1 of a run and its last step always do.
  int64_t rank_metrics_period = 10;
  CheckpointOptions checkpoint;
};

// The dtype of the model's forward for policy.precision: float32, bfloat16
// or float16 (the parameters FSDP gathers; the shards stay float32).
at::ScalarType compute_dtype(const TrainOptions& options);

// Reads and checks every key the training loop uses, the loop's keys read
// from `algorithm`'s section. UsageError naming the key and what to write
// instead (an unknown optimizer kwarg or sft.* key, a wrong type, a
// non-positive size).
TrainOptions train_options_from(const config::Config& config, const AlgorithmSection& algorithm = {});

}  // namespace tessel::train
