// The sparse MoE block against a per-token computation written out here
// (softmax in fp32, top-k, optional renormalisation, each token's experts
// applied with plain matmuls of the expert weights), with routing that uses
// every expert and with routing forced onto two experts: the unused experts
// then get gradients that are exact zeros (defined, finite).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "nn/sparse_moe.h"

namespace tessel::nn {
namespace {

std::shared_ptr<SparseMoeBlock> make_block(bool normalize, uint64_t seed) {
  SparseMoeOptions o;
  o.hidden_size = 6;
  o.intermediate_size = 5;
  o.num_experts = 4;
  o.top_k = 2;
  o.normalize_top_k = normalize;
  auto block = std::make_shared<SparseMoeBlock>(o, at::TensorOptions().dtype(at::kFloat));
  assign_module_paths(*block);
  auto gen = at::detail::createCPUGenerator(seed);
  at::NoGradGuard no_grad;
  for (auto& p : block->named_parameters()) p.value().copy_(at::normal(0.0, 0.5, p.value().sizes(), gen));
  return block;
}

at::Tensor weight(SparseMoeBlock& block, const std::string& name) {
  return block.named_parameters()[name];
}

// out[t] = sum over t's top-k experts e of w_e * down_e(silu(gate_e x) * up_e x), token by token.
at::Tensor per_token_reference(SparseMoeBlock& block, const at::Tensor& x) {
  at::NoGradGuard no_grad;
  const auto& o = block.options();
  const at::Tensor tokens = x.reshape({-1, o.hidden_size});
  const at::Tensor logits = at::matmul(tokens, weight(block, "gate.weight").t());
  at::Tensor out = at::zeros_like(tokens);
  for (int64_t t = 0; t < tokens.size(0); ++t) {
    const at::Tensor p = at::softmax(logits[t].to(at::kFloat), 0);
    auto [w, idx] = at::topk(p, o.top_k);
    if (o.normalize_top_k) w = w / w.sum();
    for (int64_t j = 0; j < o.top_k; ++j) {
      const std::string e = "experts." + std::to_string(idx[j].item<int64_t>()) + ".";
      const at::Tensor h = at::silu(at::mv(weight(block, e + "gate_proj.weight"), tokens[t])) *
                           at::mv(weight(block, e + "up_proj.weight"), tokens[t]);
      out[t] += w[j] * at::mv(weight(block, e + "down_proj.weight"), h);
    }
  }
  return out.view(x.sizes());
}

TEST(SparseMoeBlock, MatchesPerTokenRoutingWithAndWithoutRenormalisation) {
  for (bool normalize : {false, true}) {
    auto block = make_block(normalize, 7);
    auto gen = at::detail::createCPUGenerator(11);
    const at::Tensor x = at::normal(0.0, 1.0, {3, 5, 6}, gen);
    Tensors out = block->call(Tensors{x});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].sizes(), (std::vector<int64_t>{15, 4}));  // router logits [B*T, E]
    EXPECT_TRUE(at::allclose(out[0], per_token_reference(*block, x), 1e-5, 1e-6)) << "normalize " << normalize;
  }
}

TEST(SparseMoeBlock, UnevenRoutingGivesUnusedExpertsZeroGradients) {
  auto block = make_block(true, 3);
  {
    // Positive inputs and a router whose rows 0, 1 are positive and 2, 3
    // negative: every token picks experts 0 and 1.
    at::NoGradGuard no_grad;
    at::Tensor g = weight(*block, "gate.weight");
    g.abs_();
    g.narrow(0, 2, 2).neg_();
  }
  auto gen = at::detail::createCPUGenerator(5);
  const at::Tensor x = at::normal(0.0, 1.0, {2, 4, 6}, gen).abs();
  Tensors out = block->call(Tensors{x});
  EXPECT_TRUE(at::allclose(out[0], per_token_reference(*block, x), 1e-5, 1e-6));
  (out[0].pow(2).sum() + out[1].sum()).backward();
  for (const auto& p : block->named_parameters()) {
    const at::Tensor grad = p.value().grad();
    ASSERT_TRUE(grad.defined()) << p.key();
    ASSERT_TRUE(at::isfinite(grad).all().item<bool>()) << p.key();
    const bool unused = p.key().rfind("experts.2.", 0) == 0 || p.key().rfind("experts.3.", 0) == 0;
    if (unused) {
      EXPECT_EQ(grad.abs().max().item<float>(), 0.0f) << p.key();
    } else {
      EXPECT_GT(grad.abs().max().item<float>(), 0.0f) << p.key();
    }
  }
}

}  // namespace
}  // namespace tessel::nn
