// Attention on a GPU, as Attention chooses it there (docs/gpu.md): the
// library's fused kernel for causal rows, also with a sliding window or
// packed documents as a mask or one document at a time (host ids,
// nn/document_runs.h), a window short against the row in bands of queries
// (nn/window_bands.h: T 301 with windows of 64 and 17), and tessel's tiled
// kernel on ATen's CUDA ops for
// softcapping. Each against causal_attention in float64 on the CPU,
// forward and backward, float32 on the device, odd sizes, grouped K/V heads.
// And the library's variable-length flash kernel (bf16, packed documents and
// windows in one call, nn/varlen_attention.h), which Attention takes under
// TESSEL_DEVICE_KERNELS=fused.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <torch/csrc/autograd/function.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpu/gpu_world.h"
#include "gpu/kernel_choice.h"
#include "nn/attention.h"
#include "nn/document_runs.h"
#include "nn/library_attention.h"
#include "nn/tiled_attention.h"
#include "nn/varlen_attention.h"
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

// The library's variable-length flash kernel (bf16 only: nn/varlen_attention.h)
// with packed documents and windows: within bf16's error of causal_attention
// in float64, forward and backward, and no further from it than the same
// attention in bf16 through the library's masked kernel (itself within bf16's
// error: grouped K/V heads repeated for it, nn/library_attention.cpp).
TEST(GpuAttention, VarlenFlashAgainstFloat64) {
  TESSEL_REQUIRE_GPU();
  const int64_t B = 2, Hq = 6, Hkv = 2, T = 301, D = 64;
  const double scale = 0.125;
  const c10::Device gpu = gpu_world()->device;
  ASSERT_TRUE(nn::library_varlen_attention_fits(at::empty({1, 1, 1, D}, at::TensorOptions().device(gpu).dtype(at::kBFloat16))));
  const at::Tensor docs = (at::arange(T, at::kLong).unsqueeze(0) + at::tensor({0, 40}, at::kLong).unsqueeze(1))
                              .div(97, "floor");
  struct VarlenCase {
    const char* name;
    bool documents;
    std::optional<int64_t> window;
  };
  for (const VarlenCase& c : {VarlenCase{"documents", true, {}}, VarlenCase{"window 64", false, 64},
                              VarlenCase{"documents and window 17", true, 17}}) {
    SCOPED_TRACE(c.name);
    at::manual_seed(7);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor q0 = at::randn({B, Hq, T, D}, f64), k0 = at::randn({B, Hkv, T, D}, f64);
    const at::Tensor v0 = at::randn({B, Hkv, T, D}, f64), dout = at::randn({B, Hq, T, D}, f64);
    const at::Tensor ids = c.documents ? docs : at::Tensor();
    at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    const at::Tensor ref = nn::causal_attention(q, k, v, scale, c.window, std::nullopt, ids);
    ref.backward(dout);
    // Max error of out, dq, dk, dv against float64, with `attend` in bf16.
    auto errors = [&](const std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>& attend) {
      auto on_gpu = [&](const at::Tensor& t) { return t.to(gpu, at::kBFloat16).requires_grad_(); };
      at::Tensor gq = on_gpu(q0), gk = on_gpu(k0), gv = on_gpu(v0);
      const at::Tensor out = attend(gq, gk, gv);
      out.backward(dout.to(gpu, at::kBFloat16));
      std::vector<double> e;
      for (const auto& [got, want] : std::vector<std::pair<at::Tensor, at::Tensor>>{
               {out, ref}, {gq.grad(), q.grad()}, {gk.grad(), k.grad()}, {gv.grad(), v.grad()}}) {
        e.push_back((got.to(at::kCPU, at::kDouble) - want).abs().max().item<double>() /
                    std::max(1.0, want.abs().max().item<double>()));
      }
      return e;
    };
    const nn::DocumentRuns runs = c.documents ? *nn::document_runs(docs) : nn::whole_rows(B, T);
    const std::vector<double> varlen = errors([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& d) {
      return nn::attend_varlen(a, b, d, runs, c.window,
                               [&](const at::Tensor& x, const at::Tensor& y, const at::Tensor& z,
                                   const at::Tensor& lengths, int64_t longest, std::optional<int64_t> window) {
                                 return nn::library_varlen_attention(x, y, z, lengths, longest, window, scale);
                               });
    });
    const at::Tensor gdocs = c.documents ? docs.to(gpu) : at::Tensor();
    const std::vector<double> masked = errors([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& d) {
      return nn::library_causal_attention(a, b, d, scale, c.window, gdocs);
    });
    const char* what[] = {"out", "dq", "dk", "dv"};
    for (size_t i = 0; i < varlen.size(); ++i) {
      std::printf("varlen %s %s: relative error %.2e (masked bf16 %.2e)\n", c.name, what[i], varlen[i], masked[i]);
      EXPECT_LE(varlen[i], 5e-2) << what[i];
      EXPECT_LE(masked[i], 5e-2) << what[i] << " (masked, K/V repeated to the query's heads)";
      EXPECT_LE(varlen[i], 2.0 * masked[i] + 5e-3) << what[i];
    }
  }
}

