// Generation on one process (policy/generation.h):
//   - the cached attention core against nn::causal_attention (the training
//     path's reference) for grouped-query heads, a sliding window and
//     softcapping;
//   - for every family preset (sliding window and MoE included), greedy
//     decoding with the KV cache equals the argmax of a full forward of the
//     sharded model over the prompt and the tokens so far, at every step, for
//     a batch padded on the right and on the left;
//   - Hugging Face transformers' greedy generation on every golden model
//     (tests/golden/<case>/generation.json, generate_generation.py) gives the
//     same tokens, and their log-probs within 1e-4;
//   - sampled tokens' returned log-probs equal get_logprobs of the sampled
//     sequences; stop tokens and length limits end rows;
//   - the refit's memory (decoding weights and KV cache), counted by the
//     allocator wrapper from outside, is freed when generation returns.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "core/counting_allocator.h"
#include "core/error.h"
#include "nn/attention.h"
#include "policy/decoding_model.h"
#include "policy/generation.h"
#include "policy/kv_cache.h"
#include "policy/logprob_goldens.h"
#include "policy/logprobs.h"

namespace tessel::policy {
namespace {

std::vector<std::vector<int64_t>> random_prompts(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<std::vector<int64_t>> out;
  for (int64_t n : lengths) {
    const at::Tensor t = at::randint(3, vocab, {n}, at::kLong);
    out.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
  }
  return out;
}

train::ShardedModel preset_model(const std::string& preset, const dist::DeviceMesh& mesh) {
  const config::Config c = testing::recipe({"policy.model_name=" + preset});
  return train::setup_model(train::train_options_from(c), mesh, config::parallelism_from(c));
}

TEST(CachedAttention, MatchesCausalAttentionWithGroupsWindowAndSoftcap) {
  at::manual_seed(3);
  const int64_t B = 2, Hq = 6, Hkv = 2, T = 9, D = 8;
  const at::Tensor q = at::randn({B, Hq, T, D}, at::kDouble), k = at::randn({B, Hkv, T, D}, at::kDouble),
                   v = at::randn({B, Hkv, T, D}, at::kDouble);
  const at::Tensor i = at::arange(T).view({T, 1}), j = at::arange(T).view({1, T});
  for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{3}}) {
    for (std::optional<double> cap : {std::optional<double>{}, std::optional<double>{1.5}}) {
      at::Tensor visible = j.le(i);
      if (window) visible = visible & (i - j).lt(*window);
      const at::Tensor got = cached_attention(q, k, v, visible.unsqueeze(0).expand({B, T, T}), 0.4, cap);
      const at::Tensor want = nn::causal_attention(q, k, v, 0.4, window, cap);
      EXPECT_TRUE(at::allclose(got, want, 1e-12, 1e-12)) << (got - want).abs().max().item<double>();
    }
  }
}

// Greedy tokens against the full forward of `model` over prompt + tokens so
// far: the token is the argmax at its step and its log-prob the full
// forward's. Returns the smallest top-2 gap seen.
double expect_argmax_of_full_forward(train::ShardedModel& model, const std::vector<int64_t>& prompt,
                                     const at::Tensor& tokens, const at::Tensor& logprobs, int64_t n,
                                     const std::string& what) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> seq = prompt;
  for (int64_t t = 0; t < n; ++t) seq.push_back(tokens[t].item<int64_t>());
  const at::Tensor ids = at::tensor(seq, at::kLong).unsqueeze(0);
  const at::Tensor logits = model.model->forward_logits(ids)[0].to(at::kDouble);
  const at::Tensor logp = at::log_softmax(logits, -1);
  double smallest_gap = 1e9;
  for (int64_t t = 0; t < n; ++t) {
    const at::Tensor row = logits[static_cast<int64_t>(prompt.size()) - 1 + t];
    const int64_t token = tokens[t].item<int64_t>();
    const auto top2 = at::topk(row, 2);
    smallest_gap = std::min(smallest_gap, (std::get<0>(top2)[0] - std::get<0>(top2)[1]).item<double>());
    EXPECT_EQ(row.argmax().item<int64_t>(), token) << what << " step " << t;
    EXPECT_NEAR(logprobs[t].item<double>(), logp[static_cast<int64_t>(prompt.size()) - 1 + t][token].item<double>(),
                2e-5)
        << what << " step " << t;
  }
  return smallest_gap;
}

