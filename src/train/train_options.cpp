#include "train/train_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

#include "config/suggest.h"
#include "core/error.h"
#include "config/parallelism_config.h"
#include "io/byte_size.h"
#include "train/hf_export.h"
#include "train/lr_schedule_config.h"

namespace tessel::train {

namespace {

using config::Config;

const CheckedSection& section_of(const std::string& path) {
  for (const auto& section : checked_config_sections()) {
    if (section.path == path) return section;
  }
  throw Error(fmt::format("no key list for config section {}", path));
}

void check_keys(const Config& node, const std::string& path) { check_section_keys(node, section_of(path)); }

int64_t positive(const Config& c, const std::string& key) {
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
  check_keys(*kwargs, "policy.optimizer.kwargs");
  const Config& k = *kwargs;
  // foreach and fused choose between equivalent PyTorch kernels: tessel's
  // AdamW has one, so any boolean trains the same; only the type is checked.
  (void)k.get_or<bool>("foreach", false);
  (void)k.get_or<bool>("fused", false);
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

PackingOptions packing_from(const Config& c, const TrainOptions& o) {
  PackingOptions p;
  p.train_mb_tokens = o.max_seq_len * o.micro_batch_size;
  const Config* node = c.find("policy.sequence_packing");
  if (node == nullptr || node->is_null()) return p;
  check_keys(*node, "policy.sequence_packing");
  p.enabled = node->get_or<bool>("enabled", false);
  if (!p.enabled) return p;
  p.train_mb_tokens = node->get_or<std::optional<int64_t>>("train_mb_tokens", std::nullopt)
                          .value_or(p.train_mb_tokens);
  if (p.train_mb_tokens < o.max_input_seq_length) {
    throw UsageError(fmt::format(
        "policy.sequence_packing.train_mb_tokens={} is less than data.max_input_seq_length={}: an "
        "example of that length would fit in no packed row. Set train_mb_tokens >= {} (the "
        "default is max_total_sequence_length x train_micro_batch_size = {})",
        p.train_mb_tokens, o.max_input_seq_length, o.max_input_seq_length,
        o.max_seq_len * o.micro_batch_size));
  }
  p.algorithm = node->get_or<std::string>("algorithm", p.algorithm);
  if (p.algorithm != "modified_first_fit_decreasing" && p.algorithm != "first_fit_decreasing") {
    throw UsageError(fmt::format(
        "policy.sequence_packing.algorithm: '{}' is not supported; tessel packs with first-fit "
        "decreasing: use modified_first_fit_decreasing or first_fit_decreasing",
        p.algorithm));
  }
  p.sequence_length_round =
      node->get_or<std::optional<int64_t>>("sequence_length_round", std::nullopt).value_or(1);
  if (p.sequence_length_round < 1) {
    throw UsageError(
        fmt::format("policy.sequence_packing.sequence_length_round must be >= 1, got {}",
                    p.sequence_length_round));
  }
  return p;
}

// Dynamic batching (token-budget micro batches) is not implemented: refuse it
// rather than train with a different batching than the config asks for.
void reject_dynamic_batching(const Config& c) {
  const Config* node = c.find("policy.dynamic_batching.enabled");
  if (node != nullptr && !node->is_null() && node->as_bool()) {
    throw UsageError(
        "policy.dynamic_batching.enabled=true is not supported by tessel; set it to false (use "
        "policy.sequence_packing.enabled=true to fill micro batches with fewer padding tokens)");
  }
}

std::variant<bool, int> reshard_from(const Config& c) {
  const Config* node = c.find("policy.reshard_after_forward");
  if (node == nullptr || node->is_null()) return true;
  if (node->kind() == config::Kind::Bool) return node->as_bool();
  const int k = c.get<int>("policy.reshard_after_forward");
  if (k < 1) throw UsageError(fmt::format("policy.reshard_after_forward must be true, false or an int >= 1, got {}", k));
  return k;
}

// A name the trainer does not record would leave keep_top_k ranking nothing
// and silently keep the most recent checkpoints instead, so it fails here.
std::string checkpoint_metric_from(const Config& c, const AlgorithmSection& algorithm) {
  const auto name =
      c.get_or<std::optional<std::string>>("checkpointing.metric_name", std::nullopt).value_or("");
  if (name.empty()) return name;
  if (name == "val:loss") return "val:val_loss";  // the validation record's own key
  std::vector<std::string> known = checkpoint_metric_names();
  known.insert(known.end(), algorithm.checkpoint_metrics.begin(), algorithm.checkpoint_metrics.end());
  if (std::find(known.begin(), known.end(), name) != known.end()) return name;
  std::vector<std::string> spellings = known;
  spellings.push_back("val:loss");  // an old recipe's "val_loss" is closest to this
  throw UsageError(fmt::format(
      "checkpointing.metric_name: '{}' is not a metric tessel records.{} Accepted: {}, val:loss "
      "(the same as val:val_loss), or null to keep the most recent checkpoints",
      name, config::did_you_mean(config::closest_names(spellings, name)), fmt::join(known, ", ")));
}

// The sections of `sections` that are not parsed by a helper of their own:
// checked as a whole when present as a mapping.
void check_plain_sections(const Config& c, const std::vector<CheckedSection>& sections) {
  const auto find = [&](const std::string& path) -> const CheckedSection& {
    for (const auto& section : sections) {
      if (section.path == path) return section;
    }
    throw Error(fmt::format("no key list for config section {}", path));
  };
  check_section_keys(c, find(""));
  for (const char* path : {"policy", "policy.tokenizer", "policy.optimizer", "data", "data.train",
                           "data.validation", "checkpointing", "logger", "logger.tensorboard", "cluster"}) {
    const Config* node = c.find(path);
    if (node == nullptr || node->is_null()) continue;
    if (!node->is_map()) {
      throw UsageError(fmt::format("{} must be a mapping (keys: {}), got {}", path, fmt::join(find(path).keys, ", "),
                                   node->to_flow()));
    }
    check_section_keys(*node, find(path));
  }
}

// Keys of the reference's recipes that name what a CPU build of tessel does
// not have: accepted as false, refused as true with what to use instead.
void refuse_if_true(const Config& c, const char* key, const char* why) {
  if (c.get_or<bool>(key, false)) throw UsageError(fmt::format("{}=true: {}; set it to false", key, why));
}

// "DD:HH:MM:SS" (the reference's format); null: none.
std::optional<std::chrono::seconds> must_save_by_from(const Config& c) {
  const auto text = c.get_or<std::optional<std::string>>("checkpointing.checkpoint_must_save_by", std::nullopt);
  if (!text) return std::nullopt;
  int64_t parts[4] = {};
  int fields = 0;
  std::size_t start = 0;
  bool ok = true;
  while (ok && fields < 4) {
    const std::size_t end = text->find(':', start);
    const std::string field = text->substr(start, end == std::string::npos ? std::string::npos : end - start);
    ok = !field.empty() && field.size() <= 6 && field.find_first_not_of("0123456789") == std::string::npos;
    if (ok) parts[fields++] = std::stoll(field);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (!ok || fields != 4 || parts[1] > 23 || parts[2] > 59 || parts[3] > 59) {
    throw UsageError(fmt::format("checkpointing.checkpoint_must_save_by: '{}' is not DD:HH:MM:SS (e.g. "
                                 "\"00:03:45:00\" for 3 h 45 min), or null for no time limit",
                                 *text));
  }
  return std::chrono::seconds(((parts[0] * 24 + parts[1]) * 60 + parts[2]) * 60 + parts[3]);
}

}  // namespace

void check_section_keys(const Config& node, const CheckedSection& section) {
  // A typo under these mappings would silently train with a default, so
  // every key must be one the trainer knows (the reference's names).
  const auto& known = section.keys;
  for (const auto& key : node.keys()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    throw UsageError(fmt::format("unknown config key '{}'.{} Known keys of {}: {}", section.key_path(key),
                                 config::did_you_mean(config::closest_names(known, key)),
                                 section.path.empty() ? "the top level" : section.path, fmt::join(known, ", ")));
  }
}

std::vector<CheckedSection> checked_config_sections(const AlgorithmSection& algorithm) {
  std::vector<CheckedSection> sections = checked_config_sections();
  for (auto& section : sections) {
    if (section.path.empty()) {
      std::replace(section.keys.begin(), section.keys.end(), std::string("sft"), algorithm.name);
      section.keys.insert(section.keys.end(), algorithm.top_level_keys.begin(), algorithm.top_level_keys.end());
    } else if (section.path == "sft") {
      section.path = algorithm.name;
      section.keys.insert(section.keys.end(), algorithm.extra_keys.begin(), algorithm.extra_keys.end());
    }
    for (const auto& [path, keys] : algorithm.section_keys) {
      if (section.path == path) section.keys.insert(section.keys.end(), keys.begin(), keys.end());
    }
  }
  return sections;
}

const std::vector<CheckedSection>& checked_config_sections() {
  static const std::vector<CheckedSection> sections = {
      {"", {"sft", "policy", "data", "logger", "checkpointing", "cluster"}},
      {"sft",
       {"max_num_epochs", "max_num_steps", "val_period", "val_batches", "val_global_batch_size",
        "val_micro_batch_size", "val_at_start", "val_at_end", "seed"}},
      {"policy.optimizer", {"name", "kwargs"}},
      {"policy.optimizer.kwargs",
       {"lr", "weight_decay", "betas", "eps", "foreach", "fused", "amsgrad", "maximize"}},
      {"policy.sequence_packing",
       {"enabled", "train_mb_tokens", "algorithm", "sequence_length_round"}},
      {"policy.scheduler", lr_schedule_mapping_keys()},
      {"policy.dtensor_cfg", config::dtensor_cfg_keys()},
      {"policy",
       {"model_name", "tokenizer", "precision", "train_global_batch_size", "train_micro_batch_size",
        "max_total_sequence_length", "make_sequence_length_divisible_by", "max_grad_norm", "reshard_after_forward",
        "optimizer", "scheduler", "sequence_packing", "dynamic_batching", "dtensor_cfg", "megatron_cfg",
        "fused_lm_head_loss"}},
      {"policy.tokenizer", {"name", "chat_template"}},
      {"data.train", {"dataset_name", "split"}},
      {"data.validation", {"dataset_name", "split"}},
      {"data",
       {"max_input_seq_length", "add_bos", "add_eos", "add_generation_prompt", "shuffle", "num_workers", "train",
        "validation"}},
      {"checkpointing",
       {"enabled", "checkpoint_dir", "metric_name", "higher_is_better", "keep_top_k", "save_period",
        "save_optimizer", "checkpoint_must_save_by", "resume_from", "save_consolidated", "consolidated_dtype",
        "consolidated_max_shard_size"}},
      {"logger",
       {"log_dir", "tensorboard_enabled", "tensorboard", "rank_metrics_period", "monitor_gpus", "wandb_enabled", "mlflow_enabled",
        "swanlab_enabled"}},
      {"logger.tensorboard", {"log_dir"}},
      {"cluster", {"num_nodes", "gpus_per_node"}},
  };
  return sections;
}

const std::vector<std::string>& checkpoint_metric_names() {
  static const std::vector<std::string> names = {"train:loss", "train:grad_norm", "val:val_loss"};
  return names;
}

TrainOptions train_options_from(const Config& c, const AlgorithmSection& algorithm) {
  TrainOptions o;
  const std::vector<CheckedSection> sections = checked_config_sections(algorithm);
  const std::string& a = algorithm.name;
  auto key = [&](const char* name) { return a + "." + name; };
  const auto section = [&](const std::string& path) -> const CheckedSection& {
    return *std::find_if(sections.begin(), sections.end(), [&](const CheckedSection& s) { return s.path == path; });
  };
  check_section_keys(c.sub(a), section(a));
  check_plain_sections(c, sections);
  o.model_name = c.get<std::string>("policy.model_name");
  o.tokenizer = c.get_or<std::string>("policy.tokenizer.name", o.model_name);
  if (c.get_or<std::optional<std::string>>("policy.tokenizer.chat_template", std::nullopt)) {
    throw UsageError("policy.tokenizer.chat_template: tessel formats chat rows with its own fixed template "
                     "(<|system|>, <|user|>, <|assistant|> turns, loss on the assistant's content; "
                     "src/data/sft_template.h) and does not evaluate Jinja templates; set it to null");
  }
  o.precision = c.get_or<std::string>("policy.precision", "float32");
  if (o.precision == "float16") {
    // fp16's range loses most of a token-averaged loss's gradients (they are
    // ~1e-6 and smaller) unless the loss is scaled up and the step skipped on
    // overflow, which tessel does not do; bf16 has fp32's range.
    throw UsageError(
        "policy.precision: float16 needs dynamic loss scaling, which tessel does not have (its small "
        "gradients would underflow to zero); use bfloat16 (the same memory and speed on GPUs since Ampere)");
  }
  if (o.precision != "float32" && o.precision != "bfloat16") {
    throw UsageError(fmt::format("policy.precision: '{}' is not one of float32, bfloat16", o.precision));
  }
  o.seed = static_cast<uint64_t>(c.get_or<int64_t>(key("seed"), 42));
  o.max_num_steps = positive(c, key("max_num_steps"));
  o.max_num_epochs = positive(c, key("max_num_epochs"));
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
  o.fused_lm_head_loss = c.get_or<bool>("policy.fused_lm_head_loss", false);
  o.packing = packing_from(c, o);
  reject_dynamic_batching(c);

  o.adamw = adamw_from(c);
  const Config* sched = c.find("policy.scheduler");
  o.lr_schedule = lr_schedule_from(sched ? *sched : Config::null(), o.adamw.lr);

  o.val_period = c.get_or<int64_t>(key("val_period"), 0);
  if (o.val_period < 0) throw UsageError(fmt::format("{} must be >= 0 (0: no validation)", key("val_period")));
  o.val_batches = c.get_or<int64_t>(key("val_batches"), 0);
  o.val_global_batch_size = c.get_or<int64_t>(key("val_global_batch_size"), o.global_batch_size);
  o.val_micro_batch_size = c.get_or<int64_t>(key("val_micro_batch_size"), o.micro_batch_size);
  o.val_at_start = c.get_or<bool>(key("val_at_start"), false);
  o.val_at_end = c.get_or<bool>(key("val_at_end"), false);

  o.train_data = dataset_from(c.sub("data.train"), "data.train");
  if (const Config* v = c.find("data.validation"); v != nullptr && !v->is_null()) {
    o.val_data = dataset_from(c.sub("data.validation"), "data.validation");
  }
  o.add_bos = c.get_or<bool>("data.add_bos", true);
  o.add_eos = c.get_or<bool>("data.add_eos", true);
  o.shuffle = c.get_or<bool>("data.shuffle", true);
  // The prompt already ends where the response starts (data/sft_template.h);
  // a generation prompt belongs to generation, not to SFT targets.
  refuse_if_true(c, "data.add_generation_prompt",
                 "tessel's rows are plain prompt + response text (no chat template adds a generation prompt): "
                 "put what the model should see before its response at the end of the prompt itself");
  // Data is read and collated in the training process, with nothing to
  // parallelise across workers: any count trains the same; the type is read.
  if (c.get_or<int64_t>("data.num_workers", 0) < 0) {
    throw UsageError("data.num_workers must be >= 0 (tessel reads data in the training process; any count "
                     "trains the same)");
  }

  o.log_dir = c.get_or<std::string>("logger.log_dir", "logs");
  o.tensorboard = c.get_or<bool>("logger.tensorboard_enabled", false);
  o.rank_metrics_period = c.has("logger.rank_metrics_period") ? positive(c, "logger.rank_metrics_period") : 10;
  // As the reference's logger, event files go to <log_dir>/tensorboard; its
  // logger.tensorboard.log_dir is read for its type only.
  (void)c.get_or<std::optional<std::string>>("logger.tensorboard.log_dir", std::nullopt);
  refuse_if_true(c, "logger.monitor_gpus", "this is a CPU build with no GPUs to monitor");
  refuse_if_true(c, "logger.wandb_enabled", "tessel logs to metrics.jsonl and TensorBoard (logger.tensorboard_enabled)");
  refuse_if_true(c, "logger.mlflow_enabled", "tessel logs to metrics.jsonl and TensorBoard (logger.tensorboard_enabled)");
  refuse_if_true(c, "logger.swanlab_enabled",
                 "tessel logs to metrics.jsonl and TensorBoard (logger.tensorboard_enabled)");
  refuse_if_true(c, "policy.megatron_cfg.enabled", "tessel is the DTensor (FSDP2) path; use policy.dtensor_cfg");

  o.checkpoint.enabled = c.get_or<bool>("checkpointing.enabled", false);
  o.checkpoint.dir = c.get_or<std::string>("checkpointing.checkpoint_dir", "results");
  o.checkpoint.save_period = c.get_or<int64_t>("checkpointing.save_period", 0);
  o.checkpoint.save_optimizer = c.get_or<bool>("checkpointing.save_optimizer", true);
  o.checkpoint.keep_top_k =
      c.get_or<std::optional<int64_t>>("checkpointing.keep_top_k", std::nullopt).value_or(0);
  o.checkpoint.metric_name = checkpoint_metric_from(c, algorithm);
  o.checkpoint.higher_is_better = c.get_or<bool>("checkpointing.higher_is_better", false);
  o.checkpoint.resume_from =
      c.get_or<std::optional<std::string>>("checkpointing.resume_from", std::nullopt).value_or("");
  o.checkpoint.must_save_by = must_save_by_from(c);
  o.checkpoint.save_consolidated = c.get_or<bool>("checkpointing.save_consolidated", false);
  o.checkpoint.consolidated_dtype = export_dtype_from_name(
      c.get_or<std::string>("checkpointing.consolidated_dtype", "float32"), "checkpointing.consolidated_dtype");
  o.checkpoint.consolidated_max_shard_bytes = io::parse_byte_size(
      c.get_or<std::string>("checkpointing.consolidated_max_shard_size", "5GB"),
      "checkpointing.consolidated_max_shard_size");
  if (o.checkpoint.save_consolidated && !o.checkpoint.enabled) {
    throw UsageError(
        "checkpointing.save_consolidated=true writes the Hugging Face directory with each checkpoint, but "
        "checkpointing.enabled is false: enable checkpointing (save_period 0 saves only the last step), or "
        "export later with `tessel convert`");
  }
  return o;
}

at::ScalarType compute_dtype(const TrainOptions& options) {
  return options.precision == "bfloat16" ? at::kBFloat16 : at::kFloat;
}

}  // namespace tessel::train
