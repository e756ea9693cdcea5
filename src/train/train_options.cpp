#include "train/train_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "config/suggest.h"
#include "core/error.h"
#include "train/lr_schedule_config.h"

namespace tessel::train {

namespace {

using config::Config;

// A typo under these mappings would silently train with a default, so every
// key must be one the trainer knows (the reference's names).
void check_keys(const Config& node, const std::string& path, const std::vector<std::string>& known) {
  for (const auto& key : node.keys()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    throw UsageError(fmt::format("unknown config key '{}.{}'.{} Known keys of {}: {}", path, key,
                                 config::did_you_mean(config::closest_names(known, key)), path,
                                 fmt::join(known, ", ")));
  }
}

int64_t positive(const Config& c, const char* key) {
  const auto v = c.get<int64_t>(key);
  if (v < 1) throw UsageError(fmt::format("{} must be >= 1, got {}", key, v));
  return v;
}

optim::AdamWOptions adamw_from(const Config& c) {
  const auto name = c.get_or<std::string>("policy.optimizer.name", "torch.optim.AdamW");
  if (name != "torch.optim.AdamW" && name != "AdamW") {
    throw UsageError(fmt::format("policy.optimizer.name: '{}' is not supported; tessel trains "
                                 "with torch.optim.AdamW",
                                 name));
  }
  optim::AdamWOptions o;
  const Config* kwargs = c.find("policy.optimizer.kwargs");
  if (kwargs == nullptr || kwargs->is_null()) return o;
  check_keys(*kwargs, "policy.optimizer.kwargs",
             {"lr", "weight_decay", "betas", "eps", "foreach", "fused", "amsgrad", "maximize"});
  const Config& k = *kwargs;
  o.lr = k.get_or<double>("lr", o.lr);
  o.weight_decay = k.get_or<double>("weight_decay", o.weight_decay);
  o.eps = k.get_or<double>("eps", o.eps);
  if (k.has("betas")) {
    const auto betas = k.get<std::vector<double>>("betas");
    if (betas.size() != 2) {
      throw UsageError(fmt::format("policy.optimizer.kwargs.betas must hold two values, got {}",
                                   k.at("betas").to_flow()));
    }
    o.beta1 = betas[0];
    o.beta2 = betas[1];
  }
  if (k.get_or<bool>("amsgrad", false) || k.get_or<bool>("maximize", false)) {
    throw UsageError("policy.optimizer.kwargs: amsgrad and maximize are not supported");
  }
  optim::validate(o);
  return o;
}

DatasetOptions dataset_from(const Config& node, const std::string& path) {
  DatasetOptions d;
  d.name = node.get<std::string>("dataset_name");
  d.split = node.get_or<std::string>("split", "");
  if (d.name.empty()) throw UsageError(fmt::format("{}.dataset_name is empty", path));
  return d;
}

std::variant<bool, int> reshard_from(const Config& c) {
  const Config* node = c.find("policy.reshard_after_forward");
  if (node == nullptr || node->is_null()) return true;
  if (node->kind() == config::Kind::Bool) return node->as_bool();
  const int k = c.get<int>("policy.reshard_after_forward");
  if (k < 1) throw UsageError(fmt::format("policy.reshard_after_forward must be true, false or an int >= 1, got {}", k));
  return k;
}

}  // namespace

TrainOptions train_options_from(const Config& c) {
  TrainOptions o;
  check_keys(c.sub("sft"), "sft",
             {"max_num_epochs", "max_num_steps", "val_period", "val_batches",
              "val_global_batch_size", "val_micro_batch_size", "val_at_start", "val_at_end",
              "seed"});
  o.model_name = c.get<std::string>("policy.model_name");
  o.tokenizer = c.get_or<std::string>("policy.tokenizer.name", o.model_name);
  o.precision = c.get_or<std::string>("policy.precision", "float32");
  if (o.precision != "float32" && o.precision != "bfloat16" && o.precision != "float16") {
    throw UsageError(fmt::format("policy.precision: '{}' is not one of float32, bfloat16, float16",
                                 o.precision));
  }
  o.seed = static_cast<uint64_t>(c.get_or<int64_t>("sft.seed", 42));
  o.max_num_steps = positive(c, "sft.max_num_steps");
  o.max_num_epochs = positive(c, "sft.max_num_epochs");
  o.global_batch_size = positive(c, "policy.train_global_batch_size");
  o.micro_batch_size = positive(c, "policy.train_micro_batch_size");
  o.max_seq_len = positive(c, "policy.max_total_sequence_length");
  o.max_input_seq_length = c.get_or<int64_t>("data.max_input_seq_length", o.max_seq_len);
  if (o.max_input_seq_length > o.max_seq_len) {
    throw UsageError(fmt::format("data.max_input_seq_length={} exceeds "
                                 "policy.max_total_sequence_length={}",
                                 o.max_input_seq_length, o.max_seq_len));
  }
  o.seq_len_divisible_by = std::max<int64_t>(
      1, c.get_or<std::optional<int64_t>>("policy.make_sequence_length_divisible_by", std::nullopt)
             .value_or(1));
  o.max_grad_norm = c.get_or<std::optional<double>>("policy.max_grad_norm", std::nullopt).value_or(0.0);
  o.activation_checkpointing =
      c.get_or<bool>("policy.dtensor_cfg.activation_checkpointing", false);
  o.reshard_after_forward = reshard_from(c);

  o.adamw = adamw_from(c);
  const Config* sched = c.find("policy.scheduler");
  o.lr_schedule = lr_schedule_from(sched ? *sched : Config::null(), o.adamw.lr);

  o.val_period = c.get_or<int64_t>("sft.val_period", 0);
  if (o.val_period < 0) throw UsageError("sft.val_period must be >= 0 (0: no validation)");
  o.val_batches = c.get_or<int64_t>("sft.val_batches", 0);
  o.val_global_batch_size = c.get_or<int64_t>("sft.val_global_batch_size", o.global_batch_size);
  o.val_micro_batch_size = c.get_or<int64_t>("sft.val_micro_batch_size", o.micro_batch_size);
  o.val_at_start = c.get_or<bool>("sft.val_at_start", false);
  o.val_at_end = c.get_or<bool>("sft.val_at_end", false);

  o.train_data = dataset_from(c.sub("data.train"), "data.train");
  if (const Config* v = c.find("data.validation"); v != nullptr && !v->is_null()) {
    o.val_data = dataset_from(c.sub("data.validation"), "data.validation");
  }
  o.add_bos = c.get_or<bool>("data.add_bos", true);
  o.add_eos = c.get_or<bool>("data.add_eos", true);
  o.shuffle = c.get_or<bool>("data.shuffle", true);

  o.log_dir = c.get_or<std::string>("logger.log_dir", "logs");

  o.checkpoint.enabled = c.get_or<bool>("checkpointing.enabled", false);
  o.checkpoint.dir = c.get_or<std::string>("checkpointing.checkpoint_dir", "results");
  o.checkpoint.save_period = c.get_or<int64_t>("checkpointing.save_period", 0);
  o.checkpoint.save_optimizer = c.get_or<bool>("checkpointing.save_optimizer", true);
  o.checkpoint.keep_top_k =
      c.get_or<std::optional<int64_t>>("checkpointing.keep_top_k", std::nullopt).value_or(0);
  o.checkpoint.metric_name =
      c.get_or<std::optional<std::string>>("checkpointing.metric_name", std::nullopt)
          .value_or("");
  o.checkpoint.higher_is_better = c.get_or<bool>("checkpointing.higher_is_better", false);
  return o;
}

}  // namespace tessel::train
