// RMSNorm, rotary embeddings, attention and the gated MLP against naive
// formulas written out element by element here (double precision loops).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace tessel::nn {
namespace {

const auto kF32 = at::TensorOptions().dtype(at::kFloat);
const auto kF64 = at::TensorOptions().dtype(at::kDouble);

at::Generator seeded(uint64_t seed) {
  auto g = at::detail::createCPUGenerator(seed);
  return g;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double rtol, double atol) {
  ASSERT_EQ(got.sizes(), want.sizes());
  at::Tensor g = got.to(at::kDouble).contiguous(), w = want.to(at::kDouble).contiguous();
  auto gp = g.data_ptr<double>(), wp = w.data_ptr<double>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    ASSERT_NEAR(gp[i], wp[i], atol + rtol * std::abs(wp[i])) << "at flat index " << i;
  }
}

TEST(RMSNorm, BothStylesMatchRowFormula) {
  auto gen = seeded(1);
  at::Tensor x = at::randn({2, 3, 8}, gen, kF32);
  at::Tensor w = at::randn({8}, gen, kF32);
  const double eps = 1e-5;
  for (auto style : {RMSNormStyle::Llama, RMSNormStyle::Gemma}) {
    auto norm = std::make_shared<RMSNorm>(8, eps, style, kF32);
    norm->replace_parameter("weight", w.clone());
    at::Tensor y = norm->call(x);
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    at::Tensor want = at::empty({2, 3, 8}, kF64);
    auto xa = x.accessor<float, 3>();
    auto wa = w.accessor<float, 1>();
    auto out = want.accessor<double, 3>();
    for (int b = 0; b < 2; ++b) {
      for (int t = 0; t < 3; ++t) {
        double ss = 0;
        for (int i = 0; i < 8; ++i) ss += double(xa[b][t][i]) * xa[b][t][i];
        double inv = 1.0 / std::sqrt(ss / 8 + eps);
        for (int i = 0; i < 8; ++i) {
          double scale = style == RMSNormStyle::Gemma ? 1.0 + wa[i] : wa[i];
          out[b][t][i] = xa[b][t][i] * inv * scale;
        }
      }
    }
    expect_close(y, want, 1e-5, 1e-6);
  }
}

TEST(RMSNorm, LlamaStyleCastsBeforeScaling) {
  // bf16 input: HF casts the normalised value to bf16 before multiplying by w.
  auto norm = std::make_shared<RMSNorm>(4, 1e-6, RMSNormStyle::Llama, kF32.dtype(at::kBFloat16));
  norm->replace_parameter("weight", at::full({4}, 3.0, kF32.dtype(at::kBFloat16)));
  at::Tensor x = at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).to(at::kBFloat16);
  at::Tensor x32 = x.to(at::kFloat);
  at::Tensor normed = (x32 * at::rsqrt(x32.pow(2).mean() + 1e-6)).to(at::kBFloat16);
  at::Tensor want = normed * 3.0;
  EXPECT_TRUE(at::equal(norm->call(x), want));
}

