// AdamW against libtorch's own torch::optim::AdamW (an independent
// implementation of the same update) and against a hand-computed first step.
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"
#include "optim/adamw.h"

namespace tessel::optim {
namespace {

TEST(AdamW, FirstStepMatchesHandComputedUpdate) {
  // After one step m = (1-b1) g, v = (1-b2) g^2, so the bias-corrected update
  // is lr * g / (|g| + eps), applied after the decoupled decay.
  AdamWOptions o{.lr = 0.1, .weight_decay = 0.5, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
  at::Tensor p = at::tensor({1.0, -2.0, 3.0}, at::kFloat).requires_grad_(true);
  p.mutable_grad() = at::tensor({0.5, 0.25, -4.0}, at::kFloat);
  AdamW opt({p}, o);
  opt.step();
  const double init[] = {1.0, -2.0, 3.0};
  const double grad[] = {0.5, 0.25, -4.0};
  for (int i = 0; i < 3; ++i) {
    double expected = init[i] * (1 - 0.1 * 0.5) - 0.1 * grad[i] / (std::abs(grad[i]) + 1e-8);
    EXPECT_NEAR(p[i].item<double>(), expected, 1e-6) << "element " << i;
  }
}

TEST(AdamW, MatchesLibtorchAdamWOverManySteps) {
  at::manual_seed(7);
  AdamWOptions o{.lr = 1e-2, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-5};
  at::Tensor a = at::randn({5, 7});
  at::Tensor b = at::randn({17});
  at::Tensor ours_a = a.clone().requires_grad_(true), ours_b = b.clone().requires_grad_(true);
  at::Tensor ref_a = a.clone().requires_grad_(true), ref_b = b.clone().requires_grad_(true);
  AdamW ours({ours_a, ours_b}, o);
  torch::optim::AdamW ref({ref_a, ref_b}, torch::optim::AdamWOptions(o.lr)
                                              .betas({o.beta1, o.beta2})
                                              .eps(o.eps)
                                              .weight_decay(o.weight_decay));
  for (int step = 0; step < 10; ++step) {
    at::Tensor ga = at::randn({5, 7}), gb = at::randn({17});
    ours_a.mutable_grad() = ga.clone();
    ours_b.mutable_grad() = gb.clone();
    ref_a.mutable_grad() = ga.clone();
    ref_b.mutable_grad() = gb.clone();
    ours.step();
    ref.step();
  }
  EXPECT_TRUE(at::allclose(ours_a, ref_a, 1e-6, 1e-7));
  EXPECT_TRUE(at::allclose(ours_b, ref_b, 1e-6, 1e-7));
  EXPECT_EQ(ours.step_count(), 10);
  EXPECT_EQ(ours.state_bytes(), 2 * (35 + 17) * 4);
}

TEST(AdamW, FusedAndGeneralPathsMatchLibtorch) {
  // Contiguous fp32 takes the one-pass kernel (lengths that leave every
  // remainder after a vector width, down to one element); a transposed
  // (strided) fp32 parameter and an fp64 one take the ATen path. All against
  // libtorch.
  at::manual_seed(11);
  AdamWOptions o{.lr = 3e-3, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-5};
  std::vector<at::Tensor> init = {at::randn({7, 5}).t(), at::randn({17}, at::kDouble),
                                  at::randn({300000}), at::randn({300037}), at::randn({1}),
                                  at::randn({15})};
  std::vector<at::Tensor> ours, ref;
  for (const auto& t : init) {
    // clone() keeps the transposed strides of the second tensor.
    ours.push_back(t.clone().requires_grad_(true));
    ref.push_back(t.clone().requires_grad_(true));
  }
  ASSERT_FALSE(ours[0].is_contiguous());
  AdamW opt(ours, o);
  torch::optim::AdamW lib(ref, torch::optim::AdamWOptions(o.lr)
                                   .betas({o.beta1, o.beta2})
                                   .eps(o.eps)
                                   .weight_decay(o.weight_decay));
  for (int step = 0; step < 6; ++step) {
    for (size_t i = 0; i < init.size(); ++i) {
      at::Tensor g = at::randn(init[i].sizes(), init[i].options());
      ours[i].mutable_grad() = g.clone();
      ref[i].mutable_grad() = g.clone();
    }
    opt.step();
    lib.step();
  }
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_TRUE(at::allclose(ours[i], ref[i], 1e-6, 1e-7)) << "parameter " << i;
    EXPECT_FALSE(at::equal(ours[i], init[i])) << "parameter " << i << " did not move";
  }
}

TEST(AdamW, GradScaleEqualsScalingTheGradientsFirst) {
  // What training does (the clip coefficient applied by the update) against
  // what clip_grad_norm does (the gradients scaled in place, then a plain
  // step), bit for bit, on the one-pass kernel (contiguous fp32, lengths with
  // every remainder) and the ATen path (strided fp32, fp64); the gradients
  // the update read are left as they were.
  at::manual_seed(13);
  AdamWOptions o{.lr = 3e-3, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-5};
  std::vector<at::Tensor> init = {at::randn({7, 5}).t(), at::randn({17}, at::kDouble), at::randn({1031}),
                                  at::randn({1})};
  std::vector<at::Tensor> scaled_by_step, scaled_first;
  for (const auto& t : init) {
    scaled_by_step.push_back(t.clone().requires_grad_(true));
    scaled_first.push_back(t.clone().requires_grad_(true));
  }
  AdamW by_step(scaled_by_step, o), first(scaled_first, o);
  for (double scale : {0.37, 1.0, 0.0123}) {
    std::vector<at::Tensor> grads;
    for (size_t i = 0; i < init.size(); ++i) {
      const at::Tensor g = at::randn(init[i].sizes(), init[i].options()).mul_(5.0);
      grads.push_back(g.clone());
      scaled_by_step[i].mutable_grad() = g.clone();
      scaled_first[i].mutable_grad() = g.clone().mul_(scale);
    }
    by_step.step(scale);
    first.step();
    for (size_t i = 0; i < init.size(); ++i) {
      EXPECT_TRUE(at::equal(scaled_by_step[i], scaled_first[i])) << "parameter " << i << " scale " << scale;
      EXPECT_TRUE(at::equal(scaled_by_step[i].grad(), grads[i])) << "gradient " << i << " was rewritten";
    }
  }
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_TRUE(at::equal(by_step.state()[i].exp_avg, first.state()[i].exp_avg)) << i;
    EXPECT_TRUE(at::equal(by_step.state()[i].exp_avg_sq, first.state()[i].exp_avg_sq)) << i;
  }
}

TEST(AdamW, SkipsParametersWithoutGradient) {
  at::Tensor p = at::ones({4}).requires_grad_(true);
  AdamW opt({p}, AdamWOptions{.lr = 1.0});
  opt.step();
  EXPECT_TRUE(at::equal(p, at::ones({4})));
}

TEST(AdamW, StateAllocatedBeforeTheFirstStepChangesNothing) {
  // The trainer allocates the moments before its first step (so that they do
  // not take the pages the first step's activations leave); the updates are
  // those of moments made at the first step.
  at::manual_seed(3);
  const at::Tensor init = at::randn({6, 5});
  at::Tensor early = init.clone().requires_grad_(true), lazy = init.clone().requires_grad_(true);
  const AdamWOptions o{.lr = 1e-2, .weight_decay = 0.1};
  AdamW first({early}, o), later({lazy}, o);
  first.allocate_state();
  ASSERT_TRUE(first.state()[0].exp_avg.defined());
  EXPECT_EQ(first.state()[0].exp_avg.count_nonzero().item<int64_t>(), 0);
  EXPECT_EQ(first.state()[0].exp_avg_sq.count_nonzero().item<int64_t>(), 0);
  EXPECT_FALSE(later.state()[0].exp_avg.defined());
  for (int step = 0; step < 3; ++step) {
    const at::Tensor g = at::randn({6, 5});
    early.mutable_grad() = g.clone();
    lazy.mutable_grad() = g.clone();
    first.step(0.5);
    later.step(0.5);
  }
  EXPECT_TRUE(at::equal(early, lazy));
  EXPECT_TRUE(at::equal(first.state()[0].exp_avg, later.state()[0].exp_avg));
  EXPECT_TRUE(at::equal(first.state()[0].exp_avg_sq, later.state()[0].exp_avg_sq));
  // A state already there (a resumed run's) is kept.
  const at::Tensor kept = first.state()[0].exp_avg.clone();
  first.allocate_state();
  EXPECT_TRUE(at::equal(first.state()[0].exp_avg, kept));
}

TEST(AdamW, ShardedUpdateEqualsFullUpdate) {
  // The element-wise update on two halves equals the update on the whole:
  // the property FSDP parity rests on.
  at::manual_seed(3);
  at::Tensor full = at::randn({6, 3}).requires_grad_(true);
  at::Tensor lo = full.detach().slice(0, 0, 3).clone().requires_grad_(true);
  at::Tensor hi = full.detach().slice(0, 3, 6).clone().requires_grad_(true);
  AdamW whole({full}, {}), parts({lo, hi}, {});
  for (int s = 0; s < 3; ++s) {
    at::Tensor g = at::randn({6, 3});
    full.mutable_grad() = g.clone();
    lo.mutable_grad() = g.slice(0, 0, 3).clone();
    hi.mutable_grad() = g.slice(0, 3, 6).clone();
    whole.step();
    parts.step();
  }
  EXPECT_TRUE(at::equal(at::cat({lo, hi}).detach(), full.detach()));
}

TEST(AdamW, RejectsBadOptionsWithNamedValue) {
  at::Tensor p = at::ones({1}).requires_grad_(true);
  try {
    AdamW opt({p}, AdamWOptions{.beta2 = 1.5});
    FAIL() << "expected an error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("beta2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1.5"), std::string::npos) << e.what();
  }
}

TEST(AdamW, LoadStateChecksShapes) {
  at::Tensor p = at::ones({3}).requires_grad_(true);
  AdamW opt({p}, {});
  std::vector<AdamWParamState> bad(1);
  bad[0].exp_avg = at::zeros({4});
  bad[0].exp_avg_sq = at::zeros({4});
  EXPECT_THROW(opt.load_state(bad, 1), Error);
}

}  // namespace
}  // namespace tessel::optim
