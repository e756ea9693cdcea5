// Packed rows (data::pack's layout, written out by hand here): rows holding
// two documents and padding, with per-document position_ids and document_ids,
// give each document the logits it gets when run alone, and the loss sum and
// every parameter gradient of running the documents separately. Models are
// built in float64 so "the same" means equal to rounding (1e-10), far below
// the difference a leak across documents makes (checked as a control). The
// documents are longer than the sliding window (16) of tiny-mistral and of
// tiny-gemma3's local layers, so window and document mask combine.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "models/presets.h"

namespace tessel::models {
namespace {

const auto kLong = at::TensorOptions().dtype(at::kLong);

at::Tensor random_tokens(int64_t n, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randint(3, 256, {n}, gen, kLong);  // no pad (0)
}

// Sum of -log p(target) over positions whose target is >= 0.
at::Tensor ce_sum(const at::Tensor& logits, const at::Tensor& targets) {
  at::Tensor lp = at::log_softmax(logits.reshape({-1, logits.size(-1)}), -1);
  at::Tensor t = targets.reshape({-1});
  at::Tensor valid = t.ge(0);
  at::Tensor picked = lp.gather(1, t.clamp_min(0).unsqueeze(1)).squeeze(1);
  return -(picked * valid.to(picked.scalar_type())).sum();
}

// Next-token targets of one document alone: tokens 1.., last position none.
at::Tensor alone_targets(const at::Tensor& doc) {
  return at::cat({doc.narrow(0, 1, doc.size(0) - 1), at::full({1}, -1, kLong)});
}

std::map<std::string, at::Tensor> grads_of(CausalLM& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& p : m.named_parameters()) {
    out[p.key()] =
        p.value().grad().defined() ? p.value().grad().clone() : at::zeros_like(p.value());
  }
  m.zero_grad();
  return out;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what,
                  double tol = 1e-10) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LT((got - want).abs().max().item<double>(), tol * scale) << what;
}

// Gradient tolerance of a parameter. Norms compute in float32 whatever the
// model dtype (nn/rms_norm.h), and Gemma's (1 + w) multiplies in float32, so
// the gradient of a Gemma norm weight is a float32 sum over tokens, added in
// another order packed than alone: float32 rounding (~3e-8 relative here).
double grad_tolerance(const std::string& preset, const std::string& name) {
  const bool fp32_sum = preset == "tiny-gemma3" && name.size() > 11 &&
                        name.compare(name.size() - 11, 11, "norm.weight") == 0;
  return fp32_sum ? 1e-6 : 1e-10;
}

class PackedRows : public testing::TestWithParam<std::string> {};

TEST_P(PackedRows, EachDocumentAsIfAlone) {
  BuildOptions f64;
  f64.dtype = at::kDouble;
  auto model = create_preset_model(GetParam(), 11, f64);
  const int64_t V = model->config().vocab_size;
  const int64_t La = 23, Lb = 19, P = 6, T = La + Lb + P;
  const at::Tensor a = random_tokens(La, 1), b = random_tokens(Lb, 2);

  // Alone: logits, loss sum and gradients of each document run by itself.
  const at::Tensor alone_a = model->forward_logits(a.unsqueeze(0));
  const at::Tensor alone_b = model->forward_logits(b.unsqueeze(0));
  const at::Tensor alone_loss =
      ce_sum(alone_a, alone_targets(a)) + ce_sum(alone_b, alone_targets(b));
  alone_loss.backward();
  const auto alone_grads = grads_of(*model);

  // Row 0 = [a, b, pad], row 1 = [b, a, pad]. As data::pack lays them out:
  // positions restart per document and continue through the padding,
  // document_ids count documents in the row, padding is -1, and the last
  // token of a document has no target (the next one starts a document).
  const at::Tensor pad = at::zeros({P}, kLong);
  const at::Tensor ids = at::stack({at::cat({a, b, pad}), at::cat({b, a, pad})});
  const at::Tensor pos = at::stack(
      {at::cat({at::arange(La, kLong), at::arange(Lb, kLong), at::arange(Lb, Lb + P, kLong)}),
       at::cat({at::arange(Lb, kLong), at::arange(La, kLong), at::arange(La, La + P, kLong)})});
  auto docs_of = [&](int64_t first) {
    return at::cat(
        {at::zeros({first}, kLong), at::ones({La + Lb - first}, kLong), at::full({P}, -1, kLong)});
  };
  const at::Tensor doc = at::stack({docs_of(La), docs_of(Lb)});
  const at::Tensor no_target = at::full({P}, -1, kLong);
  const at::Tensor targets = at::stack({at::cat({alone_targets(a), alone_targets(b), no_target}),
                                        at::cat({alone_targets(b), alone_targets(a), no_target})});

  const at::Tensor logits = model->forward_logits(ids, pos, doc);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, T, V}));
  expect_close(logits[0].narrow(0, 0, La), alone_a[0], "row 0 document a");
  expect_close(logits[0].narrow(0, La, Lb), alone_b[0], "row 0 document b");
  expect_close(logits[1].narrow(0, 0, Lb), alone_b[0], "row 1 document b");
  expect_close(logits[1].narrow(0, Lb, La), alone_a[0], "row 1 document a");
  EXPECT_TRUE(logits.isfinite().all().item<bool>());  // padding rows too

  // Row 0 alone has the loss of a + b; the batch of both rows twice that.
  const at::Tensor packed_loss = ce_sum(logits.narrow(0, 0, 1), targets.narrow(0, 0, 1));
  expect_close(packed_loss.detach(), alone_loss.detach(), "loss sum");
  packed_loss.backward();
  for (const auto& [name, g] : grads_of(*model)) {
    expect_close(g, alone_grads.at(name), "grad of " + name, grad_tolerance(GetParam(), name));
  }

  // The same through activation checkpointing (document_ids survive the
  // recompute), over both rows: twice the gradients.
  for (auto& layer : model->decoder_layers()) layer->set_activation_checkpointing(true);
  ce_sum(model->forward_logits(ids, pos, doc), targets).backward();
  for (auto& layer : model->decoder_layers()) layer->set_activation_checkpointing(false);
  for (const auto& [name, g] : grads_of(*model)) {
    expect_close(g, 2 * alone_grads.at(name), "checkpointed grad of " + name,
                 grad_tolerance(GetParam(), name));
  }

  // Control: without document_ids the second document of a row attends to
  // the first, and its logits move far beyond the tolerance above.
  const at::Tensor leaky = model->forward_logits(ids, pos);
  EXPECT_GT((leaky[0].narrow(0, La, Lb) - alone_b[0]).abs().max().item<double>(), 1e-4);
  // And no document_ids keeps the plain causal path: document a, first in
  // row 0, is unaffected by what follows it.
  expect_close(leaky[0].narrow(0, 0, La), alone_a[0], "plain causal prefix");
}

INSTANTIATE_TEST_SUITE_P(Tiny, PackedRows,
                         testing::Values("tiny-llama", "tiny-mistral", "tiny-qwen3",
                                         "tiny-gemma3"));

}  // namespace
}  // namespace tessel::models
