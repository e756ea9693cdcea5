// MistralForCausalLM: the Llama layer with a sliding window on every layer
// (MistralConfig.sliding_window, default 4096; null disables it). The
// per-layer rule lives in layer_sliding_window() (model_config.cpp).
#include "models/families.h"
#include "models/llama.h"

namespace tessel::models {

std::shared_ptr<CausalLM> build_mistral(const ModelConfig& config, const BuildOptions& options) {
  return build_llama_like(config, LlamaVariant{config.attention_bias, config.attention_bias, false},
                          options);
}

}  // namespace tessel::models
