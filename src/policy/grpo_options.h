// GRPO's settings as NeMo RL's GRPO recipe names them (SPEC 11): grpo.*,
// policy.generation.*, policy.generation_batch_size,
// policy.logprob_batch_size and env.verifier (tessel's). loss_fn.* is
// policy/loss_options.h's. Every listed key is read: it changes the run, or a
// value tessel cannot honour is refused with what to write instead
// (tests/policy/grpo_options_test.cpp probes each); any other key is a
// UsageError naming it and the closest known ones. docs/rl.md says what each
// key does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "policy/advantages.h"
#include "policy/decoding_model.h"
#include "policy/sampling.h"
#include "train/train_options.h"

namespace tessel::policy {

struct GrpoOptions {
  int64_t num_prompts_per_step = 32;
  int64_t num_generations_per_prompt = 16;
  AdvantageOptions advantages;
  // Rollouts that end at a length limit instead of a stop token are left out
  // of the loss (and of their prompt's baseline).
  bool overlong_filtering = false;
  int64_t max_val_samples = 256;  // validation prompts, each generated once (greedy)
  int64_t val_batch_size = 256;   // validation prompts decoded at once per rank

  // policy.generation
  SamplingOptions sampling;            // temperature, top_p, top_k; the seed comes from grpo.seed and the step
  int64_t max_new_tokens = 0;          // 0: up to policy.max_total_sequence_length
  std::vector<int64_t> stop_token_ids; // besides the tokenizer's eos
  DecodingLayout decoding_layout = DecodingLayout::Auto;
  int64_t generation_batch_size = 0;   // policy.generation_batch_size: rows decoded at once per rank (0: all)
  int64_t logprob_batch_size = 0;      // policy.logprob_batch_size: rows per log-prob forward (0: a micro batch)

  std::string verifier = "exact_match";  // env.verifier (policy/verifier.h)
  // sft_warmup (tessel's): an SFT recipe run first, from policy.model_name;
  // GRPO then starts from the model it trained. Empty: none.
  std::string sft_warmup;
};

// The algorithm section of a GRPO recipe (`grpo`, the loop's keys and
// GRPO's; loss_fn and env at the top level; the policy keys above), for
// train::train_options_from.
train::AlgorithmSection grpo_section();

// grpo.*, policy.generation.*, policy.*_batch_size and env.* of `config`,
// checked against `train` (the batch sizes must describe the same rollouts).
GrpoOptions grpo_options_from(const config::Config& config, const train::TrainOptions& train);

}  // namespace tessel::policy
