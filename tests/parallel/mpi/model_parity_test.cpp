// Tiny models of every family under tensor parallelism, against the same
// model run whole in this process: logits, loss and the gradient of every
// parameter (gathered from the shards) after one forward and backward. Plans:
// the optimized plan, the optimized plan with sequence parallelism (7 tokens,
// so sequence shards are uneven), and the HF plan. Qwen2, Qwen3 and Gemma3
// have tied embeddings. tp 2 runs on the world at 2 ranks and on two groups of
// 2 at 4 ranks; tp 4 runs on a Llama config with 4 kv heads. Packed rows
// (several documents per row, per-document position_ids, document_ids) run
// the same comparison: document_ids ride along as the 4th input of every
// decoder layer and attention, past the positions the TP hooks redistribute.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "loss/cross_entropy.h"
#include "loss/vocab_parallel_cross_entropy.h"
#include "models/init.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/registry.h"
#include "parallel/activation_tags.h"
#include "parallel/hf_plan.h"
#include "parallel/mpi/tp_testing.h"
#include "parallel/optimized_plans.h"
#include "parallel/parallelize.h"
#include "tensor/chunking.h"
#include "tensor/dim_collectives.h"

namespace tessel::parallel {
namespace {

using namespace testing;

enum class Mode { Optimized, OptimizedSP, HF, HFVocabParallel };
const char* name(Mode m) {
  switch (m) {
    case Mode::Optimized: return "optimized";
    case Mode::OptimizedSP: return "optimized+sp";
    case Mode::HF: return "hf";
    case Mode::HFVocabParallel: return "hf (vocab-parallel head)";
  }
  return "?";
}

using Factory = std::function<std::shared_ptr<models::CausalLM>()>;

// Two packed rows of 21 tokens (odd: uneven sequence shards): documents of
// 9 and 8 tokens then 4 of padding; one of 18 (longer than the sliding window
// 16 of tiny-gemma3's local layers) then one of 3.
struct PackedRows {
  at::Tensor position_ids, document_ids, loss_mask;
};
PackedRows packed_rows() {
  const std::vector<std::vector<int64_t>> lengths = {{9, 8, -4}, {18, 3}};  // negative: padding
  std::vector<int64_t> pos, doc, mask;
  for (const auto& row : lengths) {
    int64_t d = 0;
    for (int64_t n : row) {
      for (int64_t i = 0; i < std::abs(n); ++i) {
        pos.push_back(i);
        doc.push_back(n < 0 ? -1 : d);
        mask.push_back(n < 0 || i == 0 ? 0 : 1);
      }
      ++d;
    }
  }
  auto t = [](const std::vector<int64_t>& v) { return at::tensor(v, at::kLong).view({2, 21}); };
  return {t(pos), t(doc), t(mask)};
}

void check_model(const std::string& what, const Factory& make, Mode mode, const dist::CommunicatorPtr& g,
                 bool packed = false) {
  SCOPED_TRACE(what + " " + name(mode) + " tp " + std::to_string(g->size()) + (packed ? " packed" : ""));
  auto ref = make();
  auto tp = make();
  const auto& cfg = tp->config();
  const int64_t V = cfg.vocab_size;

  Plan plan;
  ParallelizeOptions opts;
  if (mode == Mode::Optimized || mode == Mode::OptimizedSP) {
    auto builder = find_optimized_plan(cfg.architecture);
    ASSERT_TRUE(builder.has_value());
    plan = (*builder)(cfg, OptimizedPlanOptions{g->size(), mode == Mode::OptimizedSP});
  } else {
    plan = hf_plan(cfg).plan;
    opts.vocab_parallel_head = mode == Mode::HFVocabParallel;
  }
  ParallelizeResult res = parallelize(*tp, g, plan, opts);
  const bool sharded_logits = mode != Mode::HF;

  const int64_t B = 2, T = packed ? 21 : 7;
  at::Tensor ids = (at::arange(B * T, at::TensorOptions().dtype(at::kLong)) * 37 + 11).remainder(V).view({B, T});
  const PackedRows rows = packed ? packed_rows() : PackedRows{};
  at::Tensor labels = loss::next_token_labels(ids, rows.loss_mask);

  at::Tensor ref_logits = ref->forward_logits(ids, rows.position_ids, rows.document_ids);
  loss::LossSum ref_loss = loss::cross_entropy_sum(ref_logits, labels);
  ref_loss.sum.backward();

  at::Tensor logits = tp->forward_logits(ids, rows.position_ids, rows.document_ids);
  loss::LossSum l;
  if (sharded_logits) {
    expect_close(tensor::all_gather_dim(logits.detach().contiguous(), -1 + logits.dim(), *g,
                                        tensor::chunk_sizes(V, g->size())),
                 ref_logits.detach(), "gathered logits");
    l = loss::vocab_parallel_cross_entropy_sum(logits, labels, tensor::chunk_offset(V, g->size(), g->rank()), V, g);
  } else {
    expect_close(logits.detach(), ref_logits.detach(), "logits");
    l = loss::cross_entropy_sum(logits, labels);
  }
  expect_close(l.sum.detach(), ref_loss.sum.detach(), "loss", 1e-4);
  l.sum.backward();
  expect_same_grads(*ref, *tp, res.params, g, what + " " + name(mode), 5e-5);
  if (cfg.tie_word_embeddings) {
    EXPECT_EQ(res.params.at("lm_head.weight").spec, res.params.at("model.embed_tokens.weight").spec);
  }
}

dist::CommunicatorPtr tp2_group() {
  auto w = dist::world();
  if (w->size() == 2) return w;
  return w->split(w->rank() / 2, w->rank() % 2, "tp");
}

TEST(ModelParityMpi, EveryFamilyEveryPlanAtTp2) {
  auto g = tp2_group();
  if (dist::world()->size() % 2 != 0) GTEST_SKIP();
  for (const char* preset : {"tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3"}) {
    Factory make = [preset] { return models::create_preset_model(preset, 1234); };
    for (Mode m : {Mode::Optimized, Mode::OptimizedSP, Mode::HF, Mode::HFVocabParallel}) check_model(preset, make, m, g);
  }
  EXPECT_LT(num_activation_tags(), 64u);  // tags die with their tensors
}

// Collectives on the tp group per decoder layer in one forward and backward
// of tiny-llama, for every plan: the difference between a 3-layer and a
// 2-layer model of the same config, so fixed costs (embedding, lm_head, loss)
// cancel. Hand-derived from each plan:
// - optimized: forward all-reduces after o_proj and down_proj; backward one
//   all-reduce of the attention input's and one of the MLP input's gradient
//   (PrepareModuleInput keeps them distributed), not one per projection.
// - optimized + SP: forward all-gathers of the attention and MLP inputs and
//   reduce-scatters after o_proj and down_proj, backward their adjoints, plus
//   the two sequence-parallel norms' weight-gradient all-reduces, plus two
//   tiny all-gathers of the shard sizes: the norms' inputs are residual sums
//   the model code makes, which carry no tag with the global length.
// - HF: forward as optimized; backward an all-reduce per column-parallel
//   projection (q, k, v, gate, up).
struct LayerCollectives {
  int64_t all_reduce, all_gather, reduce_scatter;
  bool operator==(const LayerCollectives&) const = default;
};
LayerCollectives collectives_of(int layers, Mode mode, const dist::CommunicatorPtr& g) {
  models::ModelConfig cfg = models::parse_model_config(models::make_preset_config("tiny-llama"), "tiny-llama");
  cfg.num_hidden_layers = layers;
  auto model = models::build_model(cfg);
  models::init_weights(*model, 5);
  Plan plan = mode == Mode::HF ? hf_plan(cfg).plan
                               : (*find_optimized_plan(cfg.architecture))(
                                     cfg, OptimizedPlanOptions{g->size(), mode == Mode::OptimizedSP});
  ParallelizeOptions opts;
  opts.vocab_parallel_head = mode != Mode::HF;
  parallelize(*model, g, plan, opts);
  const int64_t V = cfg.vocab_size;
  at::Tensor ids = (at::arange(2 * 8, at::TensorOptions().dtype(at::kLong)) * 37 + 11).remainder(V).view({2, 8});
  at::Tensor labels = loss::next_token_labels(ids, {});
  g->reset_counters();
  at::Tensor logits = model->forward_logits(ids);
  loss::LossSum l = mode == Mode::HF ? loss::cross_entropy_sum(logits, labels)
                                     : loss::vocab_parallel_cross_entropy_sum(
                                           logits, labels, tensor::chunk_offset(V, g->size(), g->rank()), V, g);
  l.sum.backward();
  const auto c = g->counters();
  using K = dist::CollectiveKind;
  return {c.count(K::AllReduce), c.count(K::AllGather), c.count(K::ReduceScatter)};
}

TEST(ModelParityMpi, CollectivesPerLayerForEveryPlan) {
  auto g = tp2_group();
  if (dist::world()->size() % 2 != 0) GTEST_SKIP();
  const std::vector<std::pair<Mode, LayerCollectives>> want = {
      {Mode::Optimized, {2 + 2, 0, 0}},
      {Mode::OptimizedSP, {2, 2 + 2 + 2, 2 + 2}},
      {Mode::HF, {2 + 5, 0, 0}},
  };
  for (const auto& [mode, expected] : want) {
    const LayerCollectives three = collectives_of(3, mode, g), two = collectives_of(2, mode, g);
    const LayerCollectives per_layer{three.all_reduce - two.all_reduce, three.all_gather - two.all_gather,
                                     three.reduce_scatter - two.reduce_scatter};
    EXPECT_EQ(per_layer.all_reduce, expected.all_reduce) << name(mode);
    EXPECT_EQ(per_layer.all_gather, expected.all_gather) << name(mode);
    EXPECT_EQ(per_layer.reduce_scatter, expected.reduce_scatter) << name(mode);
  }
}

TEST(ModelParityMpi, PackedRowsAtTp2) {
  auto g = tp2_group();
  if (dist::world()->size() % 2 != 0) GTEST_SKIP();
  for (const char* preset : {"tiny-llama", "tiny-gemma3"}) {
    Factory make = [preset] { return models::create_preset_model(preset, 1234); };
    for (Mode m : {Mode::Optimized, Mode::OptimizedSP, Mode::HF}) {
      check_model(preset, make, m, g, /*packed=*/true);
    }
  }
}

TEST(ModelParityMpi, LlamaWithFourKvHeadsAtTp4) {
  auto w = dist::world();
  if (w->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  std::string json = models::make_preset_config("tiny-llama");
  models::ModelConfig cfg = models::parse_model_config(json, "tiny-llama");
  cfg.num_key_value_heads = 4;
  cfg.vocab_size = 250;  // 63, 63, 63, 61 rows per rank
  cfg.tie_word_embeddings = true;
  Factory make = [cfg] {
    auto m = models::build_model(cfg);
    models::init_weights(*m, 99);
    return m;
  };
  for (Mode m : {Mode::Optimized, Mode::OptimizedSP, Mode::HF}) check_model("llama kv4 tied", make, m, w);
  check_model("llama kv4 tied", make, Mode::OptimizedSP, w, /*packed=*/true);
}

}  // namespace
}  // namespace tessel::parallel
