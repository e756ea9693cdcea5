// Qwen3ForCausalLM (shared/reference/qwen3_notes.md): the Llama layer with a
// per-head RMSNorm (Llama style, weight [head_dim] shared by all heads) on Q
// and K after projection and before RoPE; biases follow attention_bias.
// head_dim is an explicit field (128) and not hidden/heads.
#include "models/families.h"
#include "models/llama.h"

namespace tessel::models {

std::shared_ptr<CausalLM> build_qwen3(const ModelConfig& config, const BuildOptions& options) {
  return build_llama_like(config,
                          LlamaVariant{config.attention_bias, config.attention_bias, /*qk_norm=*/true},
                          options);
}

}  // namespace tessel::models