TEST(Generation, GreedyWithTheCacheIsTheFullForwardsArgmaxForEveryFamily) {
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  for (const char* preset : {"tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3",
                             "tiny-qwen3-moe", "tiny-mixtral"}) {
    SCOPED_TRACE(preset);
    train::ShardedModel model = preset_model(preset, mesh);
    // 12 + 14 positions pass the presets' 16-token sliding windows.
    const auto prompts = random_prompts({5, 12, 9}, model.model->config().vocab_size, 17);
    GenerationOptions o;
    o.sampling.greedy = true;
    o.max_new_tokens = 14;
    DecodingModel decoder(model, mesh, config::ParallelismConfig{}, DecodingLayout::Auto, at::kFloat);
    const Generation right = generate(decoder, pad_prompts(prompts, Padding::Right, 0), o);
    const Generation left = generate(decoder, pad_prompts(prompts, Padding::Left, 0), o);
    EXPECT_TRUE(at::equal(right.tokens, left.tokens)) << "left and right padding";
    EXPECT_TRUE(at::allclose(right.logprobs, left.logprobs, 1e-5, 1e-5));
    for (size_t r = 0; r < prompts.size(); ++r) {
      const int64_t row = static_cast<int64_t>(r);
      ASSERT_EQ(right.lengths[row].item<int64_t>(), 14);
      EXPECT_FALSE(right.stopped[row].item<bool>());
      const double gap = expect_argmax_of_full_forward(model, prompts[r], right.tokens[row], right.logprobs[row], 14,
                                                       std::string(preset) + " row " + std::to_string(r));
      EXPECT_GT(gap, 1e-6) << "a near tie makes the comparison meaningless";
    }
  }
}

TEST(Generation, MatchesHuggingFaceGreedyGenerationOnEveryGoldenModel) {
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  for (const auto& name : testing::golden_cases()) {
    SCOPED_TRACE(name);
    std::ifstream in(testing::golden_dir(name) / "generation.json");
    ASSERT_TRUE(in) << "run tests/golden/generate_generation.py";
    const nlohmann::json j = nlohmann::json::parse(in);
    const auto prompts = j.at("prompts").get<std::vector<std::vector<int64_t>>>();
    const auto tokens = j.at("tokens").get<std::vector<std::vector<int64_t>>>();
    const auto logprobs = j.at("logprobs").get<std::vector<std::vector<double>>>();
    train::ShardedModel model = testing::golden_model(name, mesh);
    MeshGenerationOptions o;
    o.generation.sampling.greedy = true;
    o.generation.max_new_tokens = j.at("max_new_tokens").get<int64_t>();
    const Generation g = generate_on_mesh(model, mesh, config::ParallelismConfig{}, at::kFloat, prompts, o);
    for (size_t r = 0; r < prompts.size(); ++r) {
      const int64_t row = static_cast<int64_t>(r);
      ASSERT_EQ(g.lengths[row].item<int64_t>(), static_cast<int64_t>(tokens[r].size()));
      for (size_t t = 0; t < tokens[r].size(); ++t) {
        EXPECT_EQ(g.tokens[row][static_cast<int64_t>(t)].item<int64_t>(), tokens[r][t]) << "row " << r << " step " << t;
        EXPECT_NEAR(g.logprobs[row][static_cast<int64_t>(t)].item<double>(), logprobs[r][t], 1e-4)
            << "row " << r << " step " << t;
      }
    }
  }
}

TEST(Generation, SampledLogprobsAreGetLogprobsOfTheSampledSequences) {
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  for (const char* preset : {"tiny-llama", "tiny-gemma3"}) {
    SCOPED_TRACE(preset);
    train::ShardedModel model = preset_model(preset, mesh);
    const auto prompts = random_prompts({4, 9, 6, 2}, model.model->config().vocab_size, 5);
    MeshGenerationOptions o;
    o.generation.sampling.temperature = 0.7;
    o.generation.sampling.top_k = 40;
    o.generation.sampling.top_p = 0.95;
    o.generation.sampling.seed = 11;
    o.generation.max_new_tokens = 10;
    const Generation g = generate_on_mesh(model, mesh, config::ParallelismConfig{}, at::kFloat, prompts, o);
    // The sequences prompt + response, right-padded, scored by the policy.
    const int64_t rows = static_cast<int64_t>(prompts.size()), width = 9 + 10;
    at::Tensor ids = at::zeros({rows, width}, at::kLong), lengths = at::empty({rows}, at::kLong);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = static_cast<int64_t>(prompts[static_cast<size_t>(r)].size()), n = g.lengths[r].item<int64_t>();
      ids[r].narrow(0, 0, p).copy_(at::tensor(prompts[static_cast<size_t>(r)], at::kLong));
      ids[r].narrow(0, p, n).copy_(g.tokens[r].narrow(0, 0, n));
      lengths[r] = p + n;
    }
    const at::Tensor scored = get_logprobs(model, mesh, ids, lengths, 0.7);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = static_cast<int64_t>(prompts[static_cast<size_t>(r)].size()), n = g.lengths[r].item<int64_t>();
      EXPECT_TRUE(at::allclose(scored[r].narrow(0, p, n), g.logprobs[r].narrow(0, 0, n), 1e-5, 2e-5))
          << "row " << r << ": " << scored[r].narrow(0, p, n) << " vs " << g.logprobs[r].narrow(0, 0, n);
    }
    // Sampling at 0.7 is not greedy: some token is not the argmax.
    o.generation.sampling = SamplingOptions{};
    o.generation.sampling.greedy = true;
    const Generation greedy = generate_on_mesh(model, mesh, config::ParallelismConfig{}, at::kFloat, prompts, o);
    EXPECT_FALSE(at::equal(greedy.tokens, g.tokens));
  }
}

