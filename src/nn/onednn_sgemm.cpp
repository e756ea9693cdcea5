#include "nn/onednn_sgemm.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/error.h"
#include "nn/format.h"

namespace tessel::nn {

namespace {

// oneDNN's C entry point (dnnl.h, stable since oneDNN 1.0): row-major
// C = alpha * op(A) * op(B) + beta * C, op given by 'N' or 'T'; returns
// dnnl_success (0) or an error code.
using Sgemm = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                      int64_t ldc);

Sgemm sgemm() {
  static const auto found = reinterpret_cast<Sgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
  return found;
}

// How sgemm reads a 2-D operand: as stored ('N', rows ld apart) or as the
// transpose of a row-major matrix ('T', columns ld apart).
struct Layout {
  char trans;
  int64_t ld;
};

// The layout sgemm can read `t` [rows, cols] in where it lies, if any.
std::optional<Layout> in_place_layout(const at::Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  // A size-1 dimension's stride is never used to step, so any value does.
  const bool unit_col_step = t.stride(1) == 1 || cols == 1;
  const bool unit_row_step = t.stride(0) == 1 || rows == 1;
  if (unit_col_step && (rows == 1 || t.stride(0) >= cols)) return Layout{'N', rows == 1 ? cols : t.stride(0)};
  if (unit_row_step && (cols == 1 || t.stride(1) >= rows)) return Layout{'T', cols == 1 ? rows : t.stride(1)};
  return std::nullopt;
}

// A batch of matrices [B, rows, cols] sharing one layout: the tensor
// itself, or a contiguous copy where sgemm cannot read it as it lies.
struct Operand {
  at::Tensor tensor;
  Layout layout;
};

Operand operand(const at::Tensor& t) {
  if (const auto layout = in_place_layout(t.select(0, 0))) return {t, *layout};
  at::Tensor dense = t.contiguous();
  return {dense, Layout{'N', t.size(-1)}};
}

}  // namespace

bool use_onednn_sgemm(const char* choice, bool found, bool cpu_has_avx512) {
  const std::string value = choice != nullptr ? choice : "";
  if (value.empty() || value == "auto") return found && cpu_has_avx512;
  if (value == "onednn") {
    if (found) return true;
    // Forced but absent: say so rather than run on the BLAS the user meant to avoid.
    throw UsageError(
        "TESSEL_GEMM=onednn, but this process's libtorch has no oneDNN sgemm (PyPI's libtorch 2.x does "
        "not export it); use auto or aten");
  }
  if (value == "aten") return false;
  throw UsageError(fmt::format("TESSEL_GEMM='{}' is unknown; use auto, onednn or aten", value));
}

bool onednn_sgemm_found() { return sgemm() != nullptr; }

bool onednn_sgemm_preferred() {
  static const bool preferred =
      use_onednn_sgemm(std::getenv("TESSEL_GEMM"), onednn_sgemm_found(), __builtin_cpu_supports("avx512f"));
  return preferred;
}

namespace {

bool float32_cpu_nonempty(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat && t.device().is_cpu() && t.numel() > 0;
}

// a [B, M, K] · b [B, K, N], one sgemm per batch, for onednn_mm (B = 1) and
// onednn_bmm.
at::Tensor batched_sgemm(const at::Tensor& a, const at::Tensor& b) {
  const Operand lhs = operand(a), rhs = operand(b);
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  at::Tensor out = at::empty({batch, m, n}, a.options());
  const float* a_data = lhs.tensor.data_ptr<float>();
  const float* b_data = rhs.tensor.data_ptr<float>();
  float* out_data = out.data_ptr<float>();
  for (int64_t i = 0; i < batch; ++i) {
    const int status = sgemm()(lhs.layout.trans, rhs.layout.trans, m, n, k, 1.0F, a_data + i * lhs.tensor.stride(0),
                               lhs.layout.ld, b_data + i * rhs.tensor.stride(0), rhs.layout.ld, 0.0F,
                               out_data + i * m * n, n);
    TESSEL_CHECK(status == 0, "oneDNN sgemm failed (status {}) on batch {} of [{}, {}, {}] x [{}, {}, {}]", status, i,
                 batch, m, k, batch, k, n);
  }
  return out;
}

}  // namespace

bool onednn_mm_applies(const at::Tensor& a, const at::Tensor& b) {
  return onednn_sgemm_found() && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) &&
         float32_cpu_nonempty(a) && float32_cpu_nonempty(b);
}

at::Tensor onednn_mm(const at::Tensor& a, const at::Tensor& b) {
  TESSEL_CHECK(onednn_mm_applies(a, b),
               "onednn_mm: needs oneDNN's sgemm and non-empty float32 CPU matrices [M, K] x [K, N], got {} x {}",
               shape_string(a.sizes()), shape_string(b.sizes()));
  // Named for libtorch's profiler (bench_profile_step), as at::mm would be.
  RECORD_FUNCTION("tessel::onednn_mm", std::vector<c10::IValue>{});
  return batched_sgemm(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
}

bool onednn_bmm_applies(const at::Tensor& a, const at::Tensor& b) {
  return onednn_sgemm_found() && a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) &&
         a.size(2) == b.size(1) && float32_cpu_nonempty(a) && float32_cpu_nonempty(b);
}

at::Tensor onednn_bmm(const at::Tensor& a, const at::Tensor& b) {
  TESSEL_CHECK(onednn_bmm_applies(a, b),
               "onednn_bmm: needs oneDNN's sgemm and non-empty float32 CPU batches [B, M, K] x [B, K, N], got {} x {}",
               shape_string(a.sizes()), shape_string(b.sizes()));
  RECORD_FUNCTION("tessel::onednn_bmm", std::vector<c10::IValue>{});
  return batched_sgemm(a, b);
}

}  // namespace tessel::nn
