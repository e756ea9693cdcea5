// ModelConfig: the fields of a Hugging Face config.json that tessel's model
// builders use, with the defaults of the matching transformers config class
// when a field is absent. Unknown keys are ignored; a missing required key
// (architectures, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, vocab_size) or a value of the wrong type throws
// tessel::UsageError naming the key and the file.
//
// The original JSON text is kept: save_pretrained writes it back with the
// structured fields patched in (to_config_json), so keys tessel does not
// model (token ids, generation settings) survive a round trip.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nn/rotary.h"

namespace tessel::models {

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. "LlamaForCausalLM"
  std::string model_type;    // "llama", "mistral", "qwen2", "qwen3", "gemma3_text", "qwen3_moe", "mixtral"

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // default: num_attention_heads
  int64_t head_dim = 0;             // default: hidden_size / num_attention_heads (Gemma3: 256)
  int64_t max_position_embeddings = 0;

  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;  // Gemma3 default 1e6
  std::optional<nn::RopeScaling> rope_scaling;  // null / absent / type "default" -> none

  bool tie_word_embeddings = false;  // Gemma3 default true
  bool attention_bias = false;       // Llama: q/k/v/o biases (Qwen2 ignores it: q/k/v always)
  bool mlp_bias = false;
  std::string hidden_act = "silu";  // Gemma3: hidden_activation

  // Sliding-window attention. sliding_window is empty when absent or null.
  std::optional<int64_t> sliding_window;
  bool use_sliding_window = false;  // Qwen2/Qwen3 switch
  int64_t max_window_layers = 0;    // Qwen2/Qwen3: layers >= this use the window
  std::vector<std::string> layer_types;  // "sliding_attention" / "full_attention"
  int64_t sliding_window_pattern = 6;    // Gemma3, when layer_types is absent

  // Gemma3.
  double rope_local_base_freq = 10000.0;
  std::optional<double> query_pre_attn_scalar;
  std::optional<double> final_logit_softcapping;
  std::optional<double> attn_logit_softcapping;

  // Mixture of experts (Qwen3-MoE, Mixtral); num_experts 0 = a dense model.
  // Layer i is sparse when num_experts > 0, i is not in mlp_only_layers and
  // (i + 1) % decoder_sparse_step == 0 (is_moe_layer); the other layers keep
  // a dense MLP of intermediate_size.
  int64_t num_experts = 0;            // Qwen3-MoE num_experts, Mixtral num_local_experts
  int64_t num_experts_per_tok = 0;    // top-k
  int64_t moe_intermediate_size = 0;  // one expert's width (Mixtral: intermediate_size)
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  bool norm_topk_prob = false;  // renormalise the top-k weights (Mixtral: always)
  // The load-balancing loss: added to the training loss, scaled by
  // router_aux_loss_coef, only when output_router_logits (as HF's forward).
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;

  std::string torch_dtype;  // informational ("bfloat16", "float32", ...)

  std::string json_text;  // the config.json it was parsed from
  std::string source;     // where it came from, for messages
};

// Parses config.json text. `source` names the file in error messages.
ModelConfig parse_model_config(const std::string& json_text,
                               const std::string& source = "config.json");
// Reads `path` (a config.json, or a directory holding one).
ModelConfig load_model_config(const std::filesystem::path& path);

// The config as config.json text: the original JSON with every field above
// written back (so a config changed in code saves what it runs).
std::string to_config_json(const ModelConfig& config);

// Per-layer facts resolved from the family rules (shared/reference notes):
// whether layer i uses a sliding window, and its size.
std::optional<int64_t> layer_sliding_window(const ModelConfig& config, int64_t layer);
// Gemma3: true when layer i is a global ("full_attention") layer.
bool gemma3_is_global_layer(const ModelConfig& config, int64_t layer);
// Mixture of experts: whether the model has experts, and whether layer i's
// feed-forward block is sparse (the rule above num_experts).
bool is_moe(const ModelConfig& config);
bool is_moe_layer(const ModelConfig& config, int64_t layer);

}  // namespace tessel::models
