// Attention on a GPU, as Attention chooses it there (docs/gpu.md): the
// library's fused kernel for causal rows, also with a sliding window or
// packed documents as a mask or one document at a time (host ids,
// nn/document_runs.h), a window short against the row in bands of queries
// (nn/window_bands.h: T 301 with windows of 64 and 17), and tessel's tiled
// kernel on ATen's CUDA ops for
// softcapping. Each against causal_attention in float64 on the CPU,
// forward and backward, float32 on the device, odd sizes, grouped K/V heads.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "gpu/gpu_world.h"
#include "nn/attention.h"
#include "nn/document_runs.h"
#include "nn/library_attention.h"
#include "nn/tiled_attention.h"
#include "nn/window_bands.h"

namespace tessel::gpu_testing {
namespace {

struct Case {
  std::string name;
  std::optional<int64_t> window;
  bool documents = false;
  std::optional<double> softcap;
  bool per_document = false;  // the documents' runs through the causal kernel, not a mask
};

void check(const Case& c) {
  const int64_t B = 2, Hq = 6, Hkv = 2, T = 301, D = 40;
  const double scale = 0.2;
  at::manual_seed(5);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q0 = at::randn({B, Hq, T, D}, f64), k0 = at::randn({B, Hkv, T, D}, f64);
  const at::Tensor v0 = at::randn({B, Hkv, T, D}, f64), dout = at::randn({B, Hq, T, D}, f64);
  at::Tensor docs;
  if (c.documents)
    docs = (at::arange(T, at::kLong).unsqueeze(0) + at::tensor({0, 40}, at::kLong).unsqueeze(1))
               .div(97, "floor");

  at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(),
             v = v0.clone().requires_grad_();
  const at::Tensor ref = nn::causal_attention(q, k, v, scale, c.window, c.softcap, docs);
  ref.backward(dout);

  const c10::Device gpu = gpu_world()->device;
  auto on_gpu = [&](const at::Tensor& t) { return t.to(gpu, at::kFloat).requires_grad_(); };
  at::Tensor gq = on_gpu(q0), gk = on_gpu(k0), gv = on_gpu(v0);
  const at::Tensor gdocs = docs.defined() ? docs.to(gpu) : docs;
  at::Tensor out;
  if (c.per_document) {
    const auto runs = nn::document_runs(docs);
    ASSERT_TRUE(runs.has_value());
    const nn::CausalAttentionCore core = [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& d) {
      return c.softcap ? nn::tiled_causal_attention(a, b, d, scale, c.window, c.softcap)
                       : nn::library_causal_attention(a, b, d, scale, c.window);
    };
    out = nn::attend_per_document(gq, gk, gv, *runs, core);
  } else {
    out = c.softcap ? nn::tiled_causal_attention(gq, gk, gv, scale, c.window, c.softcap, gdocs)
                    : nn::library_causal_attention(gq, gk, gv, scale, c.window, gdocs);
  }
  out.backward(dout.to(gpu, at::kFloat));
  auto expect_close = [&](const at::Tensor& got, const at::Tensor& want, const char* what) {
    const double err = (got.to(at::kCPU, at::kDouble) - want).abs().max().item<double>();
    const double size = want.abs().max().item<double>();
    EXPECT_LE(err, 2e-5 * std::max(1.0, size)) << c.name << " " << what;
  };
  expect_close(out, ref, "out");
  expect_close(gq.grad(), q.grad(), "dq");
  expect_close(gk.grad(), k.grad(), "dk");
  expect_close(gv.grad(), v.grad(), "dv");
}

TEST(GpuAttention, EveryMaskAgainstFloat64) {
  TESSEL_REQUIRE_GPU();
  ASSERT_TRUE(nn::library_attention_available());
  ASSERT_TRUE(nn::window_bands_pay(301, 64) && nn::window_bands_pay(301, 17) && !nn::window_bands_pay(301, 151));
  for (const Case& c :
       {Case{"causal", {}, false, {}}, Case{"window 64, in bands", 64, false, {}},
        Case{"window 151, one mask", 151, false, {}},
        Case{"documents", {}, true, {}}, Case{"window and documents", 17, true, {}},
        Case{"softcap", {}, false, 30.0}, Case{"softcap, window, documents", 33, true, 50.0},
        Case{"documents, per document", {}, true, {}, true}, Case{"window, per document", 17, true, {}, true},
        Case{"softcap, window, per document", 33, true, 50.0, true}}) {
    check(c);
  }
}

}  // namespace
}  // namespace tessel::gpu_testing
