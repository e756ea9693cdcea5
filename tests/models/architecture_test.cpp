// Each family builds with exactly the HF parameter names and shapes of the
// real configs. The expected name -> shape list is computed here from the raw
// config.json with the rules of shared/reference (not with tessel's config
// code). Models are built on the meta device: no memory for 8B parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/model_config.h"
#include "models/registry.h"
#include "support/source_tree.h"

namespace tessel::models {
namespace {

using nlohmann::json;
using Shapes = std::map<std::string, std::vector<int64_t>>;

std::filesystem::path hf_config(const std::string& model) {
  return test_support::source_tree() / "tests" / "models" / "hf_configs" / model / "config.json";
}

// HF's rule: Mixtral is sparse everywhere; Qwen3-MoE on layers not in
// mlp_only_layers with (i + 1) % decoder_sparse_step == 0.
bool sparse_layer(const json& c, int64_t i) {
  const std::string type = c["model_type"];
  if (type == "mixtral") return true;
  if (type != "qwen3_moe" || c.value("num_experts", 128) == 0) return false;
  for (const auto& l : c.value("mlp_only_layers", json::array())) {
    if (l.get<int64_t>() == i) return false;
  }
  return (i + 1) % c.value("decoder_sparse_step", 1) == 0;
}

Shapes expected_shapes(const json& c) {
  const std::string type = c["model_type"];
  const int64_t H = c["hidden_size"], I = c["intermediate_size"], L = c["num_hidden_layers"];
  const int64_t heads = c["num_attention_heads"];
  const int64_t kv = c.value("num_key_value_heads", heads);
  const int64_t D = c.contains("head_dim") && !c["head_dim"].is_null() ? c["head_dim"].get<int64_t>() : H / heads;
  const int64_t V = c["vocab_size"];
  const bool gemma = type == "gemma3_text";
  const bool tied = c.value("tie_word_embeddings", gemma);
  const bool qkv_bias = type == "qwen2" || c.value("attention_bias", false);
  const bool o_bias = type != "qwen2" && c.value("attention_bias", false);
  const bool qk_norm = type == "qwen3" || type == "qwen3_moe" || gemma;
  const bool mlp_bias = c.value("mlp_bias", false);
  Shapes s{{"model.embed_tokens.weight", {V, H}}, {"model.norm.weight", {H}}};
  if (!tied) s["lm_head.weight"] = {V, H};
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s[p + "self_attn.q_proj.weight"] = {heads * D, H};
    s[p + "self_attn.k_proj.weight"] = {kv * D, H};
    s[p + "self_attn.v_proj.weight"] = {kv * D, H};
    s[p + "self_attn.o_proj.weight"] = {H, heads * D};
    if (qkv_bias) {
      s[p + "self_attn.q_proj.bias"] = {heads * D};
      s[p + "self_attn.k_proj.bias"] = {kv * D};
      s[p + "self_attn.v_proj.bias"] = {kv * D};
    }
    if (o_bias) s[p + "self_attn.o_proj.bias"] = {H};
    if (qk_norm) {
      s[p + "self_attn.q_norm.weight"] = {D};
      s[p + "self_attn.k_norm.weight"] = {D};
    }
    if (sparse_layer(c, i)) {
      // HF: Qwen3MoeSparseMoeBlock (mlp.gate, experts.{e}.{gate,up,down}_proj of
      // moe_intermediate_size); MixtralSparseMoeBlock (block_sparse_moe.gate,
      // experts.{e}.w1/w3 [I, H], w2 [H, I]).
      const bool mixtral = type == "mixtral";
      const int64_t E = mixtral ? c.value("num_local_experts", 8) : c.value("num_experts", 128);
      const int64_t Ie = mixtral ? I : c.value("moe_intermediate_size", 768);
      const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
      s[block + "gate.weight"] = {E, H};
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = block + "experts." + std::to_string(e) + ".";
        s[x + (mixtral ? "w1" : "gate_proj") + ".weight"] = {Ie, H};
        s[x + (mixtral ? "w3" : "up_proj") + ".weight"] = {Ie, H};
        s[x + (mixtral ? "w2" : "down_proj") + ".weight"] = {H, Ie};
      }
    } else {
      for (const char* m : {"gate_proj", "up_proj"}) {
        s[p + "mlp." + m + ".weight"] = {I, H};
        if (mlp_bias) s[p + "mlp." + m + ".bias"] = {I};
      }
      s[p + "mlp.down_proj.weight"] = {H, I};
      if (mlp_bias) s[p + "mlp.down_proj.bias"] = {H};
    }
    s[p + "input_layernorm.weight"] = {H};
    s[p + "post_attention_layernorm.weight"] = {H};
    if (gemma) {
      s[p + "pre_feedforward_layernorm.weight"] = {H};
      s[p + "post_feedforward_layernorm.weight"] = {H};
    }
  }
  return s;
}