// Independent rotation: pair (j, j + D/2) rotated by angle p * f_j.
at::Tensor naive_rotary(const at::Tensor& x, const std::vector<double>& freqs,
                        const std::vector<int64_t>& positions) {
  at::Tensor out = at::empty(x.sizes(), kF64);
  auto xa = x.accessor<double, 4>();
  auto oa = out.accessor<double, 4>();
  const int64_t half = x.size(3) / 2;
  for (int64_t b = 0; b < x.size(0); ++b)
    for (int64_t h = 0; h < x.size(1); ++h)
      for (int64_t t = 0; t < x.size(2); ++t)
        for (int64_t j = 0; j < half; ++j) {
          double a = static_cast<double>(positions[t]) * freqs[j];
          double x1 = xa[b][h][t][j], x2 = xa[b][h][t][j + half];
          oa[b][h][t][j] = x1 * std::cos(a) - x2 * std::sin(a);
          oa[b][h][t][j + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
  return out;
}

TEST(Rotary, MatchesPairwiseRotationWithPositionIds) {
  const int64_t D = 8;
  const double theta = 10000.0;
  RotaryEmbedding rope(D, theta);
  std::vector<double> freqs;
  for (int j = 0; j < D / 2; ++j) freqs.push_back(std::pow(theta, -2.0 * j / D));
  std::vector<int64_t> positions = {0, 1, 2, 7, 30};
  at::Tensor pos = at::tensor(positions, at::kLong).unsqueeze(0);  // [1, T]
  auto gen = seeded(2);
  at::Tensor x = at::randn({1, 2, 5, D}, gen, kF64);
  auto [cos, sin] = rope.cos_sin(pos, at::kDouble);
  EXPECT_EQ(cos.sizes(), (std::vector<int64_t>{1, 5, D}));
  // Angles are formed in fp32 (as HF), so allow fp32 rounding of p * f.
  expect_close(apply_rotary(x, cos, sin), naive_rotary(x, freqs, positions), 1e-5, 1e-5);
}

TEST(Rotary, LinearScalingDividesAllFrequencies) {
  RotaryEmbedding plain(16, 1e6), scaled(16, 1e6, RopeScaling{"linear", 8.0});
  expect_close(scaled.inv_freq(), plain.inv_freq() / 8.0, 1e-6, 0);
}

// Llama-3 bands from shared/reference/llama3_rope_scaling.md: with theta
// 500000, L 8192, l 1, h 4 a head_dim of 128 has 29 unchanged, 6 blended and 29
// divided frequencies; head_dim 64 has 15, 3 and 14.
TEST(Rotary, Llama3ScalingBandsAndBlend) {
  for (auto [dim, keep, blend, divided] :
       std::vector<std::tuple<int64_t, int, int, int>>{{128, 29, 6, 29}, {64, 15, 3, 14}}) {
    const double s = 8.0;
    RotaryEmbedding rope(dim, 500000.0, RopeScaling{"llama3", s, 1.0, 4.0, 8192});
    auto f = rope.inv_freq().accessor<float, 1>();
    int n_keep = 0, n_div = 0, n_blend = 0;
    for (int64_t i = 0; i < dim / 2; ++i) {
      double orig = std::pow(500000.0, -2.0 * i / dim);
      double got = f[i];
      if (std::abs(got - orig) <= 1e-6 * orig) {
        ++n_keep;
      } else if (std::abs(got - orig / s) <= 1e-6 * orig / s) {
        ++n_div;
      } else {
        ++n_blend;
        double wavelen = 2 * std::numbers::pi / orig;
        double r = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
        EXPECT_GT(r, 0.0);
        EXPECT_LT(r, 1.0);
        EXPECT_NEAR(got, (1 - r) * orig / s + r * orig, 1e-6 * orig);
      }
    }
    EXPECT_EQ(n_keep, keep) << "head_dim " << dim;
    EXPECT_EQ(n_blend, blend) << "head_dim " << dim;
    EXPECT_EQ(n_div, divided) << "head_dim " << dim;
  }
  EXPECT_THROW(RotaryEmbedding(8, 1e4, RopeScaling{"yarn", 2.0}), Error);
}

// softmax(q k^T * scale + mask) v for every query head, kv head h / group.
// docs (optional, docs[b][t]): query i sees key j only in its own document.
at::Tensor naive_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, std::optional<int64_t> window,
                           std::optional<double> cap,
                           const std::vector<std::vector<int64_t>>* docs = nullptr) {
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3), Hkv = k.size(1);
  const int64_t group = Hq / Hkv;
  at::Tensor out = at::zeros(q.sizes(), kF64);
  auto qa = q.accessor<double, 4>();
  auto ka = k.accessor<double, 4>();
  auto va = v.accessor<double, 4>();
  auto oa = out.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t kvh = h / group;
        std::vector<double> s(T, -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          if (window && i - j >= *window) continue;
          if (docs && (*docs)[b][i] != (*docs)[b][j]) continue;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qa[b][h][i][d] * ka[b][kvh][j][d];
          dot *= scale;
          if (cap) dot = *cap * std::tanh(dot / *cap);
          s[j] = dot;
          mx = std::max(mx, dot);
        }
        double z = 0;
        for (int64_t j = 0; j < T; ++j) z += std::isinf(s[j]) ? 0 : std::exp(s[j] - mx);
        for (int64_t j = 0; j < T; ++j) {
          if (std::isinf(s[j])) continue;
          double p = std::exp(s[j] - mx) / z;
          for (int64_t d = 0; d < D; ++d) oa[b][h][i][d] += p * va[b][kvh][j][d];
        }
      }
  return out;
}

