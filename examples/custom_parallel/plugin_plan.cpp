// An example compiled plan plugin: build it (CMake target `plugin_plan`, a
// shared library) and point the config at it:
//   policy.dtensor_cfg.custom_parallel_plan=build/default/lib/libplugin_plan.so:llama_tp_plan
// tessel dlopens the library and calls the symbol with an empty Plan to fill.
// Only parallel/plan.h is used: header-only, no tessel library is linked.
#include "parallel/plan.h"

extern "C" void llama_tp_plan(tessel::parallel::Plan* plan) {
  // Megatron-style Llama plan in HF style strings: vocab-parallel embedding,
  // column-parallel q/k/v and gate/up, row-parallel o/down, gathered logits.
  plan->add("model.embed_tokens", "embedding_rowwise");
  for (const char* m : {"q_proj", "k_proj", "v_proj"}) plan->add(std::string("model.layers.*.self_attn.") + m, "colwise");
  plan->add("model.layers.*.self_attn.o_proj", "rowwise");
  plan->add("model.layers.*.mlp.gate_proj", "colwise");
  plan->add("model.layers.*.mlp.up_proj", "colwise");
  plan->add("model.layers.*.mlp.down_proj", "rowwise");
  plan->add("lm_head", "colwise_rep");
}
