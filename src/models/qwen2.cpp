// Qwen2ForCausalLM (shared/reference/qwen2_notes.md): the Llama layer with
// q/k/v biases always on (Qwen2Config has no field for them), no o_proj bias.
// sliding_window applies only with use_sliding_window, to layers >=
// max_window_layers (layer_sliding_window()).
#include "models/families.h"
#include "models/llama.h"

namespace tessel::models {

std::shared_ptr<CausalLM> build_qwen2(const ModelConfig& config, const BuildOptions& options) {
  return build_llama_like(config, LlamaVariant{/*qkv_bias=*/true, /*o_bias=*/false, /*qk_norm=*/false},
                          options);
}

}  // namespace tessel::models