TEST(Attention, CoreMatchesNaiveLoopsForGqaWindowAndSoftcap) {
  auto gen = seeded(3);
  auto rn = [&](std::vector<int64_t> shape) {
    return at::randn(shape, gen, kF64);
  };
  at::Tensor q = rn({2, 6, 9, 4}), k = rn({2, 2, 9, 4}), v = rn({2, 2, 9, 4});
  struct Case {
    std::optional<int64_t> window;
    std::optional<double> cap;
  };
  for (const Case& c : {Case{std::nullopt, std::nullopt}, Case{3, std::nullopt}, Case{1, std::nullopt},
                        Case{std::nullopt, 0.7}, Case{4, 2.0}}) {
    at::Tensor got = causal_attention(q, k, v, 0.37, c.window, c.cap);
    expect_close(got, naive_attention(q, k, v, 0.37, c.window, c.cap), 1e-10, 1e-12);
  }
  // One kv head (Gemma3-1B) and MHA (group 1).
  at::Tensor k1 = rn({2, 1, 9, 4}), v1 = rn({2, 1, 9, 4});
  expect_close(causal_attention(q, k1, v1, 0.5), naive_attention(q, k1, v1, 0.5, {}, {}), 1e-10, 1e-12);
  at::Tensor k6 = rn({2, 6, 9, 4}), v6 = rn({2, 6, 9, 4});
  expect_close(causal_attention(q, k6, v6, 0.5), naive_attention(q, k6, v6, 0.5, {}, {}), 1e-10, 1e-12);
  EXPECT_THROW(causal_attention(q, rn({2, 4, 9, 4}), rn({2, 4, 9, 4}), 0.5), Error);
}

// Packed rows: with document_ids a query sees only earlier keys of its own
// document (padding, -1, only padding), combined with the window and softcap;
// a row that is one document gives bit-identical results to no document_ids.
TEST(Attention, DocumentIdsMakeTheMaskBlockDiagonal) {
  auto gen = seeded(5);
  auto rn = [&](std::vector<int64_t> shape) { return at::randn(shape, gen, kF64); };
  const int64_t T = 12;
  at::Tensor q = rn({2, 6, T, 4}), k = rn({2, 2, T, 4}), v = rn({2, 2, T, 4});
  const std::vector<std::vector<int64_t>> docs = {{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, -1, -1},
                                                  {0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, -1}};
  const at::Tensor doc_ids =
      at::stack({at::tensor(docs[0], at::kLong), at::tensor(docs[1], at::kLong)});
  struct Case {
    std::optional<int64_t> window;
    std::optional<double> cap;
  };
  for (const Case& c : {Case{std::nullopt, std::nullopt}, Case{3, std::nullopt}, Case{2, 0.7}}) {
    at::Tensor got = causal_attention(q, k, v, 0.37, c.window, c.cap, doc_ids);
    expect_close(got, naive_attention(q, k, v, 0.37, c.window, c.cap, &docs), 1e-10, 1e-12);
    // The mask matters: without it the second document sees the first.
    const at::Tensor plain = causal_attention(q, k, v, 0.37, c.window, c.cap);
    EXPECT_GT((got - plain).abs().max().item<double>(), 1e-3);
  }
  const at::Tensor one_document = at::zeros({2, T}, at::kLong);
  EXPECT_TRUE(at::equal(causal_attention(q, k, v, 0.37, 3, 0.7, one_document),
                        causal_attention(q, k, v, 0.37, 3, 0.7)));
  EXPECT_THROW(causal_attention(q, k, v, 0.37, {}, {}, at::zeros({2, T - 1}, at::kLong)), Error);
  EXPECT_THROW(causal_attention(q, k, v, 0.37, {}, {}, at::zeros({2, T}, kF64)), Error);
}

