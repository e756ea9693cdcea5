#include "models/presets.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/error.h"
#include "models/init.h"
#include "models/model_config.h"
#include "models/registry.h"

namespace tessel::models {

namespace {

using nlohmann::json;

// Fields common to the tiny presets: 4 query heads sharing 2 KV heads, so GQA
// and tensor parallelism over 2 ranks are both exercised.
json tiny_base(const char* architecture, const char* model_type) {
  return json{{"architectures", {architecture}},
              {"model_type", model_type},
              {"vocab_size", 256},
              {"hidden_size", 64},
              {"intermediate_size", 172},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"max_position_embeddings", 1024},
              {"rms_norm_eps", 1e-6},
              {"hidden_act", "silu"},
              {"initializer_range", 0.02},
              {"tie_word_embeddings", false},
              {"torch_dtype", "float32"},
              {"bos_token_id", 1},
              {"eos_token_id", 2}};
}

json tiny_llama() {
  json j = tiny_base("LlamaForCausalLM", "llama");
  j["rope_theta"] = 500000.0;
  // A short original context so all three llama3 bands occur at head_dim 16.
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 64}};
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  return j;
}

json tiny_mistral() {
  json j = tiny_base("MistralForCausalLM", "mistral");
  j["rope_theta"] = 10000.0;
  j["sliding_window"] = 16;
  return j;
}

json tiny_qwen2() {
  json j = tiny_base("Qwen2ForCausalLM", "qwen2");
  j["rope_theta"] = 1000000.0;
  j["tie_word_embeddings"] = true;
  j["use_sliding_window"] = false;
  j["sliding_window"] = 16;  // inert, as in the real Qwen2.5 configs
  j["max_window_layers"] = 2;
  return j;
}

json tiny_qwen3() {
  json j = tiny_base("Qwen3ForCausalLM", "qwen3");
  j["head_dim"] = 32;  // explicit and != hidden / heads, as in real Qwen3
  j["rope_theta"] = 1000000.0;
  j["rope_scaling"] = nullptr;
  j["attention_bias"] = false;
  j["tie_word_embeddings"] = true;
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  return j;
}

json tiny_gemma3() {
  json j = tiny_base("Gemma3ForCausalLM", "gemma3_text");
  j.erase("hidden_act");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["num_hidden_layers"] = 4;
  j["head_dim"] = 32;
  j["query_pre_attn_scalar"] = 24;  // != head_dim, so the scale choice matters
  j["rope_theta"] = 1000000.0;
  j["rope_local_base_freq"] = 10000.0;
  j["rope_scaling"] = nullptr;
  j["sliding_window"] = 16;
  j["sliding_window_pattern"] = 2;
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  j["final_logit_softcapping"] = nullptr;
  j["attn_logit_softcapping"] = nullptr;
  j["attention_bias"] = false;
  j["tie_word_embeddings"] = true;
  return j;
}

// Mixture of experts: 3 layers, the middle one dense (mlp_only_layers), 8
// experts of width 32, top 2 renormalised (as Qwen3-30B-A3B's norm_topk_prob).
// The load-balancing loss is on (output_router_logits) with a coefficient
// large enough to move the parity figures.
json tiny_qwen3_moe() {
  json j = tiny_qwen3();
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["model_type"] = "qwen3_moe";
  j["tie_word_embeddings"] = false;
  j["num_hidden_layers"] = 3;
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 32;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = {1};
  j["norm_topk_prob"] = true;
  j["output_router_logits"] = true;
  j["router_aux_loss_coef"] = 0.01;
  return j;
}

// Mixtral: 4 experts of width 96 on both layers, top 2, no window (as
// Mixtral-8x7B's sliding_window: null), load-balancing loss on.
json tiny_mixtral() {
  json j = tiny_base("MixtralForCausalLM", "mixtral");
  j["intermediate_size"] = 96;
  j["rope_theta"] = 1000000.0;
  j["sliding_window"] = nullptr;
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 2;
  j["output_router_logits"] = true;
  j["router_aux_loss_coef"] = 0.02;
  j["router_jitter_noise"] = 0.0;
  return j;
}

// ~100M parameters: 12 layers of width 768 (12 heads, 4 KV heads), a 32000
// token vocabulary, tied embeddings.
json llama_100m() {
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"vocab_size", 32000},
              {"hidden_size", 768},
              {"intermediate_size", 2048},
              {"num_hidden_layers", 12},
              {"num_attention_heads", 12},
              {"num_key_value_heads", 4},
              {"max_position_embeddings", 4096},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 500000.0},
              {"rope_scaling", nullptr},
              {"hidden_act", "silu"},
              {"attention_bias", false},
              {"mlp_bias", false},
              {"initializer_range", 0.02},
              {"tie_word_embeddings", true},
              {"torch_dtype", "float32"},
              {"bos_token_id", 1},
              {"eos_token_id", 2}};
}

const std::vector<std::pair<std::string, std::function<json()>>>& presets() {
  static const std::vector<std::pair<std::string, std::function<json()>>> table = {
      {"tiny-llama", tiny_llama},   {"tiny-mistral", tiny_mistral}, {"tiny-qwen2", tiny_qwen2},
      {"tiny-qwen3", tiny_qwen3},   {"tiny-gemma3", tiny_gemma3},   {"tiny-qwen3-moe", tiny_qwen3_moe},
      {"tiny-mixtral", tiny_mixtral}, {"llama-100m", llama_100m},
  };
  return table;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.push_back(p.first);
  return names;
}

std::string make_preset_config(const std::string& name) {
  for (const auto& p : presets()) {
    if (p.first == name) return p.second().dump(2) + "\n";
  }
  std::string known;
  for (const auto& p : presets()) known += (known.empty() ? "" : ", ") + p.first;
  throw UsageError(fmt::format("unknown model preset '{}' (known presets: {})", name, known));
}

std::shared_ptr<CausalLM> create_preset_model(const std::string& name, uint64_t seed,
                                              const BuildOptions& options) {
  ModelConfig config = parse_model_config(make_preset_config(name), "preset " + name);
  auto model = build_model(config, options);
  init_weights(*model, seed);
  return model;
}

}  // namespace tessel::models
