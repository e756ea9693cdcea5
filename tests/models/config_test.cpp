// config.json parsing against the real Hugging Face configs in
// shared/reference/hf_configs (derived numbers from its README table and the
// per-family notes), plus error messages for bad configs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/model_config.h"
#include "support/source_tree.h"

namespace tessel::models {
namespace {

// Copies of shared/reference/hf_configs beside this file.
std::filesystem::path hf_config_dir(const std::string& model) {
  return test_support::source_tree() / "tests" / "models" / "hf_configs" / model;
}

std::string error_of(const std::string& json_text) {
  try {
    parse_model_config(json_text, "/tmp/some/config.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, RealConfigsDeriveHfNumbers) {
  struct Row {
    const char* model;
    const char* arch;
    int64_t head_dim, heads, kv_heads;
    bool tied;
  };
  // hf_configs/README.md: head_dim used by HF, GQA and tying per model.
  for (const Row& r : {Row{"meta-llama__Llama-3.2-1B", "LlamaForCausalLM", 64, 32, 8, true},
                       Row{"meta-llama__Llama-3.1-8B", "LlamaForCausalLM", 128, 32, 8, false},
                       Row{"mistralai__Mistral-7B-v0.1", "MistralForCausalLM", 128, 32, 8, false},
                       Row{"Qwen__Qwen2.5-0.5B", "Qwen2ForCausalLM", 64, 14, 2, true},
                       Row{"Qwen__Qwen3-0.6B", "Qwen3ForCausalLM", 128, 16, 8, true},
                       Row{"google__gemma-3-1b-it", "Gemma3ForCausalLM", 256, 4, 1, true}}) {
    ModelConfig c = load_model_config(hf_config_dir(r.model));
    EXPECT_EQ(c.architecture, r.arch) << r.model;
    EXPECT_EQ(c.head_dim, r.head_dim) << r.model;
    EXPECT_EQ(c.num_attention_heads, r.heads) << r.model;
    EXPECT_EQ(c.num_key_value_heads, r.kv_heads) << r.model;
    EXPECT_EQ(c.tie_word_embeddings, r.tied) << r.model;
  }
}

TEST(ModelConfig, RopeAndWindowRulesPerFamily) {
  ModelConfig llama = load_model_config(hf_config_dir("meta-llama__Llama-3.1-8B"));
  ASSERT_TRUE(llama.rope_scaling.has_value());
  EXPECT_EQ(llama.rope_scaling->type, "llama3");
  EXPECT_EQ(llama.rope_scaling->factor, 8.0);
  EXPECT_EQ(llama.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(llama.rope_theta, 500000.0);
  EXPECT_EQ(llama.rms_norm_eps, 1e-5);
  EXPECT_FALSE(layer_sliding_window(llama, 0).has_value());

  ModelConfig mistral = load_model_config(hf_config_dir("mistralai__Mistral-7B-v0.1"));
  for (int64_t i : {0, 31}) EXPECT_EQ(layer_sliding_window(mistral, i), 4096);

  // Qwen2.5 keeps sliding_window 32768 with use_sliding_window false: no window.
  ModelConfig qwen2 = load_model_config(hf_config_dir("Qwen__Qwen2.5-0.5B"));
  EXPECT_EQ(qwen2.sliding_window, 32768);
  for (int64_t i : {0, 23}) EXPECT_FALSE(layer_sliding_window(qwen2, i).has_value());

  ModelConfig qwen3 = load_model_config(hf_config_dir("Qwen__Qwen3-0.6B"));
  EXPECT_FALSE(qwen3.rope_scaling.has_value());
  EXPECT_FALSE(qwen3.sliding_window.has_value());

  // Gemma3 1B: pattern 6 -> global at 5, 11, 17, 23; local layers use window 512.
  ModelConfig gemma = load_model_config(hf_config_dir("google__gemma-3-1b-it"));
  EXPECT_EQ(gemma.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(gemma.query_pre_attn_scalar, 256.0);
  EXPECT_EQ(gemma.rope_local_base_freq, 10000.0);
  EXPECT_EQ(gemma.rope_theta, 1e6);
  EXPECT_FALSE(gemma.final_logit_softcapping.has_value());
  int globals = 0;
  for (int64_t i = 0; i < gemma.num_hidden_layers; ++i) {
    bool global = (i == 5 || i == 11 || i == 17 || i == 23);
    EXPECT_EQ(gemma3_is_global_layer(gemma, i), global) << i;
    EXPECT_EQ(layer_sliding_window(gemma, i), global ? std::nullopt : std::optional<int64_t>(512)) << i;
    globals += global;
  }
  EXPECT_EQ(globals, 4);
}

TEST(ModelConfig, QwenWindowAppliesFromMaxWindowLayersWhenEnabled) {
  ModelConfig c = parse_model_config(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 4,
    "num_attention_heads": 2, "use_sliding_window": true, "sliding_window": 3, "max_window_layers": 2})");
  EXPECT_FALSE(layer_sliding_window(c, 1).has_value());
  EXPECT_EQ(layer_sliding_window(c, 2), 3);
  EXPECT_EQ(layer_sliding_window(c, 3), 3);
}

TEST(ModelConfig, ErrorsNameTheKeyAndTheFile) {
  const std::string base = R"("architectures": ["LlamaForCausalLM"], "vocab_size": 10,
    "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2)";
  std::string msg = error_of("{" + base + "}");
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/tmp/some/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;

  msg = error_of("{" + base + R"(, "hidden_size": "eight"})");
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integer"), std::string::npos) << msg;

  msg = error_of("{" + base + R"(, "hidden_size": 8, "num_key_value_heads": 3})");
  EXPECT_NE(msg.find("num_key_value_heads"), std::string::npos) << msg;

  msg = error_of("{" + base + R"(, "hidden_size": 8, "rope_scaling": {"rope_type": "yarn", "factor": 2}})");
  EXPECT_NE(msg.find("yarn"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama3"), std::string::npos) << msg;

  EXPECT_NE(error_of(R"({"vocab_size": 3})").find("architectures"), std::string::npos);
  EXPECT_NE(error_of("{not json").find("not valid JSON"), std::string::npos);
  // Found by fuzz/model_config: a number too large for a double is not a
  // parse_error to nlohmann but an out_of_range; it escaped as that.
  EXPECT_NE(error_of("{" + base + R"(, "hidden_size": 8, "bos_token_id": 1e11111111})")
                .find("not valid JSON"),
            std::string::npos);
  EXPECT_THROW(load_model_config("/nonexistent/dir/config.json"), UsageError);

  // Unknown keys are ignored.
  EXPECT_NO_THROW(parse_model_config("{" + base + R"(, "hidden_size": 8, "some_new_field": {"x": [1]}})"));
}

// The MoE fields of the real configs (hf_configs/README.md), HF's defaults
// when absent, which layers are sparse, and a round trip through to_config_json.
TEST(ModelConfig, MixtureOfExpertsFields) {
  ModelConfig qwen = load_model_config(hf_config_dir("Qwen__Qwen3-30B-A3B"));
  EXPECT_EQ(qwen.num_experts, 128);
  EXPECT_EQ(qwen.num_experts_per_tok, 8);
  EXPECT_EQ(qwen.moe_intermediate_size, 768);
  EXPECT_TRUE(qwen.norm_topk_prob);
  EXPECT_FALSE(qwen.output_router_logits);
  EXPECT_EQ(qwen.router_aux_loss_coef, 0.001);
  for (int64_t i : {0, 47}) EXPECT_TRUE(is_moe_layer(qwen, i));
  EXPECT_FALSE(layer_sliding_window(qwen, 0).has_value());

  ModelConfig mixtral = load_model_config(hf_config_dir("mistralai__Mixtral-8x7B-v0.1"));
  EXPECT_EQ(mixtral.num_experts, 8);
  EXPECT_EQ(mixtral.num_experts_per_tok, 2);
  EXPECT_EQ(mixtral.moe_intermediate_size, 14336);
  EXPECT_TRUE(mixtral.norm_topk_prob);  // always, whatever the file says
  EXPECT_EQ(mixtral.router_aux_loss_coef, 0.02);
  EXPECT_FALSE(layer_sliding_window(mixtral, 0).has_value());  // sliding_window: null

  // Qwen3MoeConfig defaults; decoder_sparse_step and mlp_only_layers pick the sparse layers.
  const std::string qwen_base = R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 6, "num_attention_heads": 2)";
  ModelConfig d = parse_model_config(qwen_base + "}");
  EXPECT_EQ(d.num_experts, 128);
  EXPECT_EQ(d.num_experts_per_tok, 8);
  EXPECT_EQ(d.moe_intermediate_size, 768);
  EXPECT_FALSE(d.norm_topk_prob);
  ModelConfig s = parse_model_config(qwen_base + R"(, "decoder_sparse_step": 2, "mlp_only_layers": [3]})");
  std::vector<bool> sparse;
  for (int64_t i = 0; i < 6; ++i) sparse.push_back(is_moe_layer(s, i));
  EXPECT_EQ(sparse, (std::vector<bool>{false, true, false, false, false, true}));
  ModelConfig back = parse_model_config(to_config_json(s));
  EXPECT_EQ(back.mlp_only_layers, s.mlp_only_layers);
  EXPECT_EQ(back.decoder_sparse_step, 2);
  EXPECT_EQ(back.num_experts, 128);
  // A dense model has no experts.
  EXPECT_FALSE(is_moe(load_model_config(hf_config_dir("Qwen__Qwen3-0.6B"))));
}

TEST(ModelConfig, MixtureOfExpertsErrorsNameTheKeyAndTheFix) {
  const std::string qwen = R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2)";
  std::string msg = error_of(qwen + R"(, "num_experts": 4, "num_experts_per_tok": 5})");
  EXPECT_NE(msg.find("num_experts_per_tok"), std::string::npos) << msg;
  EXPECT_NE(msg.find("between 1 and the number of experts (4)"), std::string::npos) << msg;
  msg = error_of(qwen + R"(, "mlp_only_layers": [2]})");
  EXPECT_NE(msg.find("mlp_only_layers"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 2)"), std::string::npos) << msg;
  msg = error_of(qwen + R"(, "decoder_sparse_step": 0})");
  EXPECT_NE(msg.find("decoder_sparse_step"), std::string::npos) << msg;
  const std::string mixtral = R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
    "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2)";
  msg = error_of(mixtral + R"(, "router_jitter_noise": 0.01})");
  EXPECT_NE(msg.find("router_jitter_noise"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set it to 0.0"), std::string::npos) << msg;
  msg = error_of(mixtral + R"(, "num_local_experts": 0})");
  EXPECT_NE(msg.find("num_local_experts"), std::string::npos) << msg;
}

TEST(ModelConfig, ToJsonKeepsUnknownKeysAndWritesChanges) {
  ModelConfig c = load_model_config(hf_config_dir("google__gemma-3-1b-it"));
  c.num_hidden_layers = 2;
  ModelConfig back = parse_model_config(to_config_json(c));
  EXPECT_EQ(back.num_hidden_layers, 2);
  EXPECT_EQ(back.head_dim, 256);
  EXPECT_EQ(back.sliding_window, 512);
  EXPECT_EQ(back.sliding_window_pattern, 6);
  EXPECT_EQ(back.tie_word_embeddings, true);
  EXPECT_NE(to_config_json(c).find("\"cache_implementation\": \"hybrid\""), std::string::npos);

  ModelConfig llama = load_model_config(hf_config_dir("meta-llama__Llama-3.2-1B"));
  ModelConfig llama_back = parse_model_config(to_config_json(llama));
  ASSERT_TRUE(llama_back.rope_scaling.has_value());
  EXPECT_EQ(llama_back.rope_scaling->type, "llama3");
  EXPECT_EQ(llama_back.rope_scaling->factor, 32.0);
  EXPECT_EQ(llama_back.rope_scaling->high_freq_factor, 4.0);
}

}  // namespace
}  // namespace tessel::models