// The module with its weights split by heads into two "TP ranks": q/k/v rows
// of the rank's heads, o_proj columns of the same heads. Each rank's output is
// a partial sum; together they equal the unsharded output. Checks that head
// counts come from the weights, not from the options.
TEST(Attention, HeadShardsOfTheWeightsSumToTheFullOutput) {
  AttentionOptions o;
  o.hidden_size = 12;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.head_dim = 4;
  o.qk_norm = true;
  auto gen = seeded(4);
  auto attn = std::make_shared<Attention>(o, kF64);
  for (auto& p : attn->named_parameters()) {
    p.value().set_data(at::randn(p.value().sizes(), gen, kF64));
  }
  at::Tensor x = at::randn({2, 5, 12}, gen, kF64);
  RotaryEmbedding rope(4, 10000.0);
  auto [cos, sin] = rope.cos_sin(at::arange(5, at::kLong).unsqueeze(0).expand({2, 5}), at::kDouble);
  at::Tensor full = attn->call(Tensors{x, cos, sin})[0];

  auto shard = [&](int rank) {
    auto a = std::make_shared<Attention>(o, kF64);
    for (auto& p : attn->named_parameters()) {
      auto dot = p.key().find('.');
      auto* child = dynamic_cast<Module*>(a->named_children()[p.key().substr(0, dot)].get());
      std::string pname = p.key().substr(dot + 1);
      at::Tensor w = p.value();
      if (p.key().rfind("q_proj", 0) == 0) w = w.narrow(0, rank * 8, 8);
      if (p.key().rfind("k_proj", 0) == 0 || p.key().rfind("v_proj", 0) == 0) w = w.narrow(0, rank * 4, 4);
      if (p.key().rfind("o_proj", 0) == 0) w = w.narrow(1, rank * 8, 8);
      child->replace_parameter(pname, w.contiguous());
    }
    return a->call(Tensors{x, cos, sin})[0];
  };
  expect_close(shard(0) + shard(1), full, 1e-10, 1e-12);
}

TEST(GatedMLP, ActivationsMatchFormulas) {
  at::Tensor x = at::linspace(-4, 4, 17, kF64);
  auto xa = x.accessor<double, 1>();
  at::Tensor silu = activate(x, Activation::SiLU), gelu = activate(x, Activation::GeluTanh);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double t = xa[i];
    EXPECT_NEAR(silu[i].item<double>(), t / (1 + std::exp(-t)), 1e-12);
    double g = 0.5 * t * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (t + 0.044715 * t * t * t)));
    EXPECT_NEAR(gelu[i].item<double>(), g, 1e-12);
  }
  EXPECT_EQ(parse_activation("gelu_pytorch_tanh"), Activation::GeluTanh);
  EXPECT_THROW(parse_activation("relu"), UsageError);
}

TEST(GatedMLP, ComputesDownOfActGateTimesUp) {
  auto mlp = std::make_shared<GatedMLP>(3, 5, Activation::SiLU, false, kF64);
  auto gen = seeded(5);
  for (auto& p : mlp->named_parameters()) {
    p.value().set_data(at::randn(p.value().sizes(), gen, kF64));
  }
  at::Tensor x = at::randn({4, 3}, gen, kF64);
  auto params = mlp->named_parameters();
  at::Tensor g = x.matmul(params["gate_proj.weight"].t()), u = x.matmul(params["up_proj.weight"].t());
  at::Tensor want = (g * at::sigmoid(g) * u).matmul(params["down_proj.weight"].t());
  expect_close(mlp->call(x), want, 1e-12, 1e-12);
}

}  // namespace
}  // namespace tessel::nn