// The Attention module takes that kernel for packed rows and for a window in
// bf16 when TESSEL_DEVICE_KERNELS=fused, and not otherwise.
TEST(GpuAttention, TheModuleTakesVarlenWhenSwitchedOn) {
  TESSEL_REQUIRE_GPU();
  TESSEL_REQUIRE_KERNELS();  // `fused` switches the rotary kernel on too
  const c10::Device gpu = gpu_world()->device;
  const auto bf16 = at::TensorOptions().device(gpu).dtype(at::kBFloat16);
  // Whether the module's output graph reaches the flash kernel's backward.
  auto uses_flash = [](const at::Tensor& out) {
    std::vector<torch::autograd::Node*> unvisited{out.grad_fn().get()};
    std::set<torch::autograd::Node*> seen;
    while (!unvisited.empty()) {
      torch::autograd::Node* n = unvisited.back();
      unvisited.pop_back();
      if (n == nullptr || !seen.insert(n).second) continue;
      // The variable-length op's node (SDPA's own flash path records
      // ScaledDotProductFlashAttentionBackward0 instead).
      if (n->name() == "FlashAttentionBackward0") return true;
      for (const auto& edge : n->next_edges()) unvisited.push_back(edge.function.get());
    }
    return false;
  };
  for (const bool window : {false, true}) {
    nn::AttentionOptions o;
    o.hidden_size = 128;
    o.num_heads = 4;
    o.num_kv_heads = 2;
    o.head_dim = 32;
    if (window) o.sliding_window = 16;
    auto attention = std::make_shared<nn::Attention>(o, bf16);
    for (auto& p : attention->named_parameters()) p.value().set_data(at::randn(p.value().sizes(), bf16) * 0.05);
    const int64_t T = 96;
    const at::Tensor x = at::randn({2, T, 128}, bf16).requires_grad_();
    const at::Tensor cos = at::ones({2, T, 32}, bf16), sin = at::zeros({2, T, 32}, bf16);
    // Host ids: two documents of 48 per row (what train_step leaves on the host).
    const at::Tensor ids = at::arange(T, at::kLong).div(48, "floor").unsqueeze(0).expand({2, T}).contiguous();
    const nn::Tensors inputs = window ? nn::Tensors{x, cos, sin} : nn::Tensors{x, cos, sin, ids};
    EXPECT_FALSE(uses_flash(attention->call(inputs)[0])) << "window " << window << ", switch unset";
    const KernelChoice fused("fused");
    EXPECT_TRUE(uses_flash(attention->call(inputs)[0])) << "window " << window << ", fused";
  }
}

}  // namespace
}  // namespace tessel::gpu_testing
