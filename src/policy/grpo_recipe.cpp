#include "policy/grpo_recipe.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "data/generated_text.h"
#include "loss/cross_entropy.h"
#include "policy/logprobs.h"
#include "policy/policy_batch.h"
#include "policy/sft_warmup.h"

namespace tessel::policy {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

data::DatasetOptions prompt_options(const train::TrainOptions& o, const train::DatasetOptions& which) {
  data::DatasetOptions d;
  d.sequence.add_bos = o.add_bos;
  d.sequence.max_input_seq_length = o.max_input_seq_length;
  d.split = which.split.empty() ? "train" : which.split;
  return d;
}

// The sampler's seed for one step: grpo.seed and the step, so steps draw
// differently and a resumed run draws what the uninterrupted one would have.
uint64_t step_seed(uint64_t seed, int64_t step) {
  return seed * 0x100000001B3ull + static_cast<uint64_t>(step) + 1;
}

double mean(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

double population_std(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0.0;
  for (double x : v) s += (x - m) * (x - m);
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace

std::vector<train::MicroBatch> rollout_micro_batches(const Rollouts& rollouts, int64_t first, int64_t count,
                                                     int64_t micro, int64_t divisible_by) {
  TESSEL_CHECK(micro > 0 && count % micro == 0, "{} rollouts do not split into micro batches of {}", count, micro);
  const Generation& g = rollouts.responses;
  std::vector<train::MicroBatch> out;
  for (int64_t begin = first; begin < first + count; begin += micro) {
    std::vector<int64_t> prompt_len(micro), total(micro);
    int64_t width = 1;
    for (int64_t i = 0; i < micro; ++i) {
      prompt_len[i] = static_cast<int64_t>(rollouts.prompts[static_cast<size_t>(begin + i)].size());
      total[i] = prompt_len[i] + g.lengths[begin + i].item<int64_t>();
      width = std::max(width, total[i]);
    }
    width = (width + divisible_by - 1) / divisible_by * divisible_by;
    at::Tensor ids = at::zeros({micro, width}, at::kLong), attention = at::zeros({micro, width}, at::kLong);
    at::Tensor token_mask = at::zeros({micro, width}, at::kFloat), generation = at::zeros({micro, width}, at::kFloat);
    at::Tensor advantages = at::zeros({micro, width}, at::kFloat), sample_mask = at::zeros({micro}, at::kFloat);
    at::Tensor lengths = at::empty({micro}, at::kLong);
    int64_t tokens = 0;
    for (int64_t i = 0; i < micro; ++i) {
      const int64_t row = begin + i, p = prompt_len[i], n = total[i] - p;
      ids[i].narrow(0, 0, p).copy_(at::tensor(rollouts.prompts[static_cast<size_t>(row)], at::kLong));
      ids[i].narrow(0, p, n).copy_(g.tokens[row].narrow(0, 0, n));
      attention[i].narrow(0, 0, total[i]).fill_(1);
      lengths[i] = total[i];
      tokens += total[i];
      // Aligned with the labels: position t holds token t + 1's values, so
      // the response's tokens p .. p + n - 1 sit at p - 1 .. p + n - 2.
      token_mask[i].narrow(0, p - 1, n).fill_(1.0f);
      generation[i].narrow(0, p - 1, n).copy_(g.logprobs[row].narrow(0, 0, n));
      advantages[i].fill_(static_cast<float>(rollouts.advantages[static_cast<size_t>(row)]));
      sample_mask[i] = rollouts.valid[static_cast<size_t>(row)] ? 1.0f : 0.0f;
    }
    train::MicroBatch mb;
    mb.input_ids = ids;
    mb.labels = next_token_targets(ids, lengths).masked_fill(token_mask.eq(0), loss::kIgnoreIndex);
    mb.num_tokens = tokens;
    mb.attention_mask = attention;
    mb.token_values[kTokenMask] = token_mask;
    mb.token_values[kGenerationLogprobs] = generation;
    mb.token_values[kAdvantages] = advantages;
    mb.row_values[kSampleMask] = sample_mask;
    out.push_back(std::move(mb));
  }
  return out;
}

void add_policy_logprobs(std::vector<train::MicroBatch>& batches, train::ShardedModel& model,
                         const dist::DeviceMesh& mesh, ReferencePolicy* reference, double temperature,
                         int64_t logprob_batch_size, bool fused_head) {
  // get_logprobs of a batch's rows, logprob_batch_size rows per forward.
  auto logprobs_of = [&](const train::MicroBatch& mb) {
    const at::Tensor lengths = mb.attention_mask.sum(1);
    const int64_t rows = mb.input_ids.size(0), step = logprob_batch_size > 0 ? logprob_batch_size : rows;
    std::vector<at::Tensor> parts;
    for (int64_t r = 0; r < rows; r += step) {
      const int64_t n = std::min(step, rows - r);
      parts.push_back(
          get_logprobs(model, mesh, mb.input_ids.narrow(0, r, n), lengths.narrow(0, r, n), temperature, fused_head));
    }
    return logprobs_aligned_with_labels(at::cat(parts, 0));
  };
  for (auto& mb : batches) mb.token_values[kPrevLogprobs] = logprobs_of(mb);
  if (reference != nullptr) {
    reference->with_reference_weights(model, mesh, [&] {
      for (auto& mb : batches) mb.token_values[kReferenceLogprobs] = logprobs_of(mb);
    });
  } else {
    for (auto& mb : batches) mb.token_values[kReferenceLogprobs] = at::zeros_like(mb.token_values.at(kPrevLogprobs));
  }
  for (auto& mb : batches) add_whole_row_values(mb);
}

GrpoRecipe::GrpoRecipe(train::TrainOptions options, GrpoOptions grpo, ClippedPGOptions loss,
                       config::ParallelismConfig parallelism, std::unique_ptr<Verifier> verifier)
    : options_(std::move(options)),
      grpo_(std::move(grpo)),
      loss_(loss),
      parallelism_(std::move(parallelism)),
      verifier_(std::move(verifier)),
      objective_(loss, grpo_.sampling.temperature) {
  TESSEL_CHECK(verifier_ != nullptr, "GRPO needs a verifier");
}

void GrpoRecipe::setup(train::ShardedModel& model, const dist::DeviceMesh& mesh) {
  objective_.set_fused_head(options_.fused_lm_head_loss, model);
  const int64_t vocab = model.model->config().vocab_size;
  tokenizer_ = data::load_tokenizer(options_.tokenizer, vocab);
  for (int64_t id : grpo_.stop_token_ids) {
    if (id < 0 || id >= vocab) {
      throw UsageError(fmt::format("policy.generation.stop_token_ids: {} is outside the vocabulary [0, {})", id,
                                   vocab));
    }
  }
  train_prompts_.emplace(
      data::load_prompt_dataset(options_.train_data.name, *tokenizer_, prompt_options(options_, options_.train_data)));
  data::SamplerOptions s;
  s.global_batch_size = s.micro_batch_size = grpo_.num_prompts_per_step;  // every rank: all of a step's prompts
  s.seed = options_.seed;
  s.shuffle = options_.shuffle;
  if (train_prompts_->size() < grpo_.num_prompts_per_step) {
    throw UsageError(fmt::format("data.train '{}' holds {} prompts, fewer than grpo.num_prompts_per_step={}",
                                 options_.train_data.name, train_prompts_->size(), grpo_.num_prompts_per_step));
  }
  sampler_.emplace(train_prompts_->size(), s);
  const int64_t dp = mesh.layout().dp_size(), rollouts = options_.global_batch_size;
  if (rollouts % (dp * options_.micro_batch_size) != 0) {
    throw UsageError(fmt::format("the {} rollouts of a step do not split into micro batches of "
                                 "policy.train_micro_batch_size={} on each of the {} data-parallel ranks; make "
                                 "num_prompts_per_step x num_generations_per_prompt a multiple of {}",
                                 rollouts, options_.micro_batch_size, dp, dp * options_.micro_batch_size));
  }
  if (options_.val_data && (options_.val_period > 0 || options_.val_at_start || options_.val_at_end)) {
    validation_.emplace(
        data::load_prompt_dataset(options_.val_data->name, *tokenizer_, prompt_options(options_, *options_.val_data)));
  }
  // The initial weights (before any resume replaces them with the
  // checkpoint's), needed only for the KL term.
  if (loss_.reference_policy_kl_penalty > 0) reference_ = std::make_unique<ReferencePolicy>(model);
}

std::vector<std::string> GrpoRecipe::describe(const dist::DeviceMesh& mesh) const {
  std::vector<std::string> lines = {
      fmt::format("tokenizer {}", tokenizer_->describe()),
      fmt::format("prompts '{}': {}, {} steps per epoch; {} prompts x {} generations = {} rollouts per step = micro "
                  "batch {} x accumulation {} x dp {}",
                  options_.train_data.name, train_prompts_->size(), sampler_->steps_per_epoch(),
                  grpo_.num_prompts_per_step, grpo_.num_generations_per_prompt, options_.global_batch_size,
                  options_.micro_batch_size,
                  options_.global_batch_size / (options_.micro_batch_size * mesh.layout().dp_size()),
                  mesh.layout().dp_size()),
      fmt::format("generation: temperature {}, top_p {}, top_k {}, at most {} new tokens, decoding layout {}; "
                  "verifier {}; advantages: leave-one-out {}, normalized {}; overlong filtering {}",
                  grpo_.sampling.temperature, grpo_.sampling.top_p, grpo_.sampling.top_k, grpo_.max_new_tokens,
                  to_string(grpo_.decoding_layout), verifier_->name(), grpo_.advantages.leave_one_out_baseline,
                  grpo_.advantages.normalize_rewards, grpo_.overlong_filtering),
      reference_ ? fmt::format("reference policy: the initial weights, {:.1f} MiB of shards per rank (KL beta {})",
                               static_cast<double>(reference_->bytes()) / (1024.0 * 1024.0),
                               loss_.reference_policy_kl_penalty)
                 : std::string("reference policy: none (loss_fn.reference_policy_kl_penalty = 0)")};
  if (validation_) {
    lines.push_back(fmt::format("validation: '{}', the first {} prompts, greedy", options_.val_data->name,
                                std::min(grpo_.max_val_samples, validation_->size())));
  }
  return lines;
}

MeshGenerationOptions GrpoRecipe::generation_options(uint64_t seed, int64_t batch_size, bool greedy) const {
  MeshGenerationOptions o;
  o.layout = grpo_.decoding_layout;
  o.batch_size = batch_size;
  o.generation.sampling = grpo_.sampling;
  o.generation.sampling.seed = seed;
  o.generation.sampling.greedy = greedy;
  o.generation.max_new_tokens = grpo_.max_new_tokens;
  o.generation.max_total_length = options_.max_seq_len;
  o.generation.stop_token_ids = grpo_.stop_token_ids;
  o.generation.stop_token_ids.push_back(tokenizer_->eos_id());
  o.generation.pad_id = tokenizer_->pad_id();
  return o;
}

std::string GrpoRecipe::response_text(const Generation& g, int64_t row) const {
  int64_t n = g.lengths[row].item<int64_t>();
  if (g.stopped[row].item<bool>()) --n;  // the stop token is not part of the answer
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) ids[static_cast<size_t>(t)] = g.tokens[row][t].item<int64_t>();
  return data::generated_text(*tokenizer_, ids, /*skip_special_tokens=*/true);
}

Rollouts GrpoRecipe::roll_out(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                              const std::vector<int64_t>& prompt_indices, int64_t step, GenerationStats& stats) {
  Rollouts r;
  for (size_t i = 0; i < prompt_indices.size(); ++i) {
    for (int64_t k = 0; k < grpo_.num_generations_per_prompt; ++k) {
      r.prompts.push_back((*train_prompts_)[prompt_indices[i]].tokens);
      r.prompt_index.push_back(static_cast<int64_t>(i));
    }
  }
  r.responses = generate_on_mesh(model, mesh, parallelism_, train::compute_dtype(options_), r.prompts,
                                 generation_options(step_seed(options_.seed, step), grpo_.generation_batch_size,
                                                    /*greedy=*/false),
                                 &stats);
  for (size_t row = 0; row < r.prompts.size(); ++row) {
    const auto& answer = (*train_prompts_)[prompt_indices[static_cast<size_t>(r.prompt_index[row])]].answer;
    r.rewards.push_back(verifier_->reward(response_text(r.responses, static_cast<int64_t>(row)), answer));
    r.valid.push_back(!grpo_.overlong_filtering || r.responses.stopped[static_cast<int64_t>(row)].item<bool>());
  }
  r.advantages = grpo_advantages(r.rewards, r.prompt_index, r.valid, grpo_.advantages);
  return r;
}

std::vector<train::MicroBatch> GrpoRecipe::next_step(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                                     int64_t step) {
  const auto t0 = Clock::now();
  const std::vector<int64_t> prompt_indices = sampler_->next_step().front();
  GenerationStats generation;
  rollouts_ = roll_out(model, mesh, prompt_indices, step, generation);
  const double rollout_s = seconds_since(t0);

  const auto t1 = Clock::now();
  const int64_t dp = mesh.layout().dp_size(), per_rank = options_.global_batch_size / dp;
  std::vector<train::MicroBatch> batches = rollout_micro_batches(
      rollouts_, mesh.coordinate("dp") * per_rank, per_rank, options_.micro_batch_size, options_.seq_len_divisible_by);
  add_policy_logprobs(batches, model, mesh, reference_.get(), grpo_.sampling.temperature, grpo_.logprob_batch_size,
                      options_.fused_lm_head_loss);
  const double logprobs_s = seconds_since(t1);

  std::vector<double> abs_advantages, lengths;
  int64_t truncated = 0;
  for (size_t i = 0; i < rollouts_.advantages.size(); ++i) {
    abs_advantages.push_back(std::abs(rollouts_.advantages[i]));
    lengths.push_back(static_cast<double>(rollouts_.responses.lengths[static_cast<int64_t>(i)].item<int64_t>()));
    truncated += rollouts_.responses.stopped[static_cast<int64_t>(i)].item<bool>() ? 0 : 1;
  }
  step_metrics_ = {
      {"reward_mean", mean(rollouts_.rewards)},
      {"reward_std", population_std(rollouts_.rewards)},
      {"advantage_mean", mean(rollouts_.advantages)},
      {"advantage_abs_mean", mean(abs_advantages)},
      {"response_length_mean", mean(lengths)},
      {"truncated_fraction", static_cast<double>(truncated) / static_cast<double>(lengths.size())},
      {"generation_tokens", static_cast<double>(generation.generated_tokens)},
      {"generation_tokens_per_s",
       generation.decode_s > 0 ? static_cast<double>(generation.generated_tokens) / generation.decode_s : 0.0},
      {"refit_s", generation.refit_s},
      {"generation_s", generation.decode_s},
      {"rollout_s", rollout_s},
      {"logprobs_s", logprobs_s},
      {"decoding_weight_mib", static_cast<double>(generation.weight_bytes) / (1024.0 * 1024.0)},
      {"kv_cache_mib", static_cast<double>(generation.kv_cache_bytes) / (1024.0 * 1024.0)}};
  return batches;
}

train::EvalResult GrpoRecipe::validate(train::ShardedModel& model, const dist::DeviceMesh& mesh) {
  const int64_t n = std::min(grpo_.max_val_samples, validation_->size());
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < n; ++i) prompts.push_back((*validation_)[i].tokens);
  const Generation g = generate_on_mesh(model, mesh, parallelism_, train::compute_dtype(options_), prompts,
                                        generation_options(options_.seed, grpo_.val_batch_size, /*greedy=*/true));
  double reward = 0.0, length = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    reward += verifier_->reward(response_text(g, i), (*validation_)[i].answer);
    length += static_cast<double>(g.lengths[i].item<int64_t>());
  }
  train::EvalResult r;
  r.loss = std::nan("");  // GRPO's validation scores generations: there is no loss
  r.valid_tokens = g.lengths.sum().item<int64_t>();
  r.metrics = {{"loss", r.loss}, {"accuracy", reward / static_cast<double>(n)},
               {"avg_length", length / static_cast<double>(n)}};
  return r;
}

train::TrainResult train_grpo(const config::Config& given, const dist::DeviceMesh& mesh, const train::RunOptions& run) {
  config::Config config = given;
  {
    const GrpoOptions checked = grpo_options_from(config, train::train_options_from(config, grpo_section()));
    if (!checked.sft_warmup.empty()) config = run_sft_warmup(config, checked.sft_warmup, mesh, run);
  }
  const train::TrainOptions options = train::train_options_from(config, grpo_section());
  GrpoOptions grpo = grpo_options_from(config, options);
  auto verifier = make_verifier(grpo.verifier, "env.verifier");
  GrpoRecipe recipe(options, std::move(grpo), clipped_pg_options_from(config), config::parallelism_from(config),
                    std::move(verifier));
  return train::run_training(config, options, mesh, recipe, run);
}

}  // namespace tessel::policy
