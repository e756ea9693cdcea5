#include "policy/grpo_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "core/error.h"
#include "policy/loss_options.h"
#include "policy/verifier.h"

namespace tessel::policy {

namespace {

using config::Config;

const std::vector<std::string>& grpo_keys() {
  static const std::vector<std::string> keys = {
      "num_prompts_per_step", "num_generations_per_prompt", "max_rollout_turns", "normalize_rewards",
      "use_leave_one_out_baseline", "overlong_filtering", "max_val_samples", "val_batch_size", "async_grpo"};
  return keys;
}

const std::vector<std::string>& generation_keys() {
  static const std::vector<std::string> keys = {"backend",        "max_new_tokens", "temperature", "top_p",
                                                "top_k",          "stop_token_ids", "stop_strings", "decoding_layout",
                                                "colocated",      "vllm_cfg",       "vllm_kwargs"};
  return keys;
}

int64_t at_least(const Config& c, const std::string& key, int64_t fallback, int64_t minimum) {
  const int64_t v = c.get_or<std::optional<int64_t>>(key, std::nullopt).value_or(fallback);
  if (v < minimum) throw UsageError(fmt::format("{} must be >= {}, got {}", key, minimum, v));
  return v;
}

// A mapping under `key` that tessel has no use for: absent, null or empty only.
void refuse_contents(const Config& c, const std::string& key, const std::string& why) {
  const Config* node = c.find(key);
  if (node == nullptr || node->is_null() || (node->is_map() && node->keys().empty())) return;
  throw UsageError(fmt::format("{}: {}; remove it (or set it to null)", key, why));
}

void read_generation(const Config& c, const train::TrainOptions& train, GrpoOptions& o) {
  const Config* node = c.find("policy.generation");
  if (node != nullptr && !node->is_null()) {
    if (!node->is_map()) throw UsageError(fmt::format("policy.generation must be a mapping, got {}", node->to_flow()));
    train::check_section_keys(*node, {"policy.generation", generation_keys()});
  }
  const std::string backend = c.get_or<std::string>("policy.generation.backend", "tessel");
  if (backend != "tessel") {
    throw UsageError(fmt::format("policy.generation.backend: '{}' is another engine; tessel generates in its own "
                                 "training processes (a KV cache over a decoding copy of the weights): set it to "
                                 "\"tessel\"",
                                 backend));
  }
  o.max_new_tokens = at_least(c, "policy.generation.max_new_tokens", train.max_seq_len, 1);
  o.sampling.temperature = c.get_or<double>("policy.generation.temperature", 1.0);
  o.sampling.top_p = c.get_or<std::optional<double>>("policy.generation.top_p", std::nullopt).value_or(1.0);
  // null or -1 (vLLM's "off") or 0: every token.
  o.sampling.top_k = c.get_or<std::optional<int64_t>>("policy.generation.top_k", std::nullopt).value_or(0);
  if (o.sampling.top_k < -1) {
    throw UsageError(fmt::format("policy.generation.top_k must be a positive count, or null / -1 / 0 for no top-k "
                                 "filter; got {}",
                                 o.sampling.top_k));
  }
  check_sampling_options(o.sampling, "policy.generation.");
  o.stop_token_ids = c.get_or<std::optional<std::vector<int64_t>>>("policy.generation.stop_token_ids", std::nullopt)
                         .value_or(std::vector<int64_t>{});
  const auto stop_strings =
      c.get_or<std::optional<std::vector<std::string>>>("policy.generation.stop_strings", std::nullopt);
  if (stop_strings && !stop_strings->empty()) {
    throw UsageError("policy.generation.stop_strings: stopping at text is not built; a rollout stops at the "
                     "tokenizer's eos and at policy.generation.stop_token_ids: set stop_strings to null");
  }
  o.decoding_layout = parse_decoding_layout(c.get_or<std::string>("policy.generation.decoding_layout", "auto"),
                                            "policy.generation.decoding_layout");
  if (const Config* colocated = c.find("policy.generation.colocated"); colocated != nullptr && !colocated->is_null()) {
    train::check_section_keys(*colocated, {"policy.generation.colocated", {"enabled", "resources"}});
    if (!c.get_or<bool>("policy.generation.colocated.enabled", true)) {
      throw UsageError("policy.generation.colocated.enabled=false: tessel generates on the training processes "
                       "themselves (the weights are refit once per step, in place); set it to true");
    }
    refuse_contents(c, "policy.generation.colocated.resources",
                    "generation shares the training processes, so it needs no resources of its own");
  }
  refuse_contents(c, "policy.generation.vllm_cfg",
                  "tessel does not use vLLM (its decoding layout is policy.generation.decoding_layout)");
  refuse_contents(c, "policy.generation.vllm_kwargs", "tessel does not use vLLM");
  o.generation_batch_size = at_least(c, "policy.generation_batch_size", 0, 0);
  o.logprob_batch_size = at_least(c, "policy.logprob_batch_size", 0, 0);
  if (c.get_or<std::optional<int64_t>>("policy.logprob_chunk_size", std::nullopt)) {
    throw UsageError("policy.logprob_chunk_size: tessel always computes log-probs a block of rows at a time "
                     "(about 4 MiB of float32 each, docs/rl.md); set it to null");
  }
}

}  // namespace

train::AlgorithmSection grpo_section() {
  train::AlgorithmSection s;
  s.name = "grpo";
  s.extra_keys = grpo_keys();
  s.top_level_keys = {"loss_fn", "env", "sft_warmup"};
  s.section_keys = {{"policy", {"generation", "generation_batch_size", "logprob_batch_size", "logprob_chunk_size"}}};
  s.checkpoint_metrics = {"val:accuracy", "val:avg_length"};
  return s;
}

GrpoOptions grpo_options_from(const Config& c, const train::TrainOptions& train) {
  GrpoOptions o;
  o.num_prompts_per_step = at_least(c, "grpo.num_prompts_per_step", o.num_prompts_per_step, 1);
  o.num_generations_per_prompt = at_least(c, "grpo.num_generations_per_prompt", o.num_generations_per_prompt, 1);
  const int64_t rollouts = o.num_prompts_per_step * o.num_generations_per_prompt;
  if (train.global_batch_size != rollouts) {
    throw UsageError(fmt::format(
        "policy.train_global_batch_size={} but a GRPO step makes grpo.num_prompts_per_step x "
        "num_generations_per_prompt = {} x {} = {} rollouts: tessel takes one optimizer step per GRPO step over all "
        "of them; set policy.train_global_batch_size={}",
        train.global_batch_size, o.num_prompts_per_step, o.num_generations_per_prompt, rollouts, rollouts));
  }
  if (at_least(c, "grpo.max_rollout_turns", 1, 1) != 1) {
    throw UsageError("grpo.max_rollout_turns: multi-turn rollouts are not built; a rollout is one response to its "
                     "prompt: set it to 1");
  }
  o.advantages.normalize_rewards = c.get_or<bool>("grpo.normalize_rewards", true);
  o.advantages.leave_one_out_baseline = c.get_or<bool>("grpo.use_leave_one_out_baseline", true);
  o.overlong_filtering = c.get_or<bool>("grpo.overlong_filtering", false);
  o.max_val_samples = at_least(c, "grpo.max_val_samples", o.max_val_samples, 1);
  o.val_batch_size = at_least(c, "grpo.val_batch_size", o.val_batch_size, 1);
  if (const Config* async = c.find("grpo.async_grpo"); async != nullptr && !async->is_null()) {
    train::check_section_keys(*async, {"grpo.async_grpo", {"enabled", "max_trajectory_age_steps"}});
    if (c.get_or<bool>("grpo.async_grpo.enabled", false)) {
      throw UsageError("grpo.async_grpo.enabled=true: tessel's GRPO is synchronous (each step trains on the "
                       "rollouts of the weights it starts from); set it to false");
    }
    (void)at_least(c, "grpo.async_grpo.max_trajectory_age_steps", 1, 1);  // meaningful only when enabled
  }
  for (const char* key : {"grpo.val_batches", "grpo.val_global_batch_size", "grpo.val_micro_batch_size"}) {
    if (c.has(key)) {
      throw UsageError(fmt::format("{}: GRPO validates by generating for grpo.max_val_samples prompts (decoded "
                                   "grpo.val_batch_size at a time); remove {}",
                                   key, key));
    }
  }
  if (train.packing.enabled) {
    throw UsageError("policy.sequence_packing.enabled=true: GRPO lays out each rollout as a row of its own "
                     "(prompt + response); packing rollouts is not built: set it to false");
  }
  read_generation(c, train, o);
  if (const Config* env = c.find("env"); env != nullptr && !env->is_null()) {
    train::check_section_keys(*env, {"env", {"verifier"}});
  }
  o.verifier = c.get_or<std::string>("env.verifier", o.verifier);
  (void)make_verifier(o.verifier, "env.verifier");  // checked here, made by the recipe
  o.sft_warmup = c.get_or<std::optional<std::string>>("sft_warmup", std::nullopt).value_or("");
  (void)clipped_pg_options_from(c);                   // loss_fn.*, checked before any process starts
  return o;
}

}  // namespace tessel::policy
