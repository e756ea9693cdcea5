// Generation on every layout against one process (SPEC 8, SPEC 11), 4 ranks
// in one launch: the same seed gives the same sampled tokens, and log-probs
// within rounding, at FSDP 2, HSDP 2x2, TP 2 (decoding tensor-parallel over
// the tp group, and replicated), CP 2 and TP 2 x FSDP 2; for a
// mixture-of-experts preset at EP 2 and EP 2 x FSDP 2 (the decoding copy
// gathers every expert). Rows are split over the decoding groups, so each
// layout decodes different rows on each rank. The tensor-parallel copy holds
// this rank's pieces: less than the whole model.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "config/parallelism_config.h"
#include "dist/communicator.h"
#include "policy/generation.h"
#include "policy/logprob_goldens.h"
#include "policy/policy_layouts.h"

namespace tessel::policy {
namespace {

struct GenerationRun {
  Generation generation;
  GenerationStats stats;
};

GenerationRun generate_at(const std::string& preset, const testing::Layout& layout, DecodingLayout decoding) {
  auto o = layout.overrides();
  o.push_back("policy.model_name=" + preset);
  const config::Config c = testing::recipe(o);
  const dist::DeviceMesh mesh = layout.mesh();
  const config::ParallelismConfig parallelism = config::parallelism_from(c);
  train::ShardedModel model = train::setup_model(train::train_options_from(c), mesh, parallelism);
  at::manual_seed(21);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t n : {5, 2, 9, 4, 7, 3, 6}) {  // 7 rows: uneven over every row group
    const at::Tensor t = at::randint(3, model.model->config().vocab_size, {n}, at::kLong);
    prompts.emplace_back(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
  }
  MeshGenerationOptions options;
  options.layout = decoding;
  options.batch_size = 2;  // several batches per rank
  options.generation.max_new_tokens = 9;
  options.generation.sampling.temperature = 0.9;
  options.generation.sampling.top_p = 0.95;
  options.generation.sampling.seed = 2024;
  options.generation.stop_token_ids = {5};
  GenerationRun run;
  run.generation = generate_on_mesh(model, mesh, parallelism, at::kFloat, prompts, options, &run.stats);
  return run;
}

void expect_same(const GenerationRun& got, const GenerationRun& ref, const std::string& what) {
  EXPECT_TRUE(at::equal(got.generation.lengths, ref.generation.lengths)) << what;
  EXPECT_TRUE(at::equal(got.generation.stopped, ref.generation.stopped)) << what;
  ASSERT_EQ(got.generation.tokens.sizes(), ref.generation.tokens.sizes()) << what;
  EXPECT_TRUE(at::equal(got.generation.tokens, ref.generation.tokens))
      << what << "\n" << got.generation.tokens << "\nvs\n" << ref.generation.tokens;
  EXPECT_TRUE(at::allclose(got.generation.logprobs, ref.generation.logprobs, 1e-5, 2e-5))
      << what << " max diff " << (got.generation.logprobs - ref.generation.logprobs).abs().max().item<float>();
}

class GenerationLayouts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  }
};

TEST_F(GenerationLayouts, SameSeedSameTokensOnEveryLayout) {
  const GenerationRun ref = generate_at("tiny-llama", testing::one_process(), DecodingLayout::Auto);
  EXPECT_GT(ref.stats.generated_tokens, 7) << "rows generate more than one token";
  for (const auto& layout : testing::dense_layouts()) {
    const GenerationRun run = generate_at("tiny-llama", layout, DecodingLayout::Auto);
    expect_same(run, ref, layout.name);
    if (layout.tp > 1) {
      EXPECT_EQ(run.stats.layout, DecodingLayout::TensorParallel) << layout.name;
      EXPECT_LT(run.stats.weight_bytes, ref.stats.weight_bytes) << layout.name << ": this rank's pieces only";
      const GenerationRun replicated = generate_at("tiny-llama", layout, DecodingLayout::Replicated);
      EXPECT_EQ(replicated.stats.weight_bytes, ref.stats.weight_bytes) << layout.name << ": a whole copy";
      expect_same(replicated, ref, layout.name + ", decoding replicated");
    } else {
      EXPECT_EQ(run.stats.layout, DecodingLayout::Replicated) << layout.name;
      EXPECT_EQ(run.stats.weight_bytes, ref.stats.weight_bytes) << layout.name;
    }
  }
}

TEST_F(GenerationLayouts, SameSeedSameTokensWithExperts) {
  const GenerationRun ref = generate_at("tiny-qwen3-moe", testing::one_process(), DecodingLayout::Auto);
  for (const auto& layout : testing::expert_layouts()) {
    const GenerationRun run = generate_at("tiny-qwen3-moe", layout, DecodingLayout::Auto);
    expect_same(run, ref, "moe at " + layout.name);
    EXPECT_EQ(run.stats.weight_bytes, ref.stats.weight_bytes) << layout.name << ": every expert in the copy";
  }
}

}  // namespace
}  // namespace tessel::policy
