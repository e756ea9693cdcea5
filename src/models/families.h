// The builder of every supported architecture family, one .cpp file each
// (llama.cpp, mistral.cpp, qwen2.cpp, qwen3.cpp, gemma3.cpp, qwen3_moe.cpp,
// mixtral.cpp). Each takes a
// parsed config.json and returns the model with HF parameter names and
// uninitialised parameters. The registry (registry.h) maps the config's
// architectures[0] to these.
#pragma once

#include <memory>

#include "models/causal_lm.h"
#include "models/model_config.h"

namespace tessel::models {

// LlamaForCausalLM: attention_bias -> q/k/v/o biases, mlp_bias -> MLP biases,
// rope_scaling "llama3" / "linear".
std::shared_ptr<CausalLM> build_llama(const ModelConfig& config, const BuildOptions& options);
// MistralForCausalLM: Llama with sliding_window on every layer when non-null.
std::shared_ptr<CausalLM> build_mistral(const ModelConfig& config, const BuildOptions& options);
// Qwen2ForCausalLM: q/k/v biases always (no config field), window only with
// use_sliding_window on layers >= max_window_layers.
std::shared_ptr<CausalLM> build_qwen2(const ModelConfig& config, const BuildOptions& options);
// Qwen3ForCausalLM: per-head q_norm/k_norm over head_dim, attention_bias.
std::shared_ptr<CausalLM> build_qwen3(const ModelConfig& config, const BuildOptions& options);
// Gemma3ForCausalLM (text): sandwich norms, (1 + w) RMSNorm, scaled
// embeddings, local/global layers with their own RoPE bases.
std::shared_ptr<CausalLM> build_gemma3(const ModelConfig& config, const BuildOptions& options);
// Qwen3MoeForCausalLM: Qwen3 with sparse mixture-of-experts layers.
std::shared_ptr<CausalLM> build_qwen3_moe(const ModelConfig& config, const BuildOptions& options);
// MixtralForCausalLM: Mistral with a sparse mixture-of-experts block on every layer.
std::shared_ptr<CausalLM> build_mixtral(const ModelConfig& config, const BuildOptions& options);

}  // namespace tessel::models
