// MixtralForCausalLM: the Mistral layer (sliding_window on every layer when
// non-null; null in the released configs) with a sparse block on every
// layer: router block_sparse_moe.gate, experts
// block_sparse_moe.experts.{e}.w1/w3/w2 (= gate/up/down) of
// intermediate_size, top num_experts_per_tok of num_local_experts, always
// renormalised.
#include "models/families.h"
#include "models/llama.h"

namespace tessel::models {

std::shared_ptr<CausalLM> build_mixtral(const ModelConfig& config, const BuildOptions& options) {
  return build_llama_like(config, LlamaVariant{config.attention_bias, config.attention_bias, /*qk_norm=*/false},
                          options, MoeBlockNames{"block_sparse_moe", nn::GatedMLPNames{"w1", "w3", "w2"}});
}

}  // namespace tessel::models
