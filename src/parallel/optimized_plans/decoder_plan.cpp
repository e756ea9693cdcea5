#include "parallel/optimized_plans/decoder_plan.h"

#include <memory>

#include "core/error.h"
#include "parallel/colwise.h"
#include "parallel/prepare_module.h"
#include "parallel/replicate_styles.h"
#include "parallel/rowwise.h"
#include "parallel/sequence_parallel.h"
#include "parallel/vocab_parallel_embedding.h"

namespace tessel::parallel::optimized {

using tensor::Layout;

Plan decoder_plan(const models::ModelConfig& c, const OptimizedPlanOptions& o, const DecoderPlanShape& shape) {
  const int64_t tp = o.tp_size;
  TESSEL_CHECK(tp >= 1, "tp size must be >= 1, got {}", tp);
  TESSEL_CHECK(c.num_attention_heads % tp == 0 && c.num_key_value_heads % tp == 0,
               "{} heads and {} kv heads are not both divisible by tp {}: each rank must hold whole heads",
               c.num_attention_heads, c.num_key_value_heads, tp);
  const std::string L = "model.layers.*.";
  Plan p;
  auto colwise = std::make_shared<ColwiseParallel>();
  // q/k/v on local heads; per-head q/k norms (Qwen3, Gemma3) see only this
  // rank's heads, so their gradients are summed over tp.
  const auto add_qkv = [&] {
    for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}) p.add(L + m, colwise);
    if (shape.qk_norm) {
      auto per_head = std::make_shared<ReplicateParallel>(true);
      p.add(L + "self_attn.q_norm", per_head);
      p.add(L + "self_attn.k_norm", per_head);
    }
  };
  if (!o.sequence_parallel) {
    auto rowwise = std::make_shared<RowwiseParallel>();
    p.add("model.embed_tokens", std::make_shared<VocabParallelEmbedding>(Layout::replicate(), Layout::replicate()));
    // Attention's and the MLP's inputs stay distributed Replicate: their
    // input gradients are all-reduced once each, not once per projection.
    const Layout rep = Layout::replicate();
    p.add(L + "self_attn", std::make_shared<PrepareModuleInput>(Layouts{rep, std::nullopt, std::nullopt},
                                                                Layouts{rep, std::nullopt, std::nullopt}));
    add_qkv();
    p.add(L + "self_attn.o_proj", rowwise);
    p.add(L + "mlp", std::make_shared<PrepareModuleInput>(Layouts{rep}, Layouts{rep}));
    p.add(L + "mlp.gate_proj", colwise);
    p.add(L + "mlp.up_proj", colwise);
    p.add(L + "mlp.down_proj", rowwise);
    p.add("lm_head", std::make_shared<ColwiseParallel>(Layout::replicate(), Layout::shard(-1)));
    return p;
  }
  const Layout seq = Layout::shard(1);
  auto to_seq = std::make_shared<RowwiseParallel>(Layout::shard(-1), seq);
  auto sp = std::make_shared<SequenceParallel>(1);
  p.add("model.embed_tokens", std::make_shared<VocabParallelEmbedding>(Layout::replicate(), seq));
  for (const auto& norm : shape.layer_norms) p.add(L + norm, sp);
  // Attention takes {x, cos, sin}: only x is sequence-sharded.
  p.add(L + "self_attn", std::make_shared<PrepareModuleInput>(Layouts{seq, std::nullopt, std::nullopt},
                                                              Layouts{Layout::replicate(), std::nullopt, std::nullopt}));
  add_qkv();
  p.add(L + "self_attn.o_proj", to_seq);
  p.add(L + "mlp", std::make_shared<PrepareModuleInput>(Layouts{seq}, Layouts{Layout::replicate()}));
  p.add(L + "mlp.gate_proj", colwise);
  p.add(L + "mlp.up_proj", colwise);
  p.add(L + "mlp.down_proj", to_seq);
  p.add("model.norm", sp);
  p.add("lm_head", std::make_shared<ColwiseParallel>(seq, Layout::shard(-1)));
  return p;
}

}  // namespace tessel::parallel::optimized