class RealConfigs : public testing::TestWithParam<std::string> {};

TEST_P(RealConfigs, ParameterNamesAndShapesMatchHf) {
  std::ifstream in(hf_config(GetParam()));
  json raw = json::parse(in);
  ModelConfig config = load_model_config(hf_config(GetParam()));
  BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  meta.dtype = at::kBFloat16;
  auto model = build_model(config, meta);

  Shapes want = expected_shapes(raw);
  Shapes got;
  int64_t numel = 0;
  for (const auto& p : model->named_parameters()) {
    EXPECT_TRUE(got.emplace(p.key(), p.value().sizes().vec()).second) << "listed twice: " << p.key();
    EXPECT_TRUE(p.value().is_meta());
    numel += p.value().numel();
  }
  EXPECT_EQ(got, want);

  // Decoder layers and accessors for FSDP / TP.
  const int64_t layers = raw["num_hidden_layers"];
  ASSERT_EQ(static_cast<int64_t>(model->decoder_layers().size()), layers);
  EXPECT_EQ(model->decoder_layers()[1]->path(), "model.layers.1");
  EXPECT_EQ(model->embed_tokens()->path(), "model.embed_tokens");
  EXPECT_EQ(model->final_norm()->path(), "model.norm");
  EXPECT_EQ(model->lm_head()->path(), "lm_head");
  EXPECT_EQ(nn::find_module(*model, "model.layers.0.self_attn.q_proj")->path(),
            "model.layers.0.self_attn.q_proj");
  const bool tied = config.tie_word_embeddings;
  EXPECT_EQ(model->lm_head()->is_tied(), tied);
  if (tied) {
    EXPECT_EQ(model->tied_parameter_names(),
              (std::map<std::string, std::string>{{"lm_head.weight", "model.embed_tokens.weight"}}));
  } else {
    EXPECT_TRUE(model->tied_parameter_names().empty());
  }
  // The headline sizes: Llama-3.1-8B has 8.03e9 parameters, Llama-3.2-1B 1.24e9.
  if (GetParam() == "meta-llama__Llama-3.1-8B") {
    EXPECT_EQ(numel, 8030261248);
  }
  if (GetParam() == "meta-llama__Llama-3.2-1B") {
    EXPECT_EQ(numel, 1235814400);
  }
  // HF transformers 4.57.6 on the meta device (hf_configs/README.md): the
  // published 30.5B and 46.7B.
  if (GetParam() == "Qwen__Qwen3-30B-A3B") {
    EXPECT_EQ(numel, 30532122624);
  }
  if (GetParam() == "mistralai__Mixtral-8x7B-v0.1") {
    EXPECT_EQ(numel, 46702792704);
  }
}

INSTANTIATE_TEST_SUITE_P(Hf, RealConfigs,
                         testing::Values("meta-llama__Llama-3.2-1B", "meta-llama__Llama-3.1-8B",
                                         "mistralai__Mistral-7B-v0.1", "Qwen__Qwen2.5-0.5B",
                                         "Qwen__Qwen3-0.6B", "google__gemma-3-1b-it", "Qwen__Qwen3-30B-A3B",
                                         "mistralai__Mixtral-8x7B-v0.1"));

TEST(Registry, UnknownArchitectureListsKnownOnes) {
  ModelConfig c = parse_model_config(R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 10,
    "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2})");
  try {
    build_model(c);
    FAIL() << "expected an error";
  } catch (const UsageError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("GPT2LMHeadModel"), std::string::npos) << msg;
    for (const auto& a : known_architectures()) EXPECT_NE(msg.find(a), std::string::npos) << msg;
  }
  EXPECT_EQ(known_architectures().size(), 7u);
}

}  // namespace
}  // namespace tessel::models
