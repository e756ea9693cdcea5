// The non-attention kernels of a training step against the ATen compositions
// they replace, forward + backward on one thread at bench-medium's shapes
// (batch 2, seq 256, hidden 512, 8 query heads of 64, vocab 8192): RMSNorm
// (nn/rms_norm_kernel.h), rotary (nn/rotary_kernel.h) and cross-entropy
// (loss/chunked_softmax.h via cross_entropy_sum). Rounds interleave the two
// sides (the machine drifts); medians per side, one line per kernel.
//
// Usage: bench_step_kernels [--rounds N]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "loss/cross_entropy.h"
#include "nn/rms_norm_kernel.h"
#include "nn/rotary.h"
#include "nn/rotary_kernel.h"

namespace {

struct Pair {
  std::string name;
  std::function<void()> composition, kernel;
};

using namespace tessel::bench;

double seconds_of(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return seconds_since(t0);
}


}  // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  int rounds = 21;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--rounds") rounds = std::atoi(argv[++i]);
  }
  at::set_num_threads(1);
  at::manual_seed(0);
  const int64_t B = 2, T = 256, H = 512, heads = 8, D = 64, V = 8192;

  const at::Tensor x = at::randn({B, T, H}), w = at::rand({H}) + 0.5, dy = at::randn({B, T, H});
  auto leaf = [](const at::Tensor& t) { return t.detach().clone().requires_grad_(); };
  const Pair norm{"RMSNorm [2, 256, 512]",
                  [&] {
                    at::Tensor xg = leaf(x), wg = leaf(w);
                    (wg * (xg * at::rsqrt(xg.pow(2).mean({-1}, true) + 1e-5))).backward(dy);
                  },
                  [&] {
                    at::Tensor xg = leaf(x), wg = leaf(w);
                    nn::rms_norm_fp32(xg, wg, 1e-5, false).backward(dy);
                  }};

  const nn::RotaryEmbedding rope(D, 10000.0);
  const auto [cos, sin] = rope.cos_sin(at::arange(T, at::kLong).unsqueeze(0).expand({B, T}).contiguous(), at::kFloat);
  const at::Tensor q = at::randn({B, T, heads, D}), dq = at::randn({B, heads, T, D});
  const Pair rotary{"rotary q [2, 8, 256, 64]",
                    [&] {
                      at::Tensor qg = leaf(q);
                      const at::Tensor v = qg.transpose(1, 2);
                      (v * cos.unsqueeze(1) + nn::rotate_half(v) * sin.unsqueeze(1)).backward(dq);
                    },
                    [&] {
                      at::Tensor qg = leaf(q);
                      nn::rotary_fp32(qg.transpose(1, 2), cos, sin).backward(dq);
                    }};

  const at::Tensor logits = at::randn({B * T, V}) * 3.0;
  const at::Tensor labels = at::randint(V, {B * T}, at::kLong);
  const Pair ce{"cross-entropy [512, 8192]",
                [&] {
                  at::Tensor lg = leaf(logits);
                  at::nll_loss(at::log_softmax(lg, -1), labels, {}, at::Reduction::Sum, loss::kIgnoreIndex).backward();
                },
                [&] {
                  at::Tensor lg = leaf(logits);
                  loss::cross_entropy_sum(lg, labels).sum.backward();
                }};

  for (const Pair* p : {&norm, &rotary, &ce}) {
    std::vector<double> a, b;
    for (int r = 0; r <= rounds; ++r) {
      const double ta = seconds_of(p->composition), tb = seconds_of(p->kernel);
      if (r > 0) {  // round 0 warms up
        a.push_back(ta);
        b.push_back(tb);
      }
    }
    fmt::print("{:<28} fwd+bwd median: ATen composition {:.3f} ms, kernel {:.3f} ms (x{:.2f})\n", p->name,
               1000 * median(a), 1000 * median(b), median(b) / median(a));
  }
  return 0;
}
