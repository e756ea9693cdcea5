// tessel's CUDA kernels (src/nn/cuda/fused_kernels.cuh) run by threads on
// the host (cuda_emulation.h), so that their indexing, block reductions,
// grid-stride loops and formulas are checked where no GPU is: RMSNorm (both
// weight styles; several rows per block and several partial sums of the
// weight's gradient), rotary (heads with the projections' strides, cos/sin
// per batch or shared) and the SiLU product, forward and backward, in
// float32, bfloat16 and float16 storage, odd sizes, each against the formula
// in float64 by autograd on the same rounded inputs; and in bf16 the
// forward against ATen's own bf16 composition (the path the kernels
// replace): rotary to the bit, RMSNorm within one ulp (its sum of squares
// is ordered differently), the SiLU product within two (below). The same kernels on a GPU: tests/gpu/device_kernels_test.cpp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn/cuda/fused_kernels.h"

namespace tessel::nn::cuda_kernels {
namespace {

struct StorageCase {
  at::ScalarType dtype;
  Storage storage;
  double tolerance;  // of the largest magnitude: a few roundings of the storage type
};

const std::vector<StorageCase>& storages() {
  static const std::vector<StorageCase> all = {{at::kFloat, Storage::Float32, 2e-5},
                                               {at::kBFloat16, Storage::BFloat16, 2e-2},
                                               {at::kHalf, Storage::Float16, 3e-3}};
  return all;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double tolerance, const std::string& what) {
  const double err = (got.to(at::kDouble) - want).abs().max().item<double>();
  const double size = want.abs().max().item<double>();
  EXPECT_LE(err, tolerance * std::max(1.0, size)) << what << " (largest |want| " << size << ")";
}

// The largest difference in bf16 ulps (the spacing of bf16 values at each
// element of `want`: 2^(exponent - 7)).
double bf16_ulps_apart(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  const at::Tensor ulp = at::pow(2.0, at::floor(at::log2(w.abs().clamp_min(1e-30))) - 7);
  return ((g - w).abs() / ulp).max().item<double>();
}

TEST(KernelEmulation, RmsNormForwardAndBackward) {
  at::manual_seed(21);
  for (const StorageCase& s : storages()) {
    for (const bool offset : {false, true}) {
      for (const auto& [rows, dim, partials] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
               {5, 33, 1}, {9, 1000, 4}, {4, 300, 4}, {33, 300, 2}}) {
        const std::string what = std::string(c10::toString(s.dtype)) + (offset ? " gemma " : " llama ") +
                                 std::to_string(rows) + "x" + std::to_string(dim) + " partials " +
                                 std::to_string(partials);
        const at::Tensor x = (at::randn({rows, dim}) * 3).to(s.dtype);
        const at::Tensor w = (at::rand({dim}) + 0.5).to(s.dtype);
        const at::Tensor dy = at::randn({rows, dim}).to(s.dtype);
        const double eps = 1e-6;
        at::Tensor y = at::empty_like(x), rstd = at::empty({rows}, at::kFloat);
        rms_norm_forward(s.storage, x.data_ptr(), w.data_ptr(), y.data_ptr(), rstd.data_ptr<float>(), rows, dim,
                         static_cast<float>(eps), offset, nullptr);
        at::Tensor dx = at::empty_like(x), partial = at::empty({partials, dim}, at::kFloat);
        rms_norm_backward(s.storage, x.data_ptr(), w.data_ptr(), rstd.data_ptr<float>(), dy.data_ptr(),
                          dx.data_ptr(), partial.data_ptr<float>(), partials, rows, dim, offset, nullptr);

        const at::Tensor x64 = x.to(at::kDouble).requires_grad_(), w64 = w.to(at::kDouble).requires_grad_();
        const at::Tensor normed = x64 * at::rsqrt(x64.pow(2).mean({-1}, true) + eps);
        const at::Tensor ref = offset ? normed * (w64 + 1) : normed * w64;
        ref.backward(dy.to(at::kDouble));
        expect_close(y, ref.detach(), s.tolerance, what + " y");
        expect_close(rstd, at::rsqrt(x64.detach().pow(2).mean({-1}) + eps), 1e-6, what + " rstd");
        expect_close(dx, x64.grad(), s.tolerance, what + " dx");
        expect_close(partial.sum(0), w64.grad(), s.tolerance, what + " dw");
        if (s.dtype == at::kBFloat16) {
          // What RMSNorm computes in bf16 without the kernel (nn/rms_norm.cpp).
          const at::Tensor x32 = x.to(at::kFloat);
          const at::Tensor n = x32 * at::rsqrt(x32.pow(2).mean({-1}, true) + eps);
          const at::Tensor aten = offset ? (n * (w.to(at::kFloat) + 1.0)).to(at::kBFloat16) : w * n.to(at::kBFloat16);
          EXPECT_LE(bf16_ulps_apart(y, aten), 1.0) << what << " against ATen's bf16 composition";
        }
      }
    }
  }
}

TEST(KernelEmulation, RotaryForwardAndBackward) {
  at::manual_seed(22);
  const int64_t B = 2, H = 3, T = 9, D = 10;
  for (const StorageCase& s : storages()) {
    for (const bool per_batch : {true, false}) {
      const std::string what = std::string(c10::toString(s.dtype)) + (per_batch ? " cos [B,T,D]" : " cos [T,D]");
      // Heads as the projections make them: [B, T, H, D] seen as [B, H, T, D].
      const at::Tensor x = at::randn({B, T, H, D}).to(s.dtype).transpose(1, 2);
      const std::vector<int64_t> angle_shape =
          per_batch ? std::vector<int64_t>{B, T, D / 2} : std::vector<int64_t>{T, D / 2};
      const at::Tensor angles = at::rand(angle_shape) * 6;
      const at::Tensor emb = at::cat({angles, angles}, -1);
      const at::Tensor cos = emb.cos().to(s.dtype).contiguous(), sin = emb.sin().to(s.dtype).contiguous();
      const at::Tensor dy = at::randn({B, H, T, D}).to(s.dtype);
      const RotaryShape shape{B, H, T, D, x.stride(0), x.stride(1), x.stride(2), per_batch ? cos.stride(0) : 0};
      at::Tensor y = at::empty({B, H, T, D}, x.options());
      rotary(s.storage, x.data_ptr(), cos.data_ptr(), sin.data_ptr(), y.data_ptr(), shape, false, nullptr);
      at::Tensor dx = at::empty({B, H, T, D}, x.options());
      const RotaryShape back{B, H, T, D, H * T * D, T * D, D, shape.cos_batch_stride};
      rotary(s.storage, dy.data_ptr(), cos.data_ptr(), sin.data_ptr(), dx.data_ptr(), back, true, nullptr);

      auto broadcast = [&](const at::Tensor& t) { return per_batch ? t.unsqueeze(1) : t; };
      auto rotate_half = [](const at::Tensor& t) {
        const int64_t half = t.size(-1) / 2;
        return at::cat({-t.narrow(-1, half, half), t.narrow(-1, 0, half)}, -1);
      };
      const at::Tensor x64 = x.to(at::kDouble).requires_grad_();
      const at::Tensor c64 = broadcast(cos.to(at::kDouble)), s64 = broadcast(sin.to(at::kDouble));
      const at::Tensor ref = x64 * c64 + rotate_half(x64) * s64;
      ref.backward(dy.to(at::kDouble));
      expect_close(y, ref.detach(), s.tolerance, what + " y");
      expect_close(dx, x64.grad(), s.tolerance, what + " dx");
      if (s.dtype == at::kBFloat16) {
        // nn::apply_rotary's composition in bf16: the same roundings, so the same bits.
        const at::Tensor aten = x * broadcast(cos) + rotate_half(x) * broadcast(sin);
        EXPECT_TRUE(at::equal(y, aten)) << what << ": " << bf16_ulps_apart(y, aten) << " roundings from ATen's bf16";
      }
    }
  }
}

TEST(KernelEmulation, SwiGluForwardAndBackward) {
  at::manual_seed(23);
  for (const StorageCase& s : storages()) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{37, 101}, {3, 7}}) {
      const std::string what = std::string(c10::toString(s.dtype)) + " " + std::to_string(shape.back());
      const at::Tensor g = (at::randn(shape) * 4).to(s.dtype), u = at::randn(shape).to(s.dtype);
      const at::Tensor dh = at::randn(shape).to(s.dtype);
      at::Tensor h = at::empty_like(g), dg = at::empty_like(g), du = at::empty_like(u);
      swiglu_forward(s.storage, g.data_ptr(), u.data_ptr(), h.data_ptr(), g.numel(), nullptr);
      swiglu_backward(s.storage, g.data_ptr(), u.data_ptr(), dh.data_ptr(), dg.data_ptr(), du.data_ptr(), g.numel(),
                      nullptr);
      const at::Tensor g64 = g.to(at::kDouble).requires_grad_(), u64 = u.to(at::kDouble).requires_grad_();
      const at::Tensor ref = g64 * at::sigmoid(g64) * u64;
      ref.backward(dh.to(at::kDouble));
      expect_close(h, ref.detach(), s.tolerance, what + " h");
      expect_close(dg, g64.grad(), s.tolerance, what + " dg");
      expect_close(du, u64.grad(), s.tolerance, what + " du");
      if (s.dtype == at::kBFloat16) {
        // ATen's CPU silu takes e^x from SLEEF, which can differ from expf
        // (the kernel's, and ATen's CUDA silu's) in the last float bit: silu
        // then rounds to the neighbouring bf16 and the product lands up to
        // two ulps away. Equal roundings, not equal exponentials, is the claim.
        EXPECT_LE(bf16_ulps_apart(h, at::silu(g) * u), 2.0) << what << " against ATen's bf16 composition";
      }
    }
  }
}

}  // namespace
}  // namespace tessel::nn::cuda_kernels
