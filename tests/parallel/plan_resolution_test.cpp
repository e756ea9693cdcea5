// Pattern matching, style strings, HF plan construction and plan resolution
// (custom > optimized > HF) in one process: each fallback case of SPEC 3.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/loader.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "parallel/hf_plan.h"
#include "parallel/hf_styles.h"
#include "parallel/optimized_plans.h"
#include "parallel/parallelize.h"
#include "parallel/pattern.h"
#include "parallel/resolve.h"
#include "support/source_tree.h"

namespace tessel::parallel {
namespace {

namespace fs = std::filesystem;

std::string source_dir() { return test_support::source_tree().string(); }
std::string binary_dir() {
  const char* s = std::getenv("TESSEL_BINARY_DIR");
  return s ? s : "";
}

bool has_entry(const Plan& p, const std::string& pattern, const std::string& style) {
  for (const auto& e : p.entries) {
    if (e.pattern == pattern && e.style_string == style) return true;
  }
  return false;
}

TEST(Pattern, MatchesSegmentBySegment) {
  EXPECT_TRUE(match_pattern("model.layers.*.self_attn.q_proj", "model.layers.12.self_attn.q_proj"));
  EXPECT_FALSE(match_pattern("model.layers.*.self_attn.q_proj", "model.layers.1.2.self_attn.q_proj"));
  EXPECT_FALSE(match_pattern("model.layers.*.self_attn", "model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(match_pattern("model.layers.*.mlp.*_proj", "model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(match_pattern("model.layers.*.mlp.*_proj", "model.layers.0.mlp.gate"));
  EXPECT_TRUE(match_pattern("lm_head", "lm_head"));
  EXPECT_FALSE(match_pattern("lm_head", "model.lm_head"));
  EXPECT_TRUE(match_pattern("*", "model"));
}

TEST(Pattern, NearestPaths) {
  auto near = nearest_paths("model.layers.*.attn.q_proj",
                            {"model", "model.layers.0.self_attn.q_proj", "model.layers.0.mlp.up_proj", "lm_head"}, 2);
  ASSERT_FALSE(near.empty());
  EXPECT_EQ(near[0], "model.layers.0.self_attn.q_proj");
}

TEST(Styles, EveryHfStringTranslates) {
  for (const auto& s : supported_style_strings()) EXPECT_NE(style_from_string(s), nullptr) << s;
  try {
    style_from_string("colwize");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("colwise"), std::string::npos) << msg;
    EXPECT_NE(msg.find("local_packed_rowwise"), std::string::npos) << msg;
  }
}

models::ModelConfig config_with(const std::string& arch, const std::string& extra_json = "") {
  std::string json = R"({"architectures": [")" + arch + R"("], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256)" + extra_json + "}";
  return models::parse_model_config(json, "test config.json");
}

TEST(HfPlan, KnownDefaultPrefixedAndMerged) {
  HfPlan hf = hf_plan(config_with("Qwen3ForCausalLM"));
  EXPECT_TRUE(has_entry(hf.plan, "model.layers.*.self_attn.q_proj", "colwise"));
  EXPECT_TRUE(has_entry(hf.plan, "model.layers.*.self_attn.q_norm", "replicated_with_grad_allreduce"));
  EXPECT_TRUE(has_entry(hf.plan, "model.layers.*.mlp.down_proj", "rowwise"));
  EXPECT_TRUE(has_entry(hf.plan, "model.embed_tokens", "rowwise_rep"));
  EXPECT_TRUE(has_entry(hf.plan, "lm_head", "colwise_rep"));
}

TEST(HfPlan, FromConfigJsonKeepsItsEmbedding) {
  HfPlan hf = hf_plan(config_with("SomethingForCausalLM",
                                  R"(, "base_model_tp_plan": {"embed_tokens": "embedding_rowwise",
                                      "layers.*.mlp.up_proj": "colwise"})"));
  EXPECT_TRUE(has_entry(hf.plan, "model.embed_tokens", "embedding_rowwise"));
  EXPECT_FALSE(has_entry(hf.plan, "model.embed_tokens", "rowwise_rep"));
  EXPECT_TRUE(has_entry(hf.plan, "model.layers.*.mlp.up_proj", "colwise"));
  EXPECT_NE(hf.origin.find("base_model_tp_plan"), std::string::npos);
}

config::ParallelismConfig tp(int64_t size, bool sp = false) {
  config::ParallelismConfig p;
  p.tensor_parallel_size = size;
  p.sequence_parallel = sp;
  return p;
}

// A mesh of just the tp group the choices ask for: the plan takes its tp size
// from the mesh, never from the config.
ResolvedPlan resolve_for(const config::ParallelismConfig& par, const models::ModelConfig& model,
                         const ResolveOptions& options = {}) {
  dist::MeshSizes sizes;
  sizes.world_size = static_cast<int>(par.tensor_parallel_size);
  sizes.tp = static_cast<int>(par.tensor_parallel_size);
  return resolve_parallel_plan(dist::MeshLayout(sizes), par, model, options);
}

TEST(Resolve, TpOneIgnoresCustomPlan) {
  auto par = tp(1);
  par.custom_parallel_plan = config::CustomPlanSpec{"does.not.exist", std::nullopt};
  ResolvedPlan r = resolve_for(par, config_with("LlamaForCausalLM"));
  EXPECT_EQ(r.source, PlanSource::None);
  EXPECT_TRUE(r.plan.empty());
  EXPECT_NE(r.log_line.find("ignored"), std::string::npos) << r.log_line;
}

TEST(Resolve, CustomInlineWins) {
  auto par = tp(2);
  config::Config inline_plan;
  inline_plan.set("lm_head", config::Config("colwise_rep"));
  par.custom_parallel_plan = config::CustomPlanSpec{"", inline_plan};
  ResolvedPlan r = resolve_for(par, config_with("LlamaForCausalLM"));
  EXPECT_EQ(r.source, PlanSource::Custom);
  EXPECT_TRUE(r.parallelize_options.strict);
  EXPECT_TRUE(has_entry(r.plan, "lm_head", "colwise_rep"));
  EXPECT_NE(r.log_line.find("precedence"), std::string::npos) << r.log_line;
}

TEST(Resolve, CustomDottedPathFindsTheExampleVerbatim) {
  auto par = tp(2);
  par.config_path = source_dir() + "/some_recipe.yaml";  // relative to the config's folder
  par.custom_parallel_plan =
      config::CustomPlanSpec{"examples.custom_parallel.custom_parallel.custom_parallel_plan", std::nullopt};
  ResolvedPlan r = resolve_for(par, config_with("LlamaForCausalLM"));
  EXPECT_EQ(r.source, PlanSource::Custom);
  // The reference's .py module wins over the YAML file of the same name.
  ASSERT_FALSE(r.plan.empty());
  EXPECT_EQ(r.plan.entries[1].pattern, "model.layers.*.self_attn.q_proj");
  ASSERT_NE(r.plan.entries[1].style, nullptr);
  EXPECT_EQ(r.plan.entries[1].style->describe(), "ColwiseParallel(input=Replicate, output=Shard(-1))");
  EXPECT_NE(r.log_line.find("custom_parallel.py"), std::string::npos) << r.log_line;
  EXPECT_NE(r.log_line.find("custom_parallel.yaml also defines it and is not used: .py wins"), std::string::npos)
      << r.log_line;
}

TEST(Resolve, CustomFileColonKeyAndErrors) {
  auto par = tp(2);
  par.config_path = source_dir() + "/x.yaml";
  par.custom_parallel_plan = config::CustomPlanSpec{"examples/custom_parallel/custom_parallel.yaml:custom_parallel_plan",
                                                    std::nullopt};
  EXPECT_EQ(resolve_for(par, config_with("LlamaForCausalLM")).source, PlanSource::Custom);

  par.custom_parallel_plan = config::CustomPlanSpec{"examples/custom_parallel/custom_parallel.yaml:nope", std::nullopt};
  try {
    resolve_for(par, config_with("LlamaForCausalLM"));
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("custom_parallel_plan"), std::string::npos) << e.what();
  }
  par.custom_parallel_plan = config::CustomPlanSpec{"no.such.plan_file.name", std::nullopt};
  try {
    resolve_for(par, config_with("LlamaForCausalLM"));
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("dotted path"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no/such/plan_file.yaml"), std::string::npos) << msg;
    EXPECT_NE(msg.find("no/such/plan_file.py"), std::string::npos) << msg;
  }
}

TEST(Resolve, CustomPlanFromTessePlanPath) {
  const fs::path dir = fs::temp_directory_path() / "tessel_plan_path_test";
  fs::create_directories(dir / "plans");
  std::ofstream(dir / "plans" / "mine.json") << R"({"tp": {"lm_head": "colwise"}})";
  setenv("TESSEL_PLAN_PATH", ("/nonexistent:" + dir.string()).c_str(), 1);
  auto par = tp(2);
  par.custom_parallel_plan = config::CustomPlanSpec{"plans.mine.tp", std::nullopt};
  ResolvedPlan r = resolve_for(par, config_with("LlamaForCausalLM"));
  unsetenv("TESSEL_PLAN_PATH");
  EXPECT_TRUE(has_entry(r.plan, "lm_head", "colwise"));
  fs::remove_all(dir);
}

TEST(Resolve, CustomPluginLibrary) {
  const std::string lib = binary_dir() + "/lib/libplugin_plan.so";
  if (binary_dir().empty() || !fs::exists(lib)) GTEST_SKIP() << "plugin not built at " << lib;
  auto par = tp(2);
  par.custom_parallel_plan = config::CustomPlanSpec{lib + ":llama_tp_plan", std::nullopt};
  ResolvedPlan r = resolve_for(par, config_with("LlamaForCausalLM"));
  EXPECT_EQ(r.source, PlanSource::Custom);
  EXPECT_TRUE(has_entry(r.plan, "model.embed_tokens", "embedding_rowwise"));
  EXPECT_TRUE(has_entry(r.plan, "model.layers.*.mlp.down_proj", "rowwise"));

  par.custom_parallel_plan = config::CustomPlanSpec{lib + ":missing_symbol", std::nullopt};
  EXPECT_THROW(resolve_for(par, config_with("LlamaForCausalLM")), UsageError);
}

TEST(Resolve, OptimizedWhenRegistered) {
  for (bool sp : {false, true}) {
    for (const char* arch : {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                             "Gemma3ForCausalLM"}) {
      ResolvedPlan r = resolve_for(tp(2, sp), config_with(arch));
      EXPECT_EQ(r.source, PlanSource::Optimized) << arch;
      EXPECT_FALSE(r.plan.empty());
      EXPECT_NE(r.log_line.find("optimized"), std::string::npos);
    }
  }
}

TEST(Resolve, OptimizedBuilderFailureFallsBackToHfWithReason) {
  // 2 kv heads cannot be split over 4 ranks: the optimized builder refuses.
  ResolvedPlan r = resolve_for(tp(4), config_with("LlamaForCausalLM"));
  EXPECT_EQ(r.source, PlanSource::HuggingFace);
  EXPECT_NE(r.log_line.find("failed to build"), std::string::npos) << r.log_line;
  EXPECT_NE(r.log_line.find("divisible"), std::string::npos) << r.log_line;

  register_optimized_plan("BrokenForCausalLM", [](const models::ModelConfig&, const OptimizedPlanOptions&) -> Plan {
    throw Error("builder exploded");
  });
  ResolvedPlan b = resolve_for(
      tp(2), config_with("BrokenForCausalLM", R"(, "base_model_tp_plan": {"layers.*.mlp.up_proj": "colwise"})"));
  unregister_optimized_plan("BrokenForCausalLM");
  EXPECT_EQ(b.source, PlanSource::HuggingFace);
  EXPECT_NE(b.log_line.find("builder exploded"), std::string::npos) << b.log_line;
}

TEST(Resolve, NoOptimizedUsesConfigJsonPlan) {
  ResolvedPlan r = resolve_for(
      tp(2), config_with("NewForCausalLM", R"(, "base_model_tp_plan": {"layers.*.mlp.up_proj": "colwise"})"));
  EXPECT_EQ(r.source, PlanSource::HuggingFace);
  EXPECT_TRUE(has_entry(r.plan, "model.layers.*.mlp.up_proj", "colwise"));
  EXPECT_NE(r.log_line.find("no optimized plan is registered"), std::string::npos) << r.log_line;
}

TEST(Resolve, NothingAppliesSuggestsTpOneOrCustom) {
  try {
    resolve_for(tp(2), config_with("UnknownForCausalLM"));
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tensor_parallel_size=1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("custom_parallel_plan"), std::string::npos) << msg;
  }
}

// HF's MoE styles are refused by name, saying what to do; the local/gather
// styles its MoE plans also use are honoured (EveryHfStringTranslates).
TEST(Styles, HfMixtureOfExpertsStylesAreRefusedWithTheWayOut) {
  for (const char* s : {"grouped_gemm", "ep_router", "megamoe_router", "moe_tp_experts", "megamoe_experts",
                        "moe_identity_expert"}) {
    EXPECT_TRUE(is_hf_moe_style(s)) << s;
    try {
      style_from_string(s);
      FAIL() << "expected UsageError for " << s;
    } catch (const UsageError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + s + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("mixture-of-experts"), std::string::npos) << msg;
      EXPECT_NE(msg.find("expert_parallel_size=1"), std::string::npos) << msg;
    }
  }
  for (const char* s : {"local_colwise", "local_rowwise", "local", "gather"}) {
    EXPECT_FALSE(is_hf_moe_style(s)) << s;
    EXPECT_NE(style_from_string(s), nullptr) << s;
  }
}

// MoE models: only the optimized plan splits them, over attention and the
// dense layers' MLPs; no entry reaches a router or an expert. Custom plans,
// sequence parallelism and tp with ep are refused with the way out.
TEST(Resolve, MixtureOfExpertsModelsSplitOnlyTheirDensePart) {
  for (const char* arch : {"Qwen3MoeForCausalLM", "MixtralForCausalLM"}) {
    const models::ModelConfig moe = config_with(arch, R"(, "num_experts": 4, "num_local_experts": 4, "num_experts_per_tok": 2)");
    ASSERT_TRUE(models::is_moe(moe)) << arch;
    EXPECT_EQ(resolve_for(tp(1), moe).source, PlanSource::None);
    const ResolvedPlan r = resolve_for(tp(2), moe);
    EXPECT_EQ(r.source, PlanSource::Optimized) << arch;
    bool splits_attention = false;
    for (const auto& entry : r.plan.entries) {
      splits_attention = splits_attention || entry.pattern == "model.layers.*.self_attn.q_proj";
      const std::string& pattern = entry.pattern;
      for (const char* path : {"model.layers.0.mlp", "model.layers.0.mlp.gate", "model.layers.0.mlp.experts.1.gate_proj",
                               "model.layers.0.block_sparse_moe", "model.layers.0.block_sparse_moe.gate",
                               "model.layers.0.block_sparse_moe.experts.1.w1"}) {
        EXPECT_FALSE(match_pattern(pattern, path)) << arch << ": " << pattern << " reaches " << path;
      }
    }
    EXPECT_TRUE(splits_attention) << arch;
    auto custom = tp(2);
    config::Config inline_plan;
    inline_plan.set("model.layers.*.self_attn.q_proj", config::Config("colwise"));
    custom.custom_parallel_plan = config::CustomPlanSpec{"", inline_plan};
    auto sequence_parallel = tp(2);
    sequence_parallel.sequence_parallel = true;
    for (const auto& [par, way_out] : {std::pair{custom, "custom_parallel_plan"},
                                       std::pair{sequence_parallel, "sequence_parallel=false"}}) {
      try {
        resolve_for(par, moe);
        FAIL() << "expected UsageError for " << arch;
      } catch (const UsageError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(arch), std::string::npos) << msg;
        EXPECT_NE(msg.find("mixture-of-experts"), std::string::npos) << msg;
        EXPECT_NE(msg.find(way_out), std::string::npos) << msg;
      }
    }
  }
}

TEST(Parallelize, StrictPatternMatchingNothingListsNearestPaths) {
  auto model = models::create_preset_model("tiny-llama", 1);
  Plan plan;
  plan.add("model.layers.*.self_attn.qq_proj", "colwise");
  ParallelizeOptions o;
  o.strict = true;
  o.plan_name = "custom plan test";
  try {
    parallelize(*model, dist::world(), plan, o);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("qq_proj"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj"), std::string::npos) << msg;
  }
}

TEST(Parallelize, MatchPlanFirstEntryWins) {
  auto model = models::create_preset_model("tiny-llama", 1);
  Plan plan;
  plan.add("model.layers.*.mlp.*_proj", "colwise");
  plan.add("model.layers.*.mlp.down_proj", "rowwise");
  auto applied = match_plan(*model, plan);
  ASSERT_EQ(applied.size(), 6u);  // 3 projections x 2 layers
  for (const auto& a : applied) EXPECT_EQ(a.pattern, "model.layers.*.mlp.*_proj");
}

}  // namespace
}  // namespace tessel::parallel
