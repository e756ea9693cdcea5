#include "parallel/optimized_plans/decoder_plan.h"

#include <memory>
#include <string>
#include <vector>

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
    // An MoE block's input arrives replicated (o_proj's all-reduce) and
    // identical on every tp rank, so every rank routes every token alike and
    // computes whole experts: its input gradient is complete, not partial,
    // and must not be all-reduced like a split MLP's.
    std::vector<std::string> mlps = {L + "mlp"};
    if (shape.moe) {
      mlps.clear();
      for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
        if (!models::is_moe_layer(c, i)) mlps.push_back("model.layers." + std::to_string(i) + ".mlp");
      }
    }
    for (const auto& mlp : mlps) {
      p.add(mlp, std::make_shared<PrepareModuleInput>(Layouts{rep}, Layouts{rep}));
      p.add(mlp + ".gate_proj", colwise);
      p.add(mlp + ".up_proj", colwise);
      p.add(mlp + ".down_proj", rowwise);
    }
    p.add("lm_head", std::make_shared<ColwiseParallel>(Layout::replicate(), Layout::shard(-1)));
    return p;
  }
  // Sequence parallelism would hand each tp rank a part of each row: the MoE
  // block would route only those tokens and the load-balancing loss see
  // partial statistics.
  TESSEL_CHECK(!shape.moe, "sequence parallelism over mixture-of-experts layers is not built");
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