TEST(Generation, StopTokensAndLengthLimitsEndRows) {
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  train::ShardedModel model = preset_model("tiny-llama", mesh);
  const auto prompts = random_prompts({3, 7}, model.model->config().vocab_size, 8);
  MeshGenerationOptions o;
  o.generation.sampling.greedy = true;
  o.generation.max_new_tokens = 8;
  o.generation.pad_id = -7;
  const Generation free = generate_on_mesh(model, mesh, config::ParallelismConfig{}, at::kFloat, prompts, o);
  // Row 0's third token stops it (and whatever row 1 generates of it).
  const int64_t stop = free.tokens[0][2].item<int64_t>();
  o.generation.stop_token_ids = {stop};
  o.generation.max_total_length = 12;  // row 1: 7 + 5 tokens at most
  const Generation g = generate_on_mesh(model, mesh, config::ParallelismConfig{}, at::kFloat, prompts, o);
  // Each row: the free run's tokens up to the first stop token, within its limit.
  for (int64_t row = 0; row < 2; ++row) {
    const int64_t limit = row == 0 ? 8 : 5;
    int64_t expected = limit;
    bool stopped = false;
    for (int64_t t = 0; t < limit; ++t) {
      if (free.tokens[row][t].item<int64_t>() == stop) {
        expected = t + 1;
        stopped = true;
        break;
      }
    }
    EXPECT_EQ(g.lengths[row].item<int64_t>(), expected) << "row " << row;
    EXPECT_EQ(g.stopped[row].item<bool>(), stopped) << "row " << row;
    EXPECT_TRUE(at::equal(g.tokens[row].narrow(0, 0, expected), free.tokens[row].narrow(0, 0, expected)));
    EXPECT_TRUE(g.tokens[row].narrow(0, expected, g.tokens.size(1) - expected).eq(-7).all().item<bool>())
        << "padding after the end";
  }
  EXPECT_LE(g.lengths[0].item<int64_t>(), 3);
  EXPECT_TRUE(g.stopped[0].item<bool>());
  // A prompt that leaves no room is refused with the limit named.
  o.generation.max_total_length = 7;
  EXPECT_THROW(generate_on_mesh(model, mesh, config::ParallelismConfig{}, at::kFloat, prompts, o), UsageError);
}

TEST(Generation, TheRefitsMemoryIsFreedWhenGenerationReturns) {
  CountingCpuAllocator::install();
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  train::ShardedModel model = preset_model("tiny-qwen3-moe", mesh);
  const auto prompts = random_prompts({6, 4, 9}, model.model->config().vocab_size, 2);
  MeshGenerationOptions o;
  o.generation.sampling.seed = 1;
  o.generation.max_new_tokens = 6;
  const int64_t before = CountingCpuAllocator::live_bytes();
  CountingCpuAllocator::reset_peak();
  GenerationStats stats;
  Generation g = generate_on_mesh(model, mesh, config::ParallelismConfig{}, at::kFloat, prompts, o, &stats);
  const int64_t peak = CountingCpuAllocator::peak_bytes() - before;
  const int64_t result_bytes = (g.tokens.numel() + g.logprobs.numel() + g.lengths.numel()) * 8 + g.stopped.numel();
  // A whole fp32 copy of the model (the world-1 shards hold every parameter once).
  EXPECT_EQ(stats.weight_bytes, model.local_param_bytes());
  EXPECT_GT(stats.kv_cache_bytes, 0);
  EXPECT_GE(peak, stats.weight_bytes + stats.kv_cache_bytes) << "the copy and the cache lived at once";
  EXPECT_LE(CountingCpuAllocator::live_bytes() - before, result_bytes) << "only the results remain";
  g = Generation{};
  EXPECT_LE(CountingCpuAllocator::live_bytes() - before, 0);
}

}  // namespace
}  // namespace tessel::policy
