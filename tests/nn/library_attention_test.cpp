// libtorch's fused attention (nn/library_attention.h), where the build has
// it, against causal_attention (the plain ATen composition, differentiated
// by autograd), forward and backward: float64 rows with grouped K/V heads,
// and float32 views laid out as Attention passes them; sliding windows as
// one mask and in bands. Builds against
// libtorch 1.13 have no such kernel: there the availability check is what
// is tested (Attention then keeps the tiled kernel).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include <optional>
#include <string>

#include "nn/attention.h"
#include "nn/library_attention.h"
#include "nn/window_bands.h"
#include "support/tensor_close.h"

namespace tessel::nn {
namespace {

TEST(LibraryAttention, AvailableExactlyFromLibtorch25) {
  EXPECT_EQ(library_attention_available(),
            TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5));
}

// q [B, T, Hq, D] etc. viewed as [B, heads, T, D], as Attention passes them;
// optionally a sliding window and packed documents (the mask form a GPU
// takes, docs/gpu.md).
void check_against_reference(at::ScalarType dtype, int64_t T, double tol,
                             std::optional<int64_t> window = {}, bool documents = false) {
  if (!library_attention_available()) GTEST_SKIP() << "libtorch " << TORCH_VERSION << " has no fused attention";
  const int64_t B = 2, Hq = 6, Hkv = 2, D = 16;
  const double scale = 0.3;
  at::manual_seed(11);
  const auto opts = at::TensorOptions().dtype(dtype);
  const at::Tensor q0 = at::randn({B, T, Hq, D}, opts), k0 = at::randn({B, T, Hkv, D}, opts);
  const at::Tensor v0 = at::randn({B, T, Hkv, D}, opts), dout = at::randn({B, Hq, T, D}, opts);

  // Documents of lengths 5, 11, ... restarting along each row (row 1 shifted).
  at::Tensor docs;
  if (documents)
    docs = (at::arange(T, at::kLong).unsqueeze(0) + at::tensor({0, 3}, at::kLong).unsqueeze(1))
               .div(11, "floor");

  at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  const at::Tensor ref = causal_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                          scale, window, std::nullopt, docs);
  ref.backward(dout);

  at::Tensor lq = q0.clone().requires_grad_(), lk = k0.clone().requires_grad_(), lv = v0.clone().requires_grad_();
  const at::Tensor out = library_causal_attention(lq.transpose(1, 2), lk.transpose(1, 2),
                                                  lv.transpose(1, 2), scale, window, docs);
  out.backward(dout);
  test_support::expect_allclose(out, ref, tol, "out");
  test_support::expect_allclose(lq.grad(), q.grad(), tol, "dq");
  test_support::expect_allclose(lk.grad(), k.grad(), tol, "dk");
  test_support::expect_allclose(lv.grad(), v.grad(), tol, "dv");
}

TEST(LibraryAttention, MatchesCausalAttentionInFloat64) { check_against_reference(at::kDouble, 37, 1e-10); }
TEST(LibraryAttention, MatchesCausalAttentionInFloat32) { check_against_reference(at::kFloat, 300, 2e-5); }
// A row of 2 windows or more goes in bands of queries (nn/window_bands.h), a shorter one as one mask.
TEST(LibraryAttention, SlidingWindowInBands) {
  ASSERT_TRUE(window_bands_pay(37, 8));
  check_against_reference(at::kDouble, 37, 1e-10, 8);
  check_against_reference(at::kFloat, 300, 2e-5, 64);
}
TEST(LibraryAttention, SlidingWindowAsOneMask) {
  ASSERT_FALSE(window_bands_pay(37, 19));
  check_against_reference(at::kDouble, 37, 1e-10, 19);
}
TEST(LibraryAttention, PackedDocumentsAsAMask) {
  check_against_reference(at::kDouble, 37, 1e-10, {}, true);
}
TEST(LibraryAttention, WindowAndDocumentsTogether) {
  check_against_reference(at::kDouble, 37, 1e-10, 4, true);
}

}  // namespace
}  // namespace tessel::nn
