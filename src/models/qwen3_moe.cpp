// Qwen3MoeForCausalLM: the Qwen3 layer (per-head q_norm/k_norm, explicit
// head_dim) whose feed-forward block is sparse on the layers is_moe_layer()
// picks (decoder_sparse_step, mlp_only_layers): router mlp.gate, experts
// mlp.experts.{e}.{gate,up,down}_proj of moe_intermediate_size, top
// num_experts_per_tok, renormalised only with norm_topk_prob. The other
// layers keep Qwen3's dense mlp of intermediate_size. A window, when
// use_sliding_window is on, applies to every layer (layer_sliding_window()).
#include "models/families.h"
#include "models/llama.h"

namespace tessel::models {

std::shared_ptr<CausalLM> build_qwen3_moe(const ModelConfig& config, const BuildOptions& options) {
  // The sparse block sits where Qwen3's mlp does, under the same name.
  return build_llama_like(config, LlamaVariant{config.attention_bias, config.attention_bias, /*qk_norm=*/true},
                          options, MoeBlockNames{});
}

}  // namespace tessel::models
