// Activation checkpointing: identical gradients with and without it, and the
// documented hook behaviour during the recompute.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>
#include <vector>

#include "nn/checkpoint.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace tessel::nn {
namespace {

// h = x + w2(tanh(w1(x) * gain)), with an integer side input like position ids.
class Block : public Module {
 public:
  Block() : Module("Block") {
    w1 = register_module("w1", std::make_shared<Linear>(4, 6, true, at::kDouble));
    w2 = register_module("w2", std::make_shared<Linear>(6, 4, false, at::kDouble));
    auto gen = at::detail::createCPUGenerator(11);
    for (auto& p : named_parameters()) p.value().set_data(at::randn(p.value().sizes(), gen, at::kDouble));
  }
  std::shared_ptr<Linear> w1, w2;
  int forwards = 0;

 protected:
  Tensors forward(const Tensors& in) override {
    ++forwards;
    at::Tensor gain = (in[1].to(at::kDouble) + 1).unsqueeze(-1);  // [B, T, 1]
    return {in[0] + w2->call(at::tanh(w1->call(in[0]) * gain))};
  }
};

struct Grads {
  at::Tensor x;
  std::vector<at::Tensor> params;
  at::Tensor out;
};

Grads run(bool checkpoint, bool input_requires_grad) {
  auto block = std::make_shared<Block>();
  block->set_activation_checkpointing(checkpoint);
  auto gen = at::detail::createCPUGenerator(12);
  at::Tensor x = at::randn({2, 3, 4}, gen, at::kDouble);
  if (input_requires_grad) x.requires_grad_(true);
  at::Tensor pos = at::arange(3, at::kLong).unsqueeze(0).expand({2, 3});
  // Two checkpointed calls in a row, like two decoder layers.
  at::Tensor h = block->call(Tensors{x, pos})[0];
  h = block->call(Tensors{h * 0.5, pos})[0];
  (h.pow(2).sum()).backward();
  Grads g;
  g.out = h.detach();
  if (input_requires_grad) g.x = x.grad();
  for (auto& p : block->parameters()) g.params.push_back(p.grad());
  return g;
}

TEST(ActivationCheckpointing, SameGradientsAsPlainBackward) {
  for (bool input_grad : {true, false}) {
    Grads plain = run(false, input_grad), ckpt = run(true, input_grad);
    EXPECT_TRUE(at::allclose(plain.out, ckpt.out, 0, 0));
    if (input_grad) {
      EXPECT_TRUE(at::allclose(plain.x, ckpt.x, 1e-12, 1e-14));
    }
    ASSERT_EQ(plain.params.size(), ckpt.params.size());
    for (std::size_t i = 0; i < plain.params.size(); ++i) {
      ASSERT_TRUE(ckpt.params[i].defined()) << "param " << i << " got no gradient";
      EXPECT_TRUE(at::allclose(plain.params[i], ckpt.params[i], 1e-12, 1e-14)) << "param " << i;
    }
  }
}

TEST(ActivationCheckpointing, InnerHooksReplayWithRecomputeFlagOuterHooksRunOnce) {
  auto block = std::make_shared<Block>();
  block->set_activation_checkpointing(true);
  std::vector<bool> inner_pre, inner_post;
  int outer_pre = 0, outer_post = 0;
  block->w1->add_pre_hook([&](Module&, Tensors in) {
    inner_pre.push_back(in_recompute());
    return in;
  });
  // A post-hook that changes the computation must be replayed identically.
  block->w2->add_post_hook([&](Module&, const Tensors&, Tensors out) {
    inner_post.push_back(in_recompute());
    return Tensors{out[0] * 3};
  });
  block->add_pre_hook([&](Module&, Tensors in) {
    ++outer_pre;
    EXPECT_FALSE(in_recompute());
    return in;
  });
  block->add_post_hook([&](Module&, const Tensors&, Tensors out) {
    ++outer_post;
    return out;
  });
  at::Tensor x = at::ones({1, 2, 4}, at::kDouble).requires_grad_(true);
  at::Tensor pos = at::zeros({1, 2}, at::kLong);
  at::Tensor y = block->call(Tensors{x, pos})[0];
  EXPECT_EQ(inner_pre, std::vector<bool>{false});
  EXPECT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_EQ(inner_pre, (std::vector<bool>{false, true}));
  EXPECT_EQ(inner_post, (std::vector<bool>{false, true}));
  EXPECT_EQ(outer_pre, 1);
  EXPECT_EQ(outer_post, 1);
  EXPECT_EQ(block->forwards, 2);
  EXPECT_FALSE(in_recompute());

  // dy/dx through the hooked computation, by hand: y = x + 3 * w2(tanh(w1 x)).
  auto w1 = block->w1->weight(), b1 = block->w1->bias(), w2 = block->w2->weight();
  at::Tensor a = at::linear(at::ones({4}, at::kDouble), w1, b1);
  at::Tensor d = (1 - a.tanh().pow(2));                       // [6]
  at::Tensor want = 1 + 3 * (w2.sum(0) * d).matmul(w1);       // [4]
  EXPECT_TRUE(at::allclose(x.grad()[0][0], want.detach(), 1e-12, 1e-12));
}

TEST(ActivationCheckpointing, NoRecomputeWithoutGradMode) {
  auto block = std::make_shared<Block>();
  block->set_activation_checkpointing(true);
  at::NoGradGuard no_grad;
  block->call(Tensors{at::ones({1, 2, 4}, at::kDouble), at::zeros({1, 2}, at::kLong)});
  EXPECT_EQ(block->forwards, 1);
}

}  // namespace
}  // namespace tessel::nn
